"""Packed-ring steps both bursts of the front end share (virtio 1.1 §2.7): writing available
descriptors, reading the back end's used ones, publishing and kicking.

One ring of N descriptors ``u64 addr, u32 len, u16 id, u16 flags``, read and written as two
u64 words (the second: ``len | id << 32 | flags << 48``).  The driver writes a chain at
consecutive slots from its avail slot, with AVAIL = its avail wrap counter and USED the
opposite; the first descriptor of a burst gets flags that do not say available until the whole
burst is written, then its real flags with one release store.  The back end hands a chain back
by writing one descriptor at the driver's used slot with AVAIL = USED = the used wrap counter;
the driver moves its used slot on by the chain's descriptor count, which it keeps privately by
buffer id (it never trusts the ring for that).

At the used slot a descriptor is, for the used wrap counter ``w``: *pending* (AVAIL = w,
USED = !w: still as this side made it available), *used* (AVAIL = USED = w), or neither.  While
the back end holds buffers the slot was made available in lap ``w``, so "neither" means the back
end wrote a used descriptor with the wrong wrap counter (:data:`~.layout.V_USED_WRAP`); while it
holds none, a used descriptor there is one it was never given (:data:`~.layout.V_USED_IDX`).

Event suppression: this side polls, so its driver area says DISABLE (written at setup); it
kicks unless the back end's device area says DISABLE.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import fence, load_acquire, load_relaxed, store_release
from ...rawmem import addr_view
from ..vhost.layout import EVENT_F_DESC, EVENT_F_DISABLE, PACKED_F_AVAIL, PACKED_F_USED
from ..vhost.vring import eventfd_signal
from .layout import Q_DESC, Q_EVENT_IDX, Q_KICKFD, Q_N, Q_USED, QS_AVAIL_IDX, QS_IDS, QS_KICKS

__all__ = ["PK_PENDING", "PK_USED", "PK_BAD", "pk_avail_flags", "pk_put", "pk_state",
           "pk_word", "pk_advance", "pk_publish", "pk_id_pop", "pk_id_push", "flags_view"]

PK_PENDING = 0
PK_USED = 1
PK_BAD = 2


@kernel(inline="always")
def pk_avail_flags(wrap):
    """AVAIL / USED bits of a descriptor made available in lap ``wrap``."""
    return PACKED_F_AVAIL if wrap != 0 else PACKED_F_USED


@kernel(inline="always")
def pk_put(d64, slot, addr, ln, bid, flags):
    """Write the descriptor at ``slot`` (plain stores: a later release store publishes it)."""
    d64[2 * slot] = np.uint64(addr)
    d64[2 * slot + 1] = np.uint64(ln & 0xFFFFFFFF) | (np.uint64(bid & 0xFFFF) << np.uint64(32)) \
        | (np.uint64(flags & 0xFFFF) << np.uint64(48))


@kernel(inline="always")
def flags_view(q):
    """The ring as u16 words: the flags of slot ``s`` are word ``8 s + 7``."""
    return addr_view(q.cfg[Q_DESC], 8 * q.cfg[Q_N], np.uint16)


@kernel(inline="always")
def pk_state(d64, slot, wrap):
    """:data:`PK_PENDING`, :data:`PK_USED` or :data:`PK_BAD` for the descriptor at ``slot``
    and used wrap counter ``wrap`` (its flags read once, with an acquire load), and the flags."""
    fl = np.int64(load_acquire(d64, 2 * slot + 1) >> np.uint64(48))
    a = (fl & PACKED_F_AVAIL) != 0
    u = (fl & PACKED_F_USED) != 0
    w = wrap != 0
    if a == w and u == w:
        return PK_USED, fl
    if a == w and u != w:
        return PK_PENDING, fl
    return PK_BAD, fl


@kernel(inline="always")
def pk_word(d64, slot):
    """``(buffer id, len)`` of the descriptor at ``slot`` (read after its flags said used)."""
    w = load_relaxed(d64, 2 * slot + 1)
    return np.int64((w >> np.uint64(32)) & np.uint64(0xFFFF)), np.int64(w & np.uint64(0xFFFFFFFF))


@kernel(inline="always")
def pk_advance(slot, wrap, k, n):
    slot += k
    if slot >= n:
        slot -= n
        wrap ^= 1
    return slot, wrap


@kernel(inline="always")
def pk_id_pop(q):
    top = q.st[QS_IDS] - 1
    q.st[QS_IDS] = top
    return np.int64(q.free[top])


@kernel(inline="always")
def pk_id_push(q, i):
    top = q.st[QS_IDS]
    q.free[top] = i
    q.st[QS_IDS] = top + 1


@kernel(inline="always")
def pk_event_passed(q, first_slot, first_wrap, off_wrap):
    """DESC mode (virtio 1.1 §2.7.10, EVENT_IDX): whether the descriptors just published --
    from ``first_slot`` in lap ``first_wrap`` up to the avail slot and counter now in ``st``
    -- include the one the device named in ``off_wrap`` (bits 0-14 the slot, bit 15 the wrap
    counter of the lap it is to be made available in)."""
    n = q.cfg[Q_N]
    k = (q.st[QS_AVAIL_IDX] - first_slot) % n
    if k == 0:
        k = n                                  # a whole ring's worth
    off = off_wrap & 0x7FFF
    if off >= n:
        return True                            # nonsense: a spurious kick is harmless
    d = (off - first_slot) % n
    lap = first_wrap if off >= first_slot else first_wrap ^ 1
    return d < k and lap == (off_wrap >> 15 & 1)


@kernel
def pk_publish(q, first_slot, first_flags):
    """Make the burst visible (the first descriptor's flags, one release store), then kick
    the back end unless its device area says DISABLE, or says DESC (EVENT_IDX negotiated)
    and names a descriptor this burst did not make available."""
    store_release(flags_view(q), 8 * first_slot + 7, np.uint16(first_flags))
    fd = q.cfg[Q_KICKFD]
    if fd < 0:
        return
    fence()
    ev = addr_view(q.cfg[Q_USED], 2, np.uint16)
    fl = np.int64(load_relaxed(ev, 1))
    if fl == EVENT_F_DISABLE:
        return
    if fl == EVENT_F_DESC and q.cfg[Q_EVENT_IDX]:
        wrap = 1 if first_flags & PACKED_F_AVAIL else 0
        if not pk_event_passed(q, first_slot, wrap, np.int64(load_relaxed(ev, 0))):
            return
    eventfd_signal(fd)
    q.st[QS_KICKS] += 1
