"""``net_memif``: a :class:`~pktbuf.Memif` interface as a port of the port model.

Device string as DPDK's memif PMD takes it (its argument names and defaults):
``net_memif0,role=server,id=0,socket=/run/memif.sock,socket-abstract=yes,bsize=2048,rsize=10,
secret=...,zero-copy=no,mac=02:..``.  DPDK's default role is ``client``.  The queue counts come
from the application (``nb_rx_queues`` / ``nb_tx_queues``, testpmd's ``--rxq``/``--txq``).
"""
from __future__ import annotations

import os

from ....errors import InvalidArgument
from ...common.kinds import K_MEMIF
from ..datapath import memif_rx_burst, memif_tx_burst
from ..queue import QS_BYTES, QS_DROPS, QS_NOMBUF, QS_PACKETS
from .memif import Memif
from ...common.api.port import Port, arg_bool, arg_int, check_devargs

__all__ = ["MemifPort"]

ACCEPTED = ("role", "id", "socket", "socket-abstract", "secret", "bsize", "rsize",
            "zero-copy", "mac")


def parse_mac(driver: str, text: str) -> bytes:
    parts = text.split(":")
    try:
        b = bytes(int(p, 16) for p in parts)
    except ValueError:
        b = b""
    if len(b) != 6 or any(len(p) not in (1, 2) for p in parts):
        raise InvalidArgument(f"{driver}: mac={text!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    return b


class MemifPort(Port):
    """A memif interface as a port: ``MemifPort(Memif(...))`` or from a device string."""

    driver = "net_memif"
    kind = K_MEMIF
    mtu = 1500
    _rx_kernel = memif_rx_burst
    _tx_kernel = memif_tx_burst

    def __init__(self, memif: Memif, *, name: str = "net_memif0", port_id: int = 0,
                 mac: bytes | None = None):
        if not isinstance(memif, Memif):
            raise InvalidArgument(f"memif must be a Memif, got {type(memif).__name__}")
        super().__init__(name, port_id, memif.pool)
        self.memif = memif
        # DPDK gives a memif port a random locally administered MAC
        self.mac_addr = mac if mac is not None else bytes([0x02]) + os.urandom(5)

    @classmethod
    def from_devargs(cls, name: str, args, pool, *, port_id: int = 0, nb_rx_queues: int = 1,
                     nb_tx_queues: int = 1, **kw) -> "MemifPort":
        d = "net_memif"
        check_devargs(d, args, ACCEPTED)
        role = args.get("role", "client")
        role = {"master": "server", "slave": "client"}.get(role, role)
        if role not in ("server", "client"):
            raise InvalidArgument(f"{d}: role={role!r} is not server or client")
        mac = parse_mac(d, args["mac"]) if "mac" in args else None
        memif = Memif(role, args.get("socket", "/run/memif.sock"),
                      abstract=arg_bool(d, args, "socket-abstract", True),
                      id=arg_int(d, args, "id", 0, 0, 0xFFFFFFFF),
                      secret=args.get("secret"), pool=pool, rx_queues=nb_rx_queues,
                      tx_queues=nb_tx_queues, ring_size_log2=arg_int(d, args, "rsize", 10, 1, 14),
                      buffer_size=arg_int(d, args, "bsize", 2048, 1, 0xFFFF),
                      zero_copy=arg_bool(d, args, "zero-copy", False), port=port_id,
                      name=name[:31], **kw)
        return cls(memif, name=name, port_id=port_id, mac=mac)

    @property
    def nb_rx_queues(self) -> int:
        return self.memif.device.n_rx

    @property
    def nb_tx_queues(self) -> int:
        return self.memif.device.n_tx

    def rx_queue(self, i: int = 0):
        self._check_open()
        return self.memif.rx_queue(i)

    def tx_queue(self, i: int = 0):
        self._check_open()
        return self.memif.tx_queue(i)

    def _queue_counters(self):
        dev = self.memif.device
        rx = [{"packets": int(q.st[QS_PACKETS]), "bytes": int(q.st[QS_BYTES]),
               "nombuf": int(q.st[QS_NOMBUF])} for q in dev.rxq]
        tx = [{"packets": int(q.st[QS_PACKETS]), "bytes": int(q.st[QS_BYTES]),
               "errors": int(q.st[QS_DROPS])} for q in dev.txq]
        return rx, tx

    def link(self) -> dict:
        up = not self.closed and self.memif.connected
        return {"status": "UP" if up else "DOWN", "speed": 100000 if up else 0,
                "duplex": "full-duplex"}

    def _close(self) -> None:
        self.memif.close()
