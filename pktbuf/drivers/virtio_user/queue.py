"""A virtio-user queue's life: allocation, configuration (ring addresses, the memory table,
the free descriptors) while it is down, and giving back every mbuf a ring holds.

The burst gate is the one memif and vhost use (:mod:`pktbuf.drivers.common.gate`): the control
thread takes a queue down (waiting until no burst is inside) before it touches the ring memory
or the mbufs the ring holds.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...buf.mbuf.free import pktmbuf_free
from ..common.gate import queue_down, queue_up  # noqa: F401
from .layout import (MAX_QUEUE_SIZE, Q_AVAIL, Q_CALLFD, Q_EVENT_IDX, Q_IND, Q_DESC, Q_HDR,
                     Q_HDRS, Q_IN_ORDER, Q_KICKFD,
                     Q_MASK, Q_MRG, Q_PACKED,
                     Q_N, Q_NREG, Q_POOL, Q_PORT, Q_RX_BATCH, Q_USED, Q_VRING, QS_AVAIL_IDX,
                     QS_AVAIL_WRAP, QS_ERR, QS_ERR_VAL, QS_FREE, QS_IDS, QS_INFLIGHT,
                     QS_NEXT_DESC, QS_USED_SEEN, QS_USED_WRAP,
                     VIRTIO_USER_QUEUE)

__all__ = ["queue_alloc", "queue_configure", "queue_release", "queue_down", "queue_up"]


def queue_alloc():
    """A fresh, down queue block holding nothing."""
    q = VIRTIO_USER_QUEUE.create()
    q.cfg[Q_KICKFD] = -1
    q.cfg[Q_CALLFD] = -1
    q.slot_mb[:] = -1
    return q


@kernel
def queue_release(dom, q):
    """Free every mbuf the (down) queue's ring holds; returns how many packets."""
    k = 0
    for i in range(q.slot_mb.size):
        h = q.slot_mb[i]
        if h >= 0:
            q.slot_mb[i] = -1
            pktmbuf_free(dom, -1, np.int64(h))
            k += 1
    q.st[QS_INFLIGHT] = 0
    return k


def queue_configure(q, *, desc: int, avail: int, used: int, num: int, hdrs: int, regions,
                    hdr: int, mrg: bool, kickfd: int, pool_id: int, port: int,
                    vring: int, in_order: bool = False, packed: bool = False,
                    callfd: int = -1, event_idx: bool = False, indirect: int = 0) -> None:
    """Point a down, empty queue at fresh rings: every descriptor free, indices 0 (packed:
    slots 0, wrap counters 1, every buffer id free).  ``callfd``: the vring's call eventfd
    (:func:`~pktbuf.drivers.virtio_user.wait.virtio_user_rx_wait` sleeps on it)."""
    if not 1 <= num <= MAX_QUEUE_SIZE or num & (num - 1):
        raise ValueError(f"ring size {num}")
    if (q.slot_mb >= 0).any():
        raise RuntimeError("queue still holds mbufs")
    c = q.cfg
    c[Q_DESC], c[Q_AVAIL], c[Q_USED], c[Q_HDRS] = desc, avail, used, hdrs
    c[Q_N], c[Q_MASK] = num, num - 1
    c[Q_HDR], c[Q_MRG], c[Q_KICKFD], c[Q_CALLFD] = hdr, int(mrg), kickfd, callfd
    c[Q_POOL], c[Q_PORT], c[Q_VRING] = pool_id, port, vring
    c[Q_RX_BATCH] = max(1, min(32, num // 4))
    c[Q_IN_ORDER] = int(in_order)
    c[Q_PACKED] = int(packed)
    c[Q_EVENT_IDX] = int(event_idx)
    c[Q_IND] = indirect
    q.regions[:] = 0
    for i, (addr, size) in enumerate(regions):
        q.regions[i] = (addr, size)
    c[Q_NREG] = len(regions)
    q.free[:num] = np.arange(num - 1, -1, -1, dtype=np.int32)
    st = q.st
    st[QS_FREE] = num
    st[QS_INFLIGHT] = 0
    st[QS_AVAIL_IDX] = 0
    st[QS_NEXT_DESC] = 0
    st[QS_USED_SEEN] = 0
    st[QS_AVAIL_WRAP] = st[QS_USED_WRAP] = int(packed)
    st[QS_IDS] = num
    st[QS_ERR] = 0
    st[QS_ERR_VAL] = 0
