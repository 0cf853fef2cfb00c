"""The :class:`Memif` facade: one memif interface, client or server role.

::

    pool = pktbuf.PktmbufPool(8192)
    m = Memif.client("/run/memif.sock", id=0, pool=pool)     # or Memif.server(...)
    m.wait_connected(5)
    pkts = m.rx_burst(32)                  # int32 mbuf handles, yours to free
    sent = m.tx_burst(handles)             # the first `sent` are now the interface's
    m.close()

``m.rx_queue(i)`` / ``m.tx_queue(i)`` return the :data:`~pktbuf.memif.queue.MemifQueue` to
pass to the kernels :func:`~pktbuf.memif.datapath.memif_rx_burst` /
:func:`~pktbuf.memif.datapath.memif_tx_burst` from your own ``@njit`` loop; they stay valid across
reconnects.

A background thread per socket (:class:`~pktbuf.memif.control.ControlLoop`) runs the control
channel.  ``state`` is one of ``"disconnected"`` (client not connected), ``"listening"``
(server waiting for its client), ``"connecting"``, ``"connected"``, ``"closed"``;
``disconnect_reason`` is the last reason the link went down for (the peer's DISCONNECT string,
ours, ``"Peer closed the connection"``, or a data-path validation failure).

Memory ownership follows the protocol: the client creates every region (memfd), ring and
eventfd; the server maps the client's regions.  A server maps a region only after checking
that the memfd really is as large as announced and is sealed against shrinking (it adds the
seal itself when the memfd allows it) -- otherwise a client could truncate it and crash us with
SIGBUS.  DPDK's zero-copy client shares its EAL memory in a memfd that cannot be sealed; a
server accepts such a region only with ``allow_unsealed=True`` (trusting that client not to
shrink it).  On disconnect the queues are taken down first (see :mod:`.queue`), then the socket is
closed, then memory is unmapped.
"""
from __future__ import annotations

import fcntl
import os
import threading

import numpy as np

from .._jit import kernel
from ..errors import InvalidArgument, MemifDisconnected, check_count, check_handles
from ..lcore import facade_lcore
from ..mempool.layout import LCORE_ANY, MAX_LCORE, DomainState
from ..rawmem import Region
from .datapath import memif_rx_burst, memif_tx_burst
from .rx_copy import rx_refill
from .zerocopy import zc_release_all, zc_rx_refill
from . import layout as L
from . import proto as P
from .control import ControlLoop, close_fds, make_address
from .peermem import PeerRegion
from .proto import ProtocolError
from .queue import (K_CLIENT_RX, K_CLIENT_RX_ZC, K_CLIENT_TX, K_CLIENT_TX_ZC,
                    K_NONE, K_SERVER_RX, K_SERVER_TX, MemifQueue, P_EQ, P_GENERAL, P_GT, P_LT,
                    PATH_NAMES, Q_BSIZE, Q_BUF_BASE, Q_EVENTFD, Q_KIND,
                    Q_MASK, Q_MBUF_CAP, Q_N, Q_NREGIONS, Q_PATH, Q_POOL, Q_PORT, Q_RING,
                    Q_ZC_REGION, QS_BYTES, QS_DROPS, QS_ERR, QS_ERR_VAL, QS_FALLBACK,
                    QS_HEAD, QS_KICKS, QS_LAST, QS_NOMBUF, QS_PACKETS, queue_alloc, queue_down,
                    queue_up)
from .validate import reason as v_reason

__all__ = ["Memif", "MemifDisconnected", "size_relation"]

DISCONNECTED = "disconnected"
LISTENING = "listening"
CONNECTING = "connecting"
CONNECTED = "connected"
CLOSED = "closed"

_F_GET_SEALS = getattr(fcntl, "F_GET_SEALS", 1034)
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
_F_SEAL_SHRINK = getattr(fcntl, "F_SEAL_SHRINK", 0x0002)


def size_relation(bsize: int, mbuf_cap: int) -> int:
    """The copy path for a memif buffer size and an mbuf data room (P_EQ / P_LT / P_GT)."""
    if bsize == mbuf_cap:
        return P_EQ
    return P_LT if bsize < mbuf_cap else P_GT


