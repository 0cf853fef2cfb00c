"""The control plane of a virtio-user port: the handshake, the link, the socket thread.

Message order as DPDK 22.11's ``net_virtio_user`` sends it (``virtio_user_dev.c``, traced
against its back end; docs/vhost.md "Front end"): SET_OWNER, GET_FEATURES,
GET/SET_PROTOCOL_FEATURES, SET_VRING_CALL for every Rx vring then every Tx vring,
SET_FEATURES, SET_STATUS FEATURES_OK (acked), GET_STATUS, SET_MEM_TABLE (acked), per vring (Rx
first) SET_VRING_NUM / BASE / ADDR / KICK, SET_VRING_ENABLE 1, SET_STATUS DRIVER_OK (acked).
On close: SET_VRING_ENABLE 0 and GET_VRING_BASE for every vring.

The memory table is region 0, this port's ring memory (:mod:`.rings`), then the data of every
mempool of the port's domain (up to 7; ``pool.region``, a memfd): guest-physical address =
user address = where the region is mapped here, as DPDK's front end does with ``use_va``, so
Tx descriptors point straight at mbuf data and Rx buffers are the mbufs themselves.

One thread per port (:class:`VirtioUserDevice`).  Client mode (default): connect when the port
opens (a missing socket is an error, as in DPDK), and after a disconnect retry once a second
(DPDK's client never reconnects).  Server mode (``server=1``): listen when the port opens
(without blocking the open, unlike DPDK) and take the next back end after a disconnect.  While
connected the thread watches the socket -- EOF, or any message the back end sends unasked, ends
the connection -- and the queues: a ring whose back end broke the rules takes the link down
with the reason.  A disconnect takes every queue down (no burst inside), frees every mbuf the
rings held and closes every fd.
"""
from __future__ import annotations

import os
import socket
import threading
import time

from ..vhost import proto as P
from ...fdwait import readable
from .client import Channel
from .layout import Q_CALLFD, QS_ERR, QS_ERR_VAL, reason as v_reason
from .queue import queue_alloc, queue_configure, queue_down, queue_release, queue_up
from .rings import RingMemory
from .rx import rx_refill

__all__ = ["VirtioUserDevice", "features_wanted"]

_POLL_S = 0.05
_RETRY_S = 1.0
_REPLY_TIMEOUT_S = 15.0     # DPDK's back end took up to 2.8 s to ack SET_MEM_TABLE under load
_DRAIN_US = 2_000_000
S_ACK, S_DRIVER, S_FEATURES_OK, S_DRIVER_OK = 1, 2, 8, 4
MAX_POOL_REGIONS = P.MAX_REGIONS - 1


def features_wanted(queues: int, mrg_rxbuf: bool, in_order: bool, packed: bool = False,
                    event_idx: bool = False, indirect: bool = False) -> int:
    f = (1 << P.VIRTIO_F_VERSION_1) | (1 << P.VHOST_USER_F_PROTOCOL_FEATURES)
    if indirect:
        f |= 1 << P.VIRTIO_RING_F_INDIRECT_DESC
    if event_idx:
        f |= 1 << P.VIRTIO_RING_F_EVENT_IDX
    if packed:
        f |= 1 << P.VIRTIO_F_RING_PACKED
    if mrg_rxbuf:
        f |= 1 << P.VIRTIO_NET_F_MRG_RXBUF
    if in_order:
        f |= 1 << P.VIRTIO_F_IN_ORDER
    if queues > 1:
        f |= 1 << P.VIRTIO_NET_F_MQ
    return f


def _close(fd: int) -> None:
    if fd is not None and fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


