"""Split-ring helpers both bursts share: the ring views, address translation, chain walking,
the used-ring publish and the call.

Everything the guest wrote is read **once** (relaxed atomic loads, so the compiler cannot read
shared memory twice) and checked before use (virtio 1.1 §2.6.5, docs/vhost.md):

* a head or a ``next`` index must lie inside its table, and a chain may not have more
  descriptors than its table (a loop);
* a descriptor's WRITE flag must match the ring (set on the guest's Rx ring, clear on its Tx
  ring);
* an indirect descriptor needs INDIRECT_DESC negotiated, no NEXT, a length that is a non-zero
  multiple of 16 and at most N entries, its table inside one region, and no INDIRECT inside it;
* each buffer ``[addr, addr + len)`` must be covered by the memory table; it is cut into
  host-contiguous pieces where it crosses from one region into the next.

A helper returns ``-V_*`` for a violation (:mod:`.layout`); the burst then fails the queue.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import fence, load_acquire, load_relaxed, store_release
from ...rawmem import addr_view
from ..common.eventfd import eventfd_signal
from .layout import (A16_FLAGS, A16_IDX, A16_RING, AVAIL_F_NO_INTERRUPT, DESC_F_INDIRECT,
                     DESC_F_NEXT, DESC_F_WRITE, IDX_MASK, MAX_PIECES, Q_AVAIL, Q_CALLFD, Q_DESC,
                     Q_EVENT_IDX, Q_INDIRECT, Q_N, Q_NREG, Q_USED, QS_CALLS, U16_IDX, V_ADDR,
                     V_AVAIL_IDX, V_HEAD, V_INDIRECT, V_INDIRECT_LEN, V_LOOP, V_NESTED, V_NEXT,
                     V_PIECES, V_WRITE)

__all__ = ["desc_view", "avail_view", "used_view16", "used_view32", "translate", "walk_chain",
           "avail_count", "publish_used", "need_event", "eventfd_signal"]


@kernel(inline="always")
def desc_view(q):
    """The descriptor table as ``2 N`` u64 words (entry ``i``: words ``2i``, ``2i + 1``)."""
    return addr_view(q.cfg[Q_DESC], 2 * q.cfg[Q_N], np.uint64)


@kernel(inline="always")
def avail_view(q):
    """avail as u16 words: flags, idx, ring[N], used_event."""
    return addr_view(q.cfg[Q_AVAIL], 3 + q.cfg[Q_N], np.uint16)


@kernel(inline="always")
def used_view16(q):
    """used as u16 words: flags, idx, the entries, avail_event at ``2 + 4 N``."""
    return addr_view(q.cfg[Q_USED], 3 + 4 * q.cfg[Q_N], np.uint16)


@kernel(inline="always")
def used_view32(q):
    """used as u32 words: entry ``s`` is ``(id, len)`` at ``1 + 2 s``, ``2 + 2 s``."""
    return addr_view(q.cfg[Q_USED], 1 + 2 * q.cfg[Q_N], np.uint32)


@kernel(inline="always")
def translate(q, ga):
    """``(host address, bytes contiguous from there)`` of guest-physical address ``ga`` (a
    u64); ``(-1, 0)`` when no region holds it.  Unsigned arithmetic: an offset below a
    region's start wraps to a huge value and fails the comparison."""
    for r in range(q.cfg[Q_NREG]):
        off = ga - q.regions[r, 0]
        sz = q.regions[r, 1]
        if off < sz:
            return np.int64(q.regions[r, 2] + off), np.int64(sz - off)
    return np.int64(-1), np.int64(0)


@kernel(inline="always")
def avail_count(q, av, last):
    """Chains the guest made available since ``last``; ``-V_AVAIL_IDX`` if impossible."""
    idx = np.int64(load_acquire(av, A16_IDX))
    cnt = (idx - last) & IDX_MASK
    if cnt > q.cfg[Q_N]:
        return -np.int64(V_AVAIL_IDX), idx
    return cnt, idx


@kernel
def walk_chain(q, head, want_write, start):
    """Walk the chain at ``head``, appending its buffers' host pieces to ``pc_addr/pc_len``
    from ``start``.  Returns ``(end, total bytes)``, or ``(-V_*, offending value)``."""
    n = q.cfg[Q_N]
    if head >= n:
        return -np.int64(V_HEAD), head
    tbl = desc_view(q)
    size = n
    idx = head
    seen = 0
    indirect = False
    k = start
    total = np.int64(0)
    while True:
        seen += 1
        if seen > size:
            return -np.int64(V_LOOP), seen
        a = load_relaxed(tbl, 2 * idx)
        w = load_relaxed(tbl, 2 * idx + 1)
        ln = np.int64(w & np.uint64(0xFFFFFFFF))
        fl = np.int64((w >> np.uint64(32)) & np.uint64(0xFFFF))
        nx = np.int64(w >> np.uint64(48))
        if fl & DESC_F_INDIRECT:
            if indirect:
                return -np.int64(V_NESTED), idx
            if q.cfg[Q_INDIRECT] == 0 or fl & DESC_F_NEXT:
                return -np.int64(V_INDIRECT), fl
            if ln == 0 or ln % 16 != 0 or ln // 16 > n:
                return -np.int64(V_INDIRECT_LEN), ln
            h, room = translate(q, a)
            if h < 0 or room < ln:
                return -np.int64(V_ADDR), np.int64(a & np.uint64(0x7FFFFFFFFFFFFFFF))
            size = ln // 16
            tbl = addr_view(h, 2 * size, np.uint64)
            idx = 0
            seen = 0
            indirect = True
            continue
        if ((fl & DESC_F_WRITE) != 0) != want_write:
            return -np.int64(V_WRITE), idx
        ga = a
        rem = ln
        while rem > 0:
            h, room = translate(q, ga)
            if h < 0:
                return -np.int64(V_ADDR), np.int64(ga & np.uint64(0x7FFFFFFFFFFFFFFF))
            if k >= MAX_PIECES:
                return -np.int64(V_PIECES), k
            c = rem if rem <= room else room
            q.pc_addr[k] = h
            q.pc_len[k] = c
            k += 1
            ga += np.uint64(c)
            rem -= c
        total += ln
        if (fl & DESC_F_NEXT) == 0:
            return k, total
        if nx >= size:
            return -np.int64(V_NEXT), nx
        idx = nx


@kernel(inline="always")
def need_event(event, new, old):
    """virtio's event rule: notify iff ``(u16)(new - event - 1) < (u16)(new - old)``."""
    return ((new - event - 1) & IDX_MASK) < ((new - old) & IDX_MASK)


@kernel
def publish_used(q, old, new):
    """Make used entries ``old .. new`` visible (one release store of ``used.idx``), then call
    the front end unless it asked not to be (avail NO_INTERRUPT, or with EVENT_IDX the
    ``used_event`` rule)."""
    u16 = used_view16(q)
    store_release(u16, U16_IDX, np.uint16(new & IDX_MASK))
    fd = q.cfg[Q_CALLFD]
    if fd < 0:
        return
    fence()                       # the index store before the flags / used_event load
    av = avail_view(q)
    if q.cfg[Q_EVENT_IDX]:
        call = need_event(np.int64(load_relaxed(av, A16_RING + q.cfg[Q_N])), new, old)
    else:
        call = (np.int64(load_relaxed(av, A16_FLAGS)) & AVAIL_F_NO_INTERRUPT) == 0
    if call:
        eventfd_signal(fd)
        q.st[QS_CALLS] += 1