# -- facade entry points (arrays spread out: see pktbuf/api/_entry.py) ------------------------
@kernel
def _py_rx(mb, pools, rh, rs, cl, co, st, cfg, q0, q1, q2, q3, q4, q5, q6, q7, q8, lcore, out, n):
    dom = DomainState(mb, pools, rh, rs, cl, co, st, cfg)
    return memif_rx_burst(dom, MemifQueue(q0, q1, q2, q3, q4, q5, q6, q7, q8), lcore, out, n)


@kernel
def _py_tx(mb, pools, rh, rs, cl, co, st, cfg, q0, q1, q2, q3, q4, q5, q6, q7, q8, lcore, pk, n):
    dom = DomainState(mb, pools, rh, rs, cl, co, st, cfg)
    return memif_tx_burst(dom, MemifQueue(q0, q1, q2, q3, q4, q5, q6, q7, q8), lcore, pk, n)


# -- server listeners shared by interfaces on one socket --------------------------------------
_listeners: dict = {}
_listeners_lock = threading.Lock()


class Memif:
    """A memif interface.  Build it with :meth:`client` or :meth:`server`."""

    def __init__(self, role: str, socket: str = "/run/memif.sock", *, abstract: bool = True,
                 id: int = 0, secret=None, pool=None, rx_queues: int = 1, tx_queues: int = 1,
                 ring_size_log2: int = 10, buffer_size: int = 2048, zero_copy: bool = False,
                 tx_pools=(), reconnect: bool = True, interrupt: bool = False,
                 force_general: bool = False, name: str = "pktbuf", port: int = 0,
                 connect: bool = True, allow_unsealed: bool = False):
        if role not in ("client", "server"):
            raise InvalidArgument(f"role must be 'client' or 'server', got {role!r}")
        self.role = role
        self.id = check_count(id, "id", lo=0, hi=0xFFFFFFFF)
        sec = b"" if secret is None else (secret.encode() if isinstance(secret, str) else bytes(secret))
        if len(sec) > P.SECRET_SIZE:
            raise InvalidArgument(f"secret must be at most {P.SECRET_SIZE} bytes")
        self.secret = sec
        self.n_rx = check_count(rx_queues, "rx_queues", lo=0, hi=P.MAX_QUEUES)
        self.n_tx = check_count(tx_queues, "tx_queues", lo=0, hi=P.MAX_QUEUES)
        if self.n_rx + self.n_tx == 0:
            raise InvalidArgument("an interface needs at least one queue")
        self.log2 = check_count(ring_size_log2, "ring_size_log2", lo=1, hi=P.MAX_LOG2_RING_SIZE)
        self.bsize = check_count(buffer_size, "buffer_size", lo=1, hi=0xFFFF)
        if zero_copy and role != "client":
            raise InvalidArgument("zero-copy is a client-side mode (as in DPDK)")
        self.zero_copy = bool(zero_copy)
        self.reconnect = bool(reconnect)
        self.interrupt = bool(interrupt)
        self.force_general = bool(force_general)
        self.allow_unsealed = bool(allow_unsealed)
        nm = name.encode() if isinstance(name, str) else bytes(name)
        if len(nm) >= P.NAME_SIZE:
            raise InvalidArgument(f"name must be shorter than {P.NAME_SIZE} bytes")
        self.name = name
        self.port = check_count(port, "port", lo=0, hi=0xFFFE)
        if pool is None:
            from ..api.pools import PktmbufPool
            pool = PktmbufPool(max(4096, 4 * (1 << self.log2) * max(1, self.n_rx)), 256,
                               name=f"memif{self.id}")
        if not getattr(pool, "_is_mbuf", False):
            raise InvalidArgument("pool must be a PktmbufPool")
        self.pool = pool
        self.domain = pool.domain
        self._tx_pools = [pool] + [p for p in tx_pools if p is not pool]
        for p in self._tx_pools:
            if p.domain is not self.domain:
                raise InvalidArgument("tx_pools must be in the pool's domain")
            if zero_copy and p.region.size >= 1 << 32:
                raise InvalidArgument("zero-copy pools must be smaller than 4 GiB")
        self.mbuf_cap = int(pool.data_room) - int(pool.headroom)
        if self.mbuf_cap <= 0:
            raise InvalidArgument("the pool's mbufs have no data room after the headroom")
        self.path = P_GENERAL if force_general else size_relation(self.bsize, self.mbuf_cap)
        self.address = make_address(socket, abstract)
        self.socket_path = socket
        self.abstract = abstract
        self.rxq = [queue_alloc() for _ in range(self.n_rx)]
        self.txq = [queue_alloc() for _ in range(self.n_tx)]
        self._dom_args = tuple(self.domain.state)
        self._cond = threading.Condition()
        self._state = LISTENING if role == "server" else DISCONNECTED
        self._reason: str | None = None
        self._connects = 0
        self._closed = False
        self._regions: list[Region] = []       # client: ours; server: the peer's, mapped
        self._efds: list[int] = []
        self._plan_info = None
        self.peer_name = b""
        self._loop = None
        if role == "server":
            self._loop = self._listener_acquire()
        else:
            self._loop = ControlLoop(self.address, "client", name)
            self._loop.ifaces[self.id] = self
            if connect:
                self._loop.start()

    # -- constructors --------------------------------------------------------------------------
    @classmethod
    def client(cls, socket: str = "/run/memif.sock", **kw) -> "Memif":
        """A client: creates the shared memory and connects (and reconnects) to a server."""
        return cls("client", socket, **kw)

    @classmethod
    def server(cls, socket: str = "/run/memif.sock", **kw) -> "Memif":
        """A server: listens on ``socket`` and maps the memory its client creates."""
        return cls("server", socket, **kw)

    def _listener_acquire(self) -> ControlLoop:
        with _listeners_lock:
            loop = _listeners.get(self.address)
            if loop is None:
                loop = ControlLoop(self.address, "server", self.name)
                loop.ifaces[self.id] = self
                loop.start()
                _listeners[self.address] = loop
            else:
                with loop._lock:
                    if self.id in loop.ifaces:
                        raise InvalidArgument(f"socket already has a server interface with id {self.id}")
                    loop.ifaces[self.id] = self
            return loop

    # -- state ---------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    @property
    def disconnect_reason(self) -> str | None:
        return self._reason

    @property
    def connected(self) -> bool:
        return self._state == CONNECTED

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connect_count(self) -> int:
        """How many times the link has come up."""
        return self._connects

    def _set_state(self, s: str) -> None:
        with self._cond:
            self._state = s
            self._cond.notify_all()

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Block until connected (True) or ``timeout`` seconds passed (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._state == CONNECTED or self._closed, timeout) \
                and self._state == CONNECTED

    def wait_disconnected(self, timeout: float | None = None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._state != CONNECTED, timeout)

    # -- queues --------------------------------------------------------------------------------
    def rx_queue(self, qid: int = 0) -> MemifQueue:
        return self.rxq[check_count(qid, "qid", lo=0, hi=self.n_rx - 1)]

    def tx_queue(self, qid: int = 0) -> MemifQueue:
        return self.txq[check_count(qid, "qid", lo=0, hi=self.n_tx - 1)]

    def _lcore(self, lcore) -> int:
        if lcore is None:
            return facade_lcore()
        return check_count(lcore, "lcore", lo=LCORE_ANY, hi=MAX_LCORE - 1)

    def rx_burst(self, n: int = 32, qid: int = 0, *, out: np.ndarray | None = None,
                 lcore: int | None = None) -> np.ndarray:
        """Receive up to ``n`` packets; returns their mbuf handles (yours to free)."""
        if self._closed:
            raise MemifDisconnected("interface is closed")
        q = self.rx_queue(qid)
        n = check_count(n, "n", lo=0, hi=1 << 16)
        if out is None:
            out = np.empty(n, np.int32)
        elif not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.ndim == 1
                  and out.flags.c_contiguous and out.flags.writeable and out.size >= n):
            raise InvalidArgument("out must be a writeable contiguous int32 array of at least n")
        k = _py_rx(*self._dom_args, *q, self._lcore(lcore), out, n)
        return out[:k]

    def tx_burst(self, mbufs, qid: int = 0, *, lcore: int | None = None) -> int:
        """Send packets (mbuf handles); returns how many were taken, from the front.

        Those are now the interface's (freed when sent); the rest are still yours.
        """
        if self._closed:
            raise MemifDisconnected("interface is closed")
        q = self.tx_queue(qid)
        a = check_handles(mbufs, "mbufs")
        if a.size and (a.min() < 0 or a.max() >= self.domain.state.mb.size):
            raise InvalidArgument("mbufs holds a value that is not an mbuf handle")
        return int(_py_tx(*self._dom_args, *q, self._lcore(lcore), a, a.size))

    def stats(self) -> dict:
        """Counters summed over the queues (they survive reconnects)."""
        def tot(qs, w):
            return int(sum(int(q.st[w]) for q in qs))
        return {"rx_packets": tot(self.rxq, QS_PACKETS), "rx_bytes": tot(self.rxq, QS_BYTES),
                "rx_nombuf": tot(self.rxq, QS_NOMBUF), "tx_packets": tot(self.txq, QS_PACKETS),
                "tx_bytes": tot(self.txq, QS_BYTES), "tx_ring_full": tot(self.txq, QS_DROPS),
                "kicks": tot(self.txq, QS_KICKS),
                "fallbacks": tot(self.rxq, QS_FALLBACK) + tot(self.txq, QS_FALLBACK),
                "connects": self._connects}

    @property
    def path_name(self) -> str:
        """The copy path chosen for this interface's queues."""
        return "zero-copy" if self.zero_copy else PATH_NAMES[self.path]

    def rx_eventfd(self, qid: int = 0) -> int:
        """The eventfd of an Rx queue's ring (-1 when down), for select/epoll in interrupt mode."""
        return int(self.rx_queue(qid).cfg[Q_EVENTFD])

    # -- control-loop callbacks (run on the control thread) ----------------------------------
    def _want_connect(self) -> bool:
        return not self._closed and (self.reconnect or self._connects == 0)

    def _connect_failed(self, why: str) -> None:
        self._reason = why

    def _datapath_fault(self) -> str | None:
        for q in self.rxq + self.txq:
            if q.st[QS_ERR]:
                return f"{v_reason(q.st[QS_ERR])} ({int(q.st[QS_ERR_VAL])})"
        return None

    def _client_plan(self, hello: P.Hello) -> list:
        """On HELLO: negotiate, create regions, rings and eventfds; return the messages."""
        n_c2s = min(hello.max_c2s_ring + 1, self.n_tx)
        n_s2c = min(hello.max_s2c_ring + 1, self.n_rx)
        log2 = min(hello.max_log2_ring_size, self.log2)
        if log2 < 1 or n_c2s + n_s2c == 0:
            raise ProtocolError(P.R_RING_SIZE, "server offers no usable ring")
        self._release_memory()
        nring = 1 << log2
        rs = L.ring_bytes(log2)
        if self.zero_copy:
            if len(self._tx_pools) > hello.max_region:
                raise ProtocolError(P.R_REGION_INDEX, "server accepts too few regions")
            r0 = Region(rs * (n_c2s + n_s2c), "memif_region_0")
            rings = [(True, k, k * rs) for k in range(n_c2s)] + \
                    [(False, k, (n_c2s + k) * rs) for k in range(n_s2c)]
            buffers = None
        else:
            lay = L.copy_region_layout(n_c2s, n_s2c, log2, self.bsize)
            if lay["size"] >= 1 << 32:
                raise ProtocolError(P.R_REGION_SIZE, "rings x buffer size exceed 4 GiB")
            r0 = Region(lay["size"], "memif_region_0")
            rings = lay["rings"]
            buffers = lay["buffers"]
        self._regions = [r0]
        arr = r0.array
        info = []
        msgs = [(P.build_init(self.id, self.secret, self.name), None),
                (P.build_add_region(0, r0.size), r0.fd)]
        if self.zero_copy:
            for i, p in enumerate(self._tx_pools):
                msgs.append((P.build_add_region(i + 1, p.region.size), p.region.fd))
        for c2s, k, off in rings:
            L.init_ring(arr, off, log2)
            if buffers is not None:
                d = L.desc_view(arr, off, log2)
                g = k if c2s else n_c2s + k
                d["offset"] = buffers + (g * nring + np.arange(nring, dtype=np.int64)) * self.bsize
                d["length"] = self.bsize
            efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._efds.append(efd)
            info.append((c2s, k, off, efd))
            msgs.append((P.build_add_ring(c2s, k, 0, off, log2), efd))
        msgs.append((P.build_connect(self.name), None))
        self._plan_info = (n_c2s, n_s2c, log2, buffers, info)
        self.peer_name = hello.name
        return msgs

    def _client_connected(self, msg: P.Connected) -> None:
        """On CONNECTED: check our rings, reset them, configure the queues, first refill."""
        n_c2s, n_s2c, log2, buffers, info = self._plan_info
        r0 = self._regions[0]
        nring = 1 << log2
        table = [(r0.address, r0.size)]
        if self.zero_copy:
            table += [(p.region.address, p.region.size) for p in self._tx_pools]
        for c2s, k, off, efd in info:
            hdr = L.ring_header_view(r0.array, off)
            if int(hdr["cookie"]) != P.COOKIE:
                raise ProtocolError(P.R_COOKIE)
            hdr["head"] = 0
            hdr["tail"] = 0
            if not c2s:   # the receiver owns MASK_INT: C2S flags are the server's
                hdr["flags"] = 0 if self.interrupt else L.RING_FLAG_MASK_INT
            q = self.txq[k] if c2s else self.rxq[k]
            if self.zero_copy:
                kind = K_CLIENT_TX_ZC if c2s else K_CLIENT_RX_ZC
            else:
                kind = K_CLIENT_TX if c2s else K_CLIENT_RX
            base = 0
            if buffers is not None:
                g = k if c2s else n_c2s + k
                base = r0.address + buffers + g * nring * self.bsize
            self._config_queue(q, kind, k, r0.address + off, log2, efd, table, base)
        for i, q in enumerate(self.rxq):
            if i < n_s2c:
                if self.zero_copy:
                    q.pool_region[:] = -1
                    q.cfg[Q_ZC_REGION] = 1
                    zc_rx_refill(self.domain.state, q, LCORE_ANY)
                else:
                    rx_refill(q)
        if self.zero_copy:
            for q in self.txq:
                q.pool_region[:] = -1
                for i, p in enumerate(self._tx_pools):
                    q.pool_region[p.id] = i + 1
        self.peer_if_name = msg.if_name

    def _server_connect(self, hs) -> None:
        """On CONNECT: map the client's regions (checked), check and reset its rings."""
        regions, rings, fds = hs.take()
        # from here on we own the fds: the eventfds now, the region fds once mapped
        self._efds = list(fds.values())
        self._release_regions()
        for fd, size in regions:
            self._regions.append(self._map_region(fd, size))
        regions.clear()
        table = [(r.address, r.size) for r in self._regions]
        self.peer_name = hs.init.name
        for (c2s, k), ar in sorted(rings.items()):
            if ar.region >= len(self._regions):
                raise ProtocolError(P.R_RING_REGION, f"region {ar.region}")
            r = self._regions[ar.region]
            if ar.offset + L.ring_bytes(ar.log2_ring_size) > r.size or ar.offset % 8:
                raise ProtocolError(P.R_RING_REGION, f"offset {ar.offset}")
            hdr = L.ring_header_view(r.array, ar.offset)
            if int(hdr["cookie"]) != P.COOKIE:
                raise ProtocolError(P.R_COOKIE)
            hdr["head"] = 0
            hdr["tail"] = 0
            if c2s:
                hdr["flags"] = 0 if self.interrupt else L.RING_FLAG_MASK_INT
            q = self.rxq[k] if c2s else self.txq[k]
            self._config_queue(q, K_SERVER_RX if c2s else K_SERVER_TX, k,
                               r.address + ar.offset, ar.log2_ring_size, fds[(c2s, k)], table, 0)

    def _map_region(self, fd: int, size: int) -> Region:
        try:
            st = os.fstat(fd)
        except OSError:
            close_fds([fd])
            raise ProtocolError(P.R_REGION_MAP, "bad fd") from None
        if st.st_size < size:
            close_fds([fd])
            raise ProtocolError(P.R_REGION_SIZE, f"memfd has {st.st_size} bytes, {size} announced")
        try:
            seals = fcntl.fcntl(fd, _F_GET_SEALS)
            if not seals & _F_SEAL_SHRINK:
                fcntl.fcntl(fd, _F_ADD_SEALS, _F_SEAL_SHRINK)
        except OSError:
            # not a sealable memfd: the client could truncate it under us (SIGBUS).  DPDK's
            # zero-copy client shares its EAL memory this way; accept only if told to trust it
            if not self.allow_unsealed:
                close_fds([fd])
                raise ProtocolError(P.R_UNSEALED) from None
        if os.fstat(fd).st_size < size:
            close_fds([fd])
            raise ProtocolError(P.R_REGION_SIZE, "memfd shrank")
        try:
            return PeerRegion(fd, size, "memif-peer")
        except (OSError, ValueError) as e:
            close_fds([fd])
            raise ProtocolError(P.R_REGION_MAP, str(e)) from None

    def _config_queue(self, q, kind, qid, ring_addr, log2, efd, table, buf_base) -> None:
        c = q.cfg
        c[:] = 0
        c[Q_KIND] = kind
        c[Q_PATH] = self.path
        c[Q_RING] = ring_addr
        c[Q_N] = 1 << log2
        c[Q_MASK] = (1 << log2) - 1
        c[Q_BSIZE] = self.bsize
        c[Q_BUF_BASE] = buf_base
        c[Q_POOL] = self.pool.id
        c[Q_MBUF_CAP] = self.mbuf_cap
        c[Q_EVENTFD] = efd
        c[Q_NREGIONS] = len(table)
        c[Q_PORT] = self.port
        q.regions[:] = 0
        for i, (a, s) in enumerate(table):
            q.regions[i, 0] = a
            q.regions[i, 1] = s
        q.st[QS_LAST] = 0
        q.st[QS_HEAD] = 0
        q.st[QS_ERR] = 0
        q.st[QS_ERR_VAL] = 0

    def _link_up(self) -> None:
        for q in self.rxq + self.txq:
            if q.cfg[Q_KIND] != K_NONE:
                queue_up(q.st)
        self._connects += 1
        self._reason = None
        self._set_state(CONNECTED)

    def _link_down(self) -> None:
        """Stop the data path: no burst is inside any queue when this returns."""
        for q in self.rxq:
            if q.cfg[Q_EVENTFD] >= 0 and q.cfg[Q_KIND] != K_NONE:
                try:   # wake a receiver blocked in rx_wait
                    os.eventfd_write(int(q.cfg[Q_EVENTFD]), 1)
                except OSError:
                    pass
        for q in self.rxq + self.txq:
            while not queue_down(q.st, 1_000_000):
                pass

    def _teardown(self, reason) -> None:
        """After the link is down and the socket closed: release mbufs and memory."""
        for q in self.rxq + self.txq:
            if self.zero_copy:
                zc_release_all(self.domain.state, q)
            q.cfg[Q_KIND] = K_NONE
            q.cfg[Q_EVENTFD] = -1
        self._release_memory()
        if reason:
            self._reason = reason
        self._set_state(CLOSED if self._closed else (LISTENING if self.role == "server" else DISCONNECTED))

    def _release_regions(self) -> None:
        for r in self._regions:
            r.close()
        self._regions = []

    def _release_memory(self) -> None:
        self._release_regions()
        close_fds(self._efds)
        self._efds = []

    # -- life cycle ----------------------------------------------------------------------------
    def disconnect(self, reason: str = "Disconnected by application") -> None:
        """Drop the current connection (a client with ``reconnect`` will connect again)."""
        self._loop.disconnect(self, reason)

    def close(self) -> None:
        """Disconnect (sending DISCONNECT "Device closed") and release everything."""
        if self._closed:
            return
        self._closed = True
        loop = self._loop
        loop.disconnect(self, P.R_CLOSED)
        if self.role == "server":
            with _listeners_lock:
                with loop._lock:
                    loop.ifaces.pop(self.id, None)
                    last = not loop.ifaces
                if last:
                    _listeners.pop(self.address, None)
            if last:
                loop.stop()
        else:
            loop.stop()
        self._release_memory()
        self._set_state(CLOSED)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return (f"Memif({self.role}, socket={self.socket_path!r}, id={self.id}, state={self._state}, "
                f"path={self.path_name})")