class VirtioUserDevice:
    """``queues`` queue pairs of ``queue_size`` entries over the socket at ``path``."""

    def __init__(self, path: str, pool, *, server: bool, queues: int, queue_size: int,
                 mrg_rxbuf: bool, in_order: bool, port_id: int, packed: bool = False,
                 event_idx: bool = False, indirect: bool = False):
        self.path = path
        self.pool = pool
        self.dom = pool.domain.state
        self.server = server
        self.queues = queues
        self.num = queue_size
        self.wanted = features_wanted(queues, mrg_rxbuf, in_order, packed, event_idx, indirect)
        self.port_id = port_id
        self.vq = [queue_alloc() for _ in range(2 * queues)]   # vring 2k: Rx k, 2k+1: Tx k
        self.features = 0
        self.protocol = 0
        self.reason: str | None = None
        self.connects = 0
        self.up = False
        self.released = 0
        self._mem: RingMemory | None = None
        self._fds: list[int] = []
        self._chan: Channel | None = None
        self._stop = threading.Event()
        self.lock = threading.Lock()
        self._lsock = None
        if server:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.bind(path)
                s.listen(1)
            except OSError:
                s.close()
                raise
            self._lsock = s
            first = None
        else:
            first = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                first.connect(path)
            except OSError:
                first.close()
                raise
        self._thread = threading.Thread(target=self._run, args=(first,),
                                        name=f"virtio_user:{path}", daemon=True)
        self._thread.start()

    def rx_queue(self, k: int):
        return self.vq[2 * k]

    def tx_queue(self, k: int):
        return self.vq[2 * k + 1]

    # -- the thread ------------------------------------------------------------------------
    def _run(self, sock) -> None:
        while not self._stop.is_set():
            if sock is None:
                sock = self._connect()
                if sock is None:
                    continue
            self.connects += 1
            with self.lock:
                why = self._start(sock)
            if why is None:
                why = self._watch(sock)
            with self.lock:
                self._disconnect(sock, why, stop_rings=why == "port closed")
            sock = None

    def _connect(self):
        if self.server:
            try:
                r = readable([self._lsock], _POLL_S)
            except (OSError, ValueError):
                self._stop.wait(_POLL_S)
                return None
            if not r or self._stop.is_set():
                return None
            try:
                return self._lsock.accept()[0]
            except OSError:
                return None
        if self._stop.wait(_RETRY_S):
            return None
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.path)
            return s
        except OSError:
            s.close()
            return None

    def _watch(self, sock) -> str:
        while not self._stop.is_set():
            for i, q in enumerate(self.vq):
                if q.st[QS_ERR]:
                    return f"vring {i}: {v_reason(q.st[QS_ERR], q.st[QS_ERR_VAL])}"
            try:
                r = readable([sock], _POLL_S)
            except (OSError, ValueError):
                return "socket closed"
            if not r:
                continue
            try:
                b = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError as e:
                return f"socket error: {e.strerror}"
            if not b:
                return "back end closed the connection"
            return "back end sent a message nobody asked for"
        return "port closed"

    # -- connect / disconnect ----------------------------------------------------------------
    def _start(self, sock) -> str | None:
        """The handshake up to DRIVER_OK; the reason when it failed (the caller disconnects)."""
        ch = Channel(sock, _REPLY_TIMEOUT_S)
        self._chan = ch
        try:
            self._handshake(ch)
        except P.VhostViolation as e:
            return e.reason
        except OSError as e:
            return f"setup failed: {e.strerror or e}"
        except Exception as e:          # noqa: BLE001 -- the thread must not die: link down
            return f"setup failed: {type(e).__name__}: {e}"
        for q in self.vq:
            queue_up(q.st)
        self.up = True
        return None

    def _handshake(self, ch: Channel) -> None:
        n = len(self.vq)
        ch.send(P.SET_OWNER)
        offered = ch.get_u64(P.GET_FEATURES)
        if not offered >> P.VIRTIO_F_VERSION_1 & 1:
            raise P.VhostViolation(f"back end offers features {offered:#x} without VERSION_1")
        feat = self.wanted & offered
        proto = 0
        if feat >> P.VHOST_USER_F_PROTOCOL_FEATURES & 1:
            poff = ch.get_u64(P.GET_PROTOCOL_FEATURES)
            proto = poff & ((1 << P.PROTO_MQ) | (1 << P.PROTO_REPLY_ACK) | (1 << P.PROTO_STATUS))
            ch.send(P.SET_PROTOCOL_FEATURES, P.U64.pack(proto))
            ch.acks = bool(proto >> P.PROTO_REPLY_ACK & 1)
        if self.queues > 1 and not (feat >> P.VIRTIO_NET_F_MQ & 1 and proto >> P.PROTO_MQ & 1):
            raise P.VhostViolation(f"back end does not offer multiqueue ({self.queues} pairs "
                                   "asked for)")
        self.features, self.protocol = feat, proto
        status = bool(proto >> P.PROTO_STATUS & 1)
        order = list(range(0, n, 2)) + list(range(1, n, 2))
        calls = {}
        for i in order:
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._fds.append(fd)
            calls[i] = fd
            ch.send(P.SET_VRING_CALL, P.U64.pack(i), [fd])
        ch.send(P.SET_FEATURES, P.U64.pack(feat))
        if status:
            ch.request(P.SET_STATUS, P.U64.pack(S_ACK | S_DRIVER | S_FEATURES_OK), ack=True)
            st = ch.get_u64(P.GET_STATUS)
            if not st & S_FEATURES_OK:
                raise P.VhostViolation(f"back end refused the features {feat:#x} "
                                       f"(status {st:#x})")
        # memory: our rings, then every pool of the domain
        ind = bool(feat >> P.VIRTIO_RING_F_INDIRECT_DESC & 1)
        mem = RingMemory(n, self.num, indirect=ind)
        self._mem = mem
        regions = [(mem.region.address, mem.region.size, mem.region.fd)]
        pools = [self.pool] + [p for p in self.pool.domain.pools
                               if p is not self.pool and hasattr(p, "region")]
        for p in pools[:MAX_POOL_REGIONS]:
            regions.append((p.region.address, p.region.size, p.region.fd))
        table = P.MEMTABLE_HDR.pack(len(regions), 0) + b"".join(
            P.REGION.pack(a, s, a, 0) for a, s, _ in regions)
        ch.request(P.SET_MEM_TABLE, table, [fd for _, _, fd in regions], ack=True)
        hdr = 12          # VERSION_1 is always negotiated
        mrg = bool(feat >> P.VIRTIO_NET_F_MRG_RXBUF & 1)
        packed = bool(feat >> P.VIRTIO_F_RING_PACKED & 1)
        for i in order:
            q = self.vq[i]
            kick = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._fds.append(kick)
            desc, avail, used, hdrs = mem.ring(i)
            queue_configure(q, desc=desc, avail=avail, used=used, num=self.num, hdrs=hdrs,
                            regions=[(a, s) for a, s, _ in regions], hdr=hdr, mrg=mrg,
                            kickfd=kick, pool_id=self.pool.id, port=self.port_id, vring=i,
                            in_order=bool(feat >> P.VIRTIO_F_IN_ORDER & 1), packed=packed,
                            callfd=calls[i],
                            event_idx=bool(feat >> P.VIRTIO_RING_F_EVENT_IDX & 1),
                            indirect=mem.indirect(i) if ind and i % 2 == 1 else 0)
            # the driver wants no calls: it polls (split: avail flags NO_INTERRUPT; packed:
            # the driver event area's flags DISABLE, the u16 after off_wrap) -- until a
            # receiver sleeps in virtio_user_rx_wait (.wait)
            mem.region.array[avail - mem.region.address + (2 if packed else 0)] = 1
            if i % 2 == 0:
                rx_refill(self.dom, q, -1)
            ch.send(P.SET_VRING_NUM, P.STATE.pack(i, self.num))
            # packed: slot 0, wrap counter 1 in bit 15, as DPDK's front end says
            ch.send(P.SET_VRING_BASE, P.STATE.pack(i, 0x8000 if packed else 0))
            ch.send(P.SET_VRING_ADDR, P.ADDR.pack(i, 0, desc, used, avail, 0))
            ch.send(P.SET_VRING_KICK, P.U64.pack(i), [kick])
        if proto or feat >> P.VHOST_USER_F_PROTOCOL_FEATURES & 1:
            for i in range(n):
                ch.send(P.SET_VRING_ENABLE, P.STATE.pack(i, 1))
        if status:
            ch.request(P.SET_STATUS, P.U64.pack(S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK),
                       ack=True)

    def _disconnect(self, sock, why: str, stop_rings: bool = False) -> None:
        self.reason = why             # before the link reads down
        self.up = False
        for q in self.vq:
            queue_down(q.st, 0)           # the flag first: a waiter that wakes sees it ...
            fd = int(q.cfg[Q_CALLFD])
            if fd >= 0:                   # ... wake a receiver asleep in virtio_user_rx_wait
                try:
                    os.eventfd_write(fd, 1)
                except OSError:
                    pass
        for q in self.vq:
            queue_down(q.st, _DRAIN_US)
            q.cfg[Q_CALLFD] = -1          # closed below
        if stop_rings and self._chan is not None:
            try:
                self._chan.sock.settimeout(2.0)
                for i in range(len(self.vq)):
                    self._chan.send(P.SET_VRING_ENABLE, P.STATE.pack(i, 0))
                for i in range(len(self.vq)):
                    self._chan.get_vring_base(i)
            except P.VhostViolation:
                pass
        try:
            sock.close()
        except OSError:
            pass
        self._chan = None
        for q in self.vq:
            self.released += int(queue_release(self.dom, q))
        for fd in self._fds:
            _close(fd)
        self._fds = []
        if self._mem is not None:
            self._mem.close()
            self._mem = None
        self.features = self.protocol = 0

    def datapath_fault(self) -> str | None:
        for i, q in enumerate(self.vq):
            if q.st[QS_ERR]:
                return f"vring {i}: {v_reason(q.st[QS_ERR], q.st[QS_ERR_VAL])}"
        return None

    def close(self) -> None:
        """Stop the rings (ENABLE 0, GET_VRING_BASE), disconnect, give every mbuf back."""
        self._stop.set()
        self._thread.join(30)
        if self._lsock is not None:
            self._lsock.close()
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def wait(self, cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.01)
        return bool(cond())
