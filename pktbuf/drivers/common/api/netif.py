"""What a port on a Linux interface asks about it: index, MTU, MAC address, link state, speed.

Every question goes through a socket the port owns (``ioctl`` on an ``ifreq``), so the
answers stay those of the namespace the port was opened in, wherever the caller is now.
"""
from __future__ import annotations

import ctypes
import fcntl
import socket
import struct

__all__ = ["ifreq_ioctl", "if_index", "if_mtu", "if_mac", "if_link", "if_rx_queues",
           "SIOCGIFINDEX",
           "InterfacePort"]

SIOCGIFFLAGS = 0x8913
SIOCGIFMTU = 0x8921
SIOCGIFHWADDR = 0x8927
SIOCGIFINDEX = 0x8933
SIOCETHTOOL = 0x8946
ETHTOOL_GSET = 1
ETHTOOL_GCHANNELS = 0x3C
IFF_UP = 0x1
IFF_RUNNING = 0x40


def ifreq_ioctl(sock: socket.socket, req: int, iface: str, tail: bytes = b"") -> bytearray:
    """``ioctl(sock, req, &ifreq)`` with ``ifr_name = iface`` and ``tail`` at offset 16."""
    buf = bytearray(40)
    name = iface.encode()
    buf[:len(name)] = name
    buf[16:16 + len(tail)] = tail
    fcntl.ioctl(sock.fileno(), req, buf)
    return buf


def if_index(sock: socket.socket, iface: str) -> int:
    return struct.unpack_from("i", ifreq_ioctl(sock, SIOCGIFINDEX, iface), 16)[0]


def if_mtu(sock: socket.socket, iface: str) -> int:
    return struct.unpack_from("i", ifreq_ioctl(sock, SIOCGIFMTU, iface), 16)[0]


def if_mac(sock: socket.socket, iface: str) -> bytes:
    return bytes(ifreq_ioctl(sock, SIOCGIFHWADDR, iface)[18:24])


def if_speed(sock: socket.socket, iface: str) -> int:
    """The link speed ethtool reports (Mb/s; veth: 10000), 0 when unknown."""
    cmd = ctypes.create_string_buffer(struct.pack("I", ETHTOOL_GSET) + bytes(40), 44)
    try:
        ifreq_ioctl(sock, SIOCETHTOOL, iface, struct.pack("P", ctypes.addressof(cmd)))
    except OSError:
        return 0
    lo, hi = struct.unpack_from("H", cmd.raw, 12)[0], struct.unpack_from("H", cmd.raw, 28)[0]
    speed = lo | (hi << 16)
    return 0 if speed in (0xFFFFFFFF, 0xFFFF) else speed


def if_rx_queues(sock: socket.socket, iface: str) -> int | None:
    """How many Rx queues ``iface`` has now (``ETHTOOL_GCHANNELS``: its Rx-only plus combined
    channels; veth: ``real_num_rx_queues``), None when the driver does not say."""
    cmd = ctypes.create_string_buffer(struct.pack("I", ETHTOOL_GCHANNELS) + bytes(32), 36)
    try:
        ifreq_ioctl(sock, SIOCETHTOOL, iface, struct.pack("P", ctypes.addressof(cmd)))
    except OSError:
        return None
    _c, _mr, _mt, _mo, _mc, rx, _tx, _other, combined = struct.unpack("9I", cmd.raw)
    n = rx + combined
    return n if n > 0 else None


def if_link(sock: socket.socket | None, iface: str) -> dict:
    """UP when the interface is up and has carrier (``IFF_UP | IFF_RUNNING``), with its
    speed; DOWN for a closed port (``sock`` None)."""
    if sock is None:
        return {"status": "DOWN", "speed": 0, "duplex": "full-duplex"}
    try:
        fl = struct.unpack_from("H", ifreq_ioctl(sock, SIOCGIFFLAGS, iface), 16)[0]
        up = fl & (IFF_UP | IFF_RUNNING) == (IFF_UP | IFF_RUNNING)
    except OSError:
        up = False
    return {"status": "UP" if up else "DOWN", "speed": if_speed(sock, iface) if up else 0,
            "duplex": "full-duplex"}


class InterfacePort:
    """What a port on a Linux interface answers about it (mixed in before
    :class:`~pktbuf.drivers.common.api.port.Port`): ``mtu``, ``mac_addr`` and ``link()``, asked through the
    port's own socket ``self._probe`` while it is open, the last answers once it is closed.
    ``_mtu_changed(mtu)`` hands a new MTU to the Tx queues."""

    _probe = None
    _mtu = 0
    _mac = bytes(6)

    def _mtu_changed(self, mtu: int) -> None:
        pass

    @property
    def mtu(self) -> int:
        """The interface's MTU, read now (and handed to the Tx queues, which refuse longer
        frames); once closed, the last one read."""
        if self.closed:
            return self._mtu
        mtu = if_mtu(self._probe, self.iface)
        self._mtu_changed(mtu)
        self._mtu = mtu
        return mtu

    @property
    def mac_addr(self) -> bytes:
        """The interface's MAC address, read now; once closed, the last one read."""
        if not self.closed:
            self._mac = if_mac(self._probe, self.iface)
        return self._mac

    def link(self) -> dict:
        """UP when the interface is up and has carrier (``IFF_UP | IFF_RUNNING``); its speed
        as ethtool reports it (veth: 10000)."""
        return if_link(None if self.closed else self._probe, self.iface)
