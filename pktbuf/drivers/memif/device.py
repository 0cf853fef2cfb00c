"""The control plane of one memif interface: its memory, its queues, connect and teardown.

A :class:`MemifDevice` is what the socket's :class:`~pktbuf.drivers.memif.control.ControlLoop` talks to:
on HELLO a client creates its regions, rings and eventfds (:meth:`_client_plan`); on CONNECT a
server maps its client's regions (:meth:`_server_connect`); on CONNECTED or after CONNECT the
queues are configured and the link goes up; on any disconnect the data path is stopped first
(:meth:`_link_down`), then the socket is closed, then memory is released (:meth:`_teardown`).
The facade, :class:`pktbuf.Memif` (:mod:`pktbuf.drivers.memif.api.memif`), validates every argument before
it builds one; this class trusts what it is given.

``state`` is one of ``"disconnected"`` (client not connected), ``"listening"`` (server waiting
for its client), ``"connecting"``, ``"connected"``, ``"closed"``; ``disconnect_reason`` is the
last reason the link went down for (the peer's DISCONNECT string, ours, ``"Peer closed the
connection"``, or a data-path validation failure).

Memory ownership follows the protocol: the client creates every region (memfd), ring and
eventfd; the server maps the client's regions.  A server maps a region only after checking
that the memfd really is as large as announced and is sealed against shrinking (it adds the
seal itself when the memfd allows it) -- otherwise a client could truncate it and crash us with
SIGBUS.  DPDK's zero-copy client shares its EAL memory in a memfd that cannot be sealed; a
server accepts such a region only with ``allow_unsealed=True`` (trusting that client not to
shrink it).
"""
from __future__ import annotations

import fcntl
import os
import threading

import numpy as np

from ...errors import InvalidArgument, MemifSocketError, ProtocolError
from ...lcore import LCORE_ANY
from ...shm import Region
from . import layout as L
from . import proto as P
from .control import ControlLoop, close_fds
from .peermem import PeerRegion
from .queue import (K_CLIENT_RX, K_CLIENT_RX_ZC, K_CLIENT_TX, K_CLIENT_TX_ZC, K_NONE,
                    K_SERVER_RX, K_SERVER_TX, P_EQ, P_GT, P_LT, Q_BSIZE, Q_BUF_BASE, Q_EVENTFD,
                    Q_FN_GENERAL, Q_FN_PATH, Q_KIND, Q_MASK, Q_MBUF_CAP, Q_N, Q_NREGIONS, Q_PATH,
                    Q_POOL, Q_PORT, Q_RING, Q_ZC_REGION, QS_BYTES, QS_DROPS, QS_ERR, QS_ERR_VAL,
                    QS_FALLBACK, QS_HEAD, QS_KICKS, QS_LAST, QS_NOMBUF, QS_PACKETS, queue_alloc,
                    queue_down, queue_up)
from .rx_copy import rx_refill
from .validate import reason as v_reason
from .variants import queue_paths
from .zerocopy import zc_release_all, zc_rx_refill

__all__ = ["MemifDevice", "size_relation", "DISCONNECTED", "LISTENING", "CONNECTING",
           "CONNECTED", "CLOSED"]

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


# -- server listeners shared by the interfaces of one socket ---------------------------------
_listeners: dict = {}
_listeners_lock = threading.Lock()


