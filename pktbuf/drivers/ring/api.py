"""``net_ring``: ports whose queues are pktbuf rings of mbuf handles (DPDK's ring PMD).

::

    lo = RingPort(pool=pool)                       # one queue pair on one ring: a loopback
    a2b, b2a = Ring(1024), Ring(1024)
    a = RingPort([b2a], [a2b], pool=pool)          # rte_eth_from_rings: two ports wired
    b = RingPort([a2b], [b2a], pool=pool, port_id=1)

Sending moves mbuf handles into the ring (no copy); receiving takes them out.  As a device
string: ``net_ring0`` (a loopback queue pair), or ``net_ring0,nodeaction=NAME:NODE:ACTION``
with ACTION ``CREATE`` (make ring NAME) or ``ATTACH`` (use the ring NAME another port of this
process created): every port on ring NAME receives what any of them sends, as with DPDK's
``nodeaction``.  Repeat ``nodeaction`` for more queue pairs.  When the last port using a ring
closes, the mbufs still in it are freed.
"""
from __future__ import annotations

import threading

from ...block import Block
from ...errors import InvalidArgument, check_count
from .burst import eth_ring_rx_burst, eth_ring_tx_burst
from .layout import C_HDR, C_PORT, C_SIZE, C_SLOTS, ETH_RING_QUEUE, S_BYTES, S_ERRORS, S_PACKETS
from ..common.kinds import K_RING
from ..common.api.port import Port, check_devargs
from ...buf.ring.api import Ring

__all__ = ["RingPort"]

RING_SIZE = 1024                 # slots of a ring a port creates
_named: dict[str, list] = {}     # nodeaction NAME -> [ring, users]
_named_lock = threading.Lock()


class RingPort(Port):
    """A port over pktbuf :class:`~pktbuf.Ring` s: ``rx_rings[i]`` feeds Rx queue ``i``,
    ``tx_rings[i]`` takes Tx queue ``i``; with neither, one ring serves one queue pair (a
    loopback).  ``pool`` gives the domain (ring ports allocate nothing)."""

    driver = "net_ring"
    kind = K_RING
    _rx_kernel = eth_ring_rx_burst
    _tx_kernel = eth_ring_tx_burst

    def __init__(self, rx_rings=None, tx_rings=None, *, pool=None, name: str = "net_ring0",
                 port_id: int = 0):
        from ...buf.domain.pools import PktmbufPool
        if not isinstance(pool, PktmbufPool):
            raise InvalidArgument("a ring port needs pool= (a PktmbufPool: its domain)")
        super().__init__(name, port_id, pool)
        if rx_rings is None and tx_rings is None:
            r = Ring(RING_SIZE, sp=True, sc=True, name=name)
            rx_rings = tx_rings = [r]
            self._own = [r]
        else:
            self._own = []
        rx_rings, tx_rings = list(rx_rings or ()), list(tx_rings or ())
        for r in rx_rings + tx_rings:
            if not isinstance(r, Ring):
                raise InvalidArgument(f"rings must be pktbuf.Ring objects, got {type(r).__name__}")
            r._open()
        if not rx_rings and not tx_rings:
            raise InvalidArgument("a ring port needs at least one ring")
        self._rx_rings, self._tx_rings = rx_rings, tx_rings
        self._rxq = [self._queue(r) for r in rx_rings]
        self._txq = [self._queue(r) for r in tx_rings]
        self._names: list[str] = []

    def _queue(self, ring: Ring) -> Block:
        q = ETH_RING_QUEUE.create()
        q.cfg[C_HDR] = ring.hdr.ctypes.data
        q.cfg[C_SLOTS] = ring.slots.ctypes.data
        q.cfg[C_SIZE] = ring.slots.size
        q.cfg[C_PORT] = self.port_id
        return q

    @classmethod
    def from_devargs(cls, name: str, args, pool, *, port_id: int = 0, **kw) -> "RingPort":
        check_devargs("net_ring", args, ("nodeaction",))
        actions = args.getall("nodeaction") if hasattr(args, "getall") else (
            [args["nodeaction"]] if "nodeaction" in args else [])
        if not actions:
            return cls(pool=pool, name=name, port_id=port_id)
        parsed = []
        for a in actions:
            parts = a.split(":")
            if len(parts) != 3 or not parts[0] or parts[2].upper() not in ("CREATE", "ATTACH"):
                raise InvalidArgument(f"net_ring: nodeaction={a!r} is not NAME:NODE:CREATE|ATTACH")
            try:
                int(parts[1])
            except ValueError:
                raise InvalidArgument(f"net_ring: nodeaction={a!r}: NODE is not an integer") from None
            parsed.append((parts[0], parts[2].upper()))
        with _named_lock:
            for ring_name, action in parsed:
                if action == "CREATE" and ring_name in _named:
                    raise InvalidArgument(f"net_ring: ring {ring_name!r} exists already (ATTACH it)")
                if action == "ATTACH" and ring_name not in _named:
                    raise InvalidArgument(f"net_ring: no ring {ring_name!r} to attach to")
            rings = []
            for ring_name, action in parsed:
                if action == "CREATE":
                    _named[ring_name] = [Ring(RING_SIZE, name=ring_name), 0]
                rings.append(_named[ring_name][0])
            try:
                port = cls(rings, rings, pool=pool, name=name, port_id=port_id)
            except BaseException:
                for ring_name, action in parsed:
                    if action == "CREATE":
                        _named.pop(ring_name)[0].close()
                raise
            for ring_name, _ in parsed:
                _named[ring_name][1] += 1
            port._names = [n for n, _ in parsed]
        return port

    @property
    def nb_rx_queues(self) -> int:
        return len(self._rxq)

    @property
    def nb_tx_queues(self) -> int:
        return len(self._txq)

    def rx_queue(self, i: int = 0) -> Block:
        self._check_open()
        return self._rxq[check_count(i, "queue", lo=0, hi=len(self._rxq) - 1)]

    def tx_queue(self, i: int = 0) -> Block:
        self._check_open()
        return self._txq[check_count(i, "queue", lo=0, hi=len(self._txq) - 1)]

    def _queue_counters(self):
        rx = [{"packets": int(q.st[S_PACKETS]), "bytes": int(q.st[S_BYTES])} for q in self._rxq]
        tx = [{"packets": int(q.st[S_PACKETS]), "bytes": int(q.st[S_BYTES]),
               "errors": int(q.st[S_ERRORS])} for q in self._txq]
        return rx, tx

    def _drain(self, ring: Ring) -> None:
        """Free what is left in a ring no port uses any more."""
        while True:
            h = ring.dequeue_burst(256)
            if h.size == 0:
                break
            self.pool.domain.free_bulk(h)

    def _close(self) -> None:
        done = []
        with _named_lock:
            for n in self._names:
                ent = _named[n]
                ent[1] -= 1
                if ent[1] == 0:
                    del _named[n]
                    done.append(ent[0])
        for r in self._own + done:
            self._drain(r)
            r.close()
