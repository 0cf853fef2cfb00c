"""What a port on a Linux interface asks about it: index, MTU, MAC address, link state, speed.

Every question goes through a socket the port owns (``ioctl`` on an ``ifreq``), so the
answers stay those of the namespace the port was opened in, wherever the caller is now.
"""
from __future__ import annotations

import ctypes
import fcntl
import socket
import struct

__all__ = ["ifreq_ioctl", "if_index", "if_mtu", "if_mac", "if_link", "SIOCGIFINDEX"]

SIOCGIFFLAGS = 0x8913
SIOCGIFMTU = 0x8921
SIOCGIFHWADDR = 0x8927
SIOCGIFINDEX = 0x8933
SIOCETHTOOL = 0x8946
ETHTOOL_GSET = 1
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
