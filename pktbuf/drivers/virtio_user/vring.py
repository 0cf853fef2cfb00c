"""Split-ring views and the steps both bursts of the front end share (virtio 1.1 §2.6).

The ring areas live in the shared ring memory (:mod:`.rings`): the descriptor table (read as
two u64 words per entry: ``addr``, then ``len | flags << 32 | next << 48``), avail (u16 words
``flags, idx, ring[N]``) and used (u16 ``flags, idx``; u32 entries ``id, len`` at ``1 + 2 s``).
This side writes the table and avail and reads used; the back end may write anything into all
three, so a kernel reads each used word once and trusts nothing in shared memory it wrote
itself -- chain links and buffer owners are kept privately in the queue block.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import fence, load_acquire, load_relaxed, store_release
from ...buf.mbuf.layout import NULL
from ...rawmem import addr_view
from ..vhost.layout import A16_IDX, DESC_F_NEXT, IDX_MASK, USED_F_NO_NOTIFY, U16_FLAGS, U16_IDX
# the split-ring views are the back end's: the ring words (Q_DESC ...) are the same
from ..vhost.vring import avail_view, desc_view, need_event, used_view16, used_view32
from ..vhost.vring import eventfd_signal      # the kick: the same write as vhost's call
from .layout import (Q_EVENT_IDX, Q_KICKFD, Q_N, Q_NREG, QS_FREE, QS_INFLIGHT, QS_KICKS,
                     QS_USED_SEEN, V_USED_IDX)
from ..common.gate import queue_fail

__all__ = ["desc_view", "avail_view", "used_view16", "used_view32", "used_pending",
           "publish_avail", "desc_pop", "desc_push", "put_desc", "in_table", "ind_fill"]


@kernel(inline="always")
def used_pending(q, u16):
    """Used entries the back end published since the last one read; -1 (the queue failed)
    when its index ran ahead of what it holds."""
    idx = np.int64(load_acquire(u16, U16_IDX))
    cnt = (idx - q.st[QS_USED_SEEN]) & IDX_MASK
    if cnt > q.st[QS_INFLIGHT]:
        queue_fail(q, V_USED_IDX, idx)
        return -1
    return cnt


@kernel(inline="always")
def put_desc(d64, i, addr, ln, flags, nxt):
    d64[2 * i] = np.uint64(addr)
    d64[2 * i + 1] = np.uint64(ln & 0xFFFFFFFF) | (np.uint64(flags & 0xFFFF) << np.uint64(32)) \
        | (np.uint64(nxt & 0xFFFF) << np.uint64(48))


@kernel(inline="always")
def in_table(q, a, ln):
    """Whether ``[a, a + ln)`` lies inside one region of the memory table."""
    for r in range(q.cfg[Q_NREG]):
        off = a - q.regions[r, 0]
        if off >= 0 and off + ln <= q.regions[r, 1]:
            return True
    return False


@kernel(inline="always")
def desc_pop(q):
    top = q.st[QS_FREE] - 1
    q.st[QS_FREE] = top
    return np.int64(q.free[top])


@kernel(inline="always")
def desc_push(q, i):
    top = q.st[QS_FREE]
    q.free[top] = i
    q.st[QS_FREE] = top + 1


@kernel
def publish_avail(q, av, old, idx):
    """Make avail entries ``old .. idx`` visible (one release store), then kick the back end
    unless it asked not to be: its used flags say NO_NOTIFY, or with EVENT_IDX the
    ``avail_event`` rule (virtio 1.1 §2.6.7.2) says the index did not pass it."""
    store_release(av, A16_IDX, np.uint16(idx & IDX_MASK))
    fd = q.cfg[Q_KICKFD]
    if fd < 0:
        return
    fence()
    u16 = used_view16(q)
    if q.cfg[Q_EVENT_IDX]:
        kick = need_event(np.int64(load_relaxed(u16, 2 + 4 * q.cfg[Q_N])), idx, old)
    else:
        kick = (np.int64(load_relaxed(u16, U16_FLAGS)) & USED_F_NO_NOTIFY) == 0
    if kick:
        eventfd_signal(fd)
        q.st[QS_KICKS] += 1


@kernel
def ind_fill(mb, h, t64, hslot, hdr, split):
    """Write packet ``h``'s indirect table at ``t64`` (u64 words): the header (its zeroed
    16-byte slot at ``hslot``), then one entry per segment, straight at the mbuf's data.
    Split: linked by NEXT / ``next`` (virtio 1.1 §2.6.5.3); packed: a plain table used in
    order (§2.7.7), no NEXT."""
    z = addr_view(hslot, 16, np.uint8)
    for b in range(16):
        z[b] = 0
    put_desc(t64, 0, hslot, hdr, DESC_F_NEXT if split else 0, 1)
    k = 1
    seg = h
    while seg != NULL:
        s = mb[seg]
        nxt = np.int64(s.next)
        last = nxt == NULL
        put_desc(t64, k, np.int64(s.buf_addr) + np.int64(s.data_off), np.int64(s.data_len),
                 DESC_F_NEXT if split and not last else 0, k + 1 if split and not last else 0)
        k += 1
        seg = nxt
