"""Packed-ring helpers both bursts share (virtio 1.1 §2.7): availability, chain walking, the
used descriptors and the call.

One ring of N 16-byte descriptors ``u64 addr, u32 len, u16 id, u16 flags``, read here as two
u64 words (the second: len | id << 32 | flags << 48).  A descriptor at the device's slot is
available when its AVAIL bit equals the device's avail wrap counter and its USED bit does not;
a chain is consecutive slots (wrapping at N, the counter flipping there) linked by NEXT, its
buffer id in the last descriptor.  The device hands a chain back by writing one descriptor at
its used slot -- id, bytes written, then the flags with AVAIL = USED = its used wrap counter
(a release store, last) -- and moving the used slot on by the chain's descriptor count.
An indirect descriptor points at a plain table of ``len / 16`` descriptors used in order.

The same checks as the split ring (:mod:`.vring`): a chain no longer than N descriptors,
WRITE the right way, indirect tables well formed and inside one region, no nesting, every
buffer inside the memory table.  Event suppression: the device area's flags are set to
DISABLE when the ring starts (we poll); the device calls unless the driver area says DISABLE
(with DESC, a spurious call is allowed and made).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import fence, load_acquire, load_relaxed, store_release
from ...rawmem import addr_view
from ..common.eventfd import eventfd_signal
from .layout import (DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE, EVENT_F_DISABLE, MAX_PIECES,
                     PACKED_F_AVAIL, PACKED_F_USED, Q_AVAIL, Q_CALLFD, Q_INDIRECT, Q_N,
                     QS_CALLS, V_ADDR, V_INDIRECT, V_INDIRECT_LEN, V_LOOP, V_NESTED, V_PIECES,
                     V_WRITE)
from .vring import desc_view, translate

__all__ = ["packed_avail", "packed_walk", "packed_put_used", "packed_call"]


@kernel(inline="always")
def packed_avail(d64, slot, wrap):
    """Whether the descriptor at ``slot`` is available for avail wrap counter ``wrap`` (its
    second word read with an acquire load: the driver writes the flags last)."""
    fl = np.int64(load_acquire(d64, 2 * slot + 1) >> np.uint64(48))
    a = (fl & PACKED_F_AVAIL) != 0
    u = (fl & PACKED_F_USED) != 0
    return a == (wrap != 0) and u != (wrap != 0)


@kernel
def packed_walk(q, slot, want_write, start):
    """Walk the chain whose first descriptor is at ``slot`` (available), appending its buffers'
    pieces from ``start``.  Returns ``(end, total bytes, descriptors in the ring, buffer id)``,
    or ``(-V_*, value, 0, 0)``."""
    n = q.cfg[Q_N]
    d64 = desc_view(q)
    tbl = d64
    size = n
    i = slot
    seen = 0
    inside = False
    ring_descs = 0
    k = start
    total = np.int64(0)
    bid = np.int64(0)
    while True:
        seen += 1
        if seen > size:
            return -np.int64(V_LOOP), seen, 0, 0
        a = load_relaxed(tbl, 2 * i)
        w = load_relaxed(tbl, 2 * i + 1)
        ln = np.int64(w & np.uint64(0xFFFFFFFF))
        idv = np.int64((w >> np.uint64(32)) & np.uint64(0xFFFF))
        fl = np.int64(w >> np.uint64(48))
        if not inside:
            ring_descs += 1
            bid = idv
        if fl & DESC_F_INDIRECT and not inside:
            if q.cfg[Q_INDIRECT] == 0 or fl & DESC_F_NEXT:
                return -np.int64(V_INDIRECT), fl, 0, 0
            if ln == 0 or ln % 16 != 0 or ln // 16 > n:
                return -np.int64(V_INDIRECT_LEN), ln, 0, 0
            h, room = translate(q, a)
            if h < 0 or room < ln:
                return -np.int64(V_ADDR), np.int64(a & np.uint64(0x7FFFFFFFFFFFFFFF)), 0, 0
            size = ln // 16
            tbl = addr_view(h, 2 * size, np.uint64)
            i = 0
            seen = 0
            inside = True
            continue
        if inside and fl & DESC_F_INDIRECT:
            return -np.int64(V_NESTED), i, 0, 0
        if ((fl & DESC_F_WRITE) != 0) != want_write:
            return -np.int64(V_WRITE), i, 0, 0
        ga = a
        rem = ln
        while rem > 0:
            h, room = translate(q, ga)
            if h < 0:
                return -np.int64(V_ADDR), np.int64(ga & np.uint64(0x7FFFFFFFFFFFFFFF)), 0, 0
            if k >= MAX_PIECES:
                return -np.int64(V_PIECES), k, 0, 0
            c = rem if rem <= room else room
            q.pc_addr[k] = h
            q.pc_len[k] = c
            k += 1
            ga += np.uint64(c)
            rem -= c
        total += ln
        if inside:
            i += 1
            if i == size:               # an indirect table ends with its last entry
                return k, total, ring_descs, bid
            continue
        if (fl & DESC_F_NEXT) == 0:
            return k, total, ring_descs, bid
        i += 1
        if i == n:
            i = 0


@kernel(inline="always")
def packed_put_used(d64, d16, slot, wrap, bid, ln, publish):
    """Write a used descriptor at ``slot``: id and length, then (``publish``) the flags with a
    release store.  Returns the flags word (for a deferred publish)."""
    fl = PACKED_F_AVAIL | PACKED_F_USED if wrap else 0
    if ln > 0:
        fl |= DESC_F_WRITE
    w = d64[2 * slot + 1]
    w = (w & np.uint64(0xFFFF000000000000)) | (np.uint64(bid & 0xFFFF) << np.uint64(32)) \
        | np.uint64(ln & 0xFFFFFFFF)
    d64[2 * slot + 1] = w
    if publish:
        store_release(d16, 8 * slot + 7, np.uint16(fl))
    return fl


@kernel(inline="always")
def packed_advance(slot, wrap, k, n):
    """``slot + k`` in a ring of ``n`` (the wrap counter flipped when it passes the end)."""
    slot += k
    if slot >= n:
        slot -= n
        wrap ^= 1
    return slot, wrap


@kernel
def packed_call(q):
    """Call the front end unless its driver area says DISABLE."""
    fd = q.cfg[Q_CALLFD]
    if fd < 0:
        return
    fence()
    ev = addr_view(q.cfg[Q_AVAIL], 2, np.uint16)
    if np.int64(load_relaxed(ev, 1)) != EVENT_F_DISABLE:
        eventfd_signal(fd)
        q.st[QS_CALLS] += 1