class MemifDevice:
    """One memif interface's control-plane state (see the module docstring).

    ``dom`` is the domain state of ``pool_id`` (the Rx pool, of data room ``mbuf_cap``);
    ``tx_pools`` the ``(pool id, Region)`` of every pool a zero-copy client shares (the Rx pool
    first).  ``secret`` and ``name`` are bytes; ``path`` the copy path (``P_*``).
    """

    def __init__(self, role: str, address, *, id: int, secret: bytes, name: bytes,
                 n_rx: int, n_tx: int, log2: int, bsize: int, path: int, zero_copy: bool,
                 reconnect: bool, interrupt: bool, allow_unsealed: bool, port: int, dom,
                 pool_id: int, mbuf_cap: int, tx_pools, connect: bool = True):
        self.role = role
        self.address = address
        self.id = id
        self.secret = secret
        self.name = name
        self.n_rx = n_rx
        self.n_tx = n_tx
        self.log2 = log2
        self.bsize = bsize
        self.path = path
        self.zero_copy = zero_copy
        self.reconnect = reconnect
        self.interrupt = interrupt
        self.allow_unsealed = allow_unsealed
        self.port = port
        self.dom = dom
        self.pool_id = pool_id
        self.mbuf_cap = mbuf_cap
        self.tx_pools = list(tx_pools)
        self.rxq = [queue_alloc() for _ in range(n_rx)]
        self.txq = [queue_alloc() for _ in range(n_tx)]
        # the burst paths its queues will run that the bursts call through an address
        # (.variants): compiled or loaded now, not at connect; only a client is zero-copy
        zc = zero_copy and role == "client"
        self._fns = {rx: queue_paths(rx, zc) for rx in (True, False)}
        self._cond = threading.Condition()
        self._state = LISTENING if role == "server" else DISCONNECTED
        self._reason: str | None = None
        self._connects = 0
        self._closed = False
        self._regions: list = []            # client: ours (Region); server: the peer's (PeerRegion)
        self._efds: list[int] = []
        self._plan_info = None
        self.peer_name = b""
        self.peer_if_name = b""
        if role == "server":
            self._loop = self._listener_acquire()
        else:
            self._loop = ControlLoop(address, "client", name)
            self._loop.ifaces[id] = self
            if connect:
                self._loop.start()

    def _listener_acquire(self) -> ControlLoop:
        """The control loop of our socket: shared with the socket's other server interfaces,
        started (bound and listening) by the first."""
        with _listeners_lock:
            loop = _listeners.get(self.address)
            if loop is not None:
                with loop._lock:
                    if self.id in loop.ifaces:
                        raise InvalidArgument(
                            f"socket already has a server interface with id {self.id}")
                    loop.ifaces[self.id] = self
                return loop
            loop = ControlLoop(self.address, "server", self.name)
            loop.ifaces[self.id] = self
            try:
                loop.start()
            except OSError as e:
                loop.stop()
                raise MemifSocketError(f"cannot listen on the memif socket: {e.strerror or e}",
                                       errno=e.errno) from None
            _listeners[self.address] = loop
            return loop

    # -- state ---------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    @property
    def disconnect_reason(self) -> str | None:
        return self._reason

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connect_count(self) -> int:
        return self._connects

    @property
    def regions(self) -> list:
        """The regions of the current connection (client: ours; server: the peer's, mapped)."""
        return list(self._regions)

    @property
    def ring_offsets(self) -> list:
        """Client: ``(c2s, index, offset in region 0)`` of each ring of the current (or last
        planned) connection; server: ``[]``."""
        if self._plan_info is None:
            return []
        return [(c2s, k, off) for c2s, k, off, _ in self._plan_info[4]]

    @property
    def control(self) -> ControlLoop:
        """The control loop serving this interface's socket."""
        return self._loop

    def _set_state(self, s: str) -> None:
        with self._cond:
            self._state = s
            self._cond.notify_all()

    def wait_connected(self, timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._state == CONNECTED or self._closed, timeout) \
                and self._state == CONNECTED

    def wait_disconnected(self, timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._state != CONNECTED, timeout)

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
            if len(self.tx_pools) > hello.max_region:
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
            for i, (_, reg) in enumerate(self.tx_pools):
                msgs.append((P.build_add_region(i + 1, reg.size), reg.fd))
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
            table += [(reg.address, reg.size) for _, reg in self.tx_pools]
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
            self._config_queue(q, kind, r0.address + off, log2, efd, table, base)
        for i, q in enumerate(self.rxq):
            if i < n_s2c:
                if self.zero_copy:
                    q.pool_region[:] = -1
                    q.cfg[Q_ZC_REGION] = 1
                    zc_rx_refill(self.dom, q, LCORE_ANY)
                else:
                    rx_refill(q)
        if self.zero_copy:
            for q in self.txq:
                q.pool_region[:] = -1
                for i, (pid, _) in enumerate(self.tx_pools):
                    q.pool_region[pid] = i + 1
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
            self._config_queue(q, K_SERVER_RX if c2s else K_SERVER_TX, r.address + ar.offset,
                               ar.log2_ring_size, fds[(c2s, k)], table, 0)

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

    def _config_queue(self, q, kind, ring_addr, log2, efd, table, buf_base) -> None:
        c = q.cfg
        c[:] = 0
        c[Q_KIND] = kind
        c[Q_PATH] = self.path
        c[Q_FN_GENERAL], c[Q_FN_PATH] = self._fns[kind in (K_CLIENT_RX, K_SERVER_RX,
                                                           K_CLIENT_RX_ZC)]
        c[Q_RING] = ring_addr
        c[Q_N] = 1 << log2
        c[Q_MASK] = (1 << log2) - 1
        c[Q_BSIZE] = self.bsize
        c[Q_BUF_BASE] = buf_base
        c[Q_POOL] = self.pool_id
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
                try:   # wake a receiver blocked in memif_rx_wait
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
                zc_release_all(self.dom, q)
            q.cfg[Q_KIND] = K_NONE
            q.cfg[Q_EVENTFD] = -1
        self._release_memory()
        if reason:
            self._reason = reason
        idle = LISTENING if self.role == "server" else DISCONNECTED
        self._set_state(CLOSED if self._closed else idle)

    def _release_regions(self) -> None:
        for r in self._regions:
            r.close()
        self._regions = []

    def _release_memory(self) -> None:
        self._release_regions()
        close_fds(self._efds)
        self._efds = []

    # -- life cycle ----------------------------------------------------------------------------
    def disconnect(self, reason: str) -> None:
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
