"""A vhost queue's life: allocation, the burst entry/exit, down/up, failing it.

The control thread unmaps peer memory while a lcore may be inside a burst; the same guard as
memif's (docs/memif.md): every burst enters with an atomic increment of ``st[QS_BUSY]`` and
then checks ``st[QS_UP]``, and leaves with a decrement; :func:`queue_down` exchanges ``QS_UP``
to 0 (a full barrier) and waits for ``QS_BUSY`` to reach 0 before anything is unmapped.
"""
from __future__ import annotations

from ..common.gate import queue_down, queue_enter, queue_fail, queue_leave, queue_up  # noqa: F401
from .layout import (Q_AVAIL, Q_CALLFD, Q_KICKFD, Q_DESC, Q_EVENT_IDX, Q_HDR, Q_INDIRECT, Q_MASK,
                     Q_MBUF_CAP, Q_MRG, Q_N, Q_NREG, Q_PACKED, Q_POOL, Q_PORT, Q_USED, Q_VRING,
                     QS_AVAIL_WRAP, QS_ERR, QS_ERR_VAL, QS_LAST_AVAIL, QS_USED_IDX, QS_USED_WRAP,
                     VHOST_QUEUE)

__all__ = ["queue_alloc", "queue_enter", "queue_leave", "queue_down", "queue_up", "queue_fail",
           "queue_configure"]


def queue_alloc():
    """A fresh, down queue block."""
    q = VHOST_QUEUE.create()
    q.cfg[Q_CALLFD] = -1
    q.cfg[Q_KICKFD] = -1
    return q


def queue_configure(q, *, desc: int, avail: int, used: int, num: int, regions, hdr: int,
                    mrg: bool, event_idx: bool, indirect: bool, callfd: int, pool_id: int,
                    mbuf_cap: int, port: int, vring: int, last_avail: int, used_idx: int,
                    packed: bool = False, kickfd: int = -1) -> None:
    """Write a started ring's configuration into a down queue (the control thread, or a test):
    host addresses of its three areas, size, the ``(gpa, size, host)`` regions, the negotiated
    header size and features, the call fd, the Rx pool, the indices (packed: bits 0-14 the
    slot, bit 15 the wrap counter, as GET/SET_VRING_BASE carry them), the kick fd
    (:func:`~pktbuf.drivers.vhost.wait.vhost_rx_wait` sleeps on it)."""
    c = q.cfg
    c[Q_DESC], c[Q_AVAIL], c[Q_USED] = desc, avail, used
    c[Q_N], c[Q_MASK] = num, num - 1
    c[Q_HDR], c[Q_MRG], c[Q_EVENT_IDX], c[Q_INDIRECT] = hdr, int(mrg), int(event_idx), int(indirect)
    c[Q_CALLFD] = callfd
    c[Q_KICKFD] = kickfd
    c[Q_POOL], c[Q_MBUF_CAP], c[Q_PORT], c[Q_VRING] = pool_id, mbuf_cap, port, vring
    q.regions[:] = 0
    for i, (gpa, size, host) in enumerate(regions):
        q.regions[i] = (gpa, size, host)
    c[Q_NREG] = len(regions)
    c[Q_PACKED] = int(packed)
    if packed:
        q.st[QS_LAST_AVAIL], q.st[QS_AVAIL_WRAP] = last_avail & 0x7FFF, last_avail >> 15 & 1
        q.st[QS_USED_IDX], q.st[QS_USED_WRAP] = used_idx & 0x7FFF, used_idx >> 15 & 1
    else:
        q.st[QS_LAST_AVAIL] = last_avail & 0xFFFF
        q.st[QS_USED_IDX] = used_idx & 0xFFFF
    q.st[QS_ERR] = 0
    q.st[QS_ERR_VAL] = 0
