"""Lock-free ring of object indices with ``rte_ring`` semantics.

A ring is two plain arrays, so it can live in ordinary memory or in a shared mapping used by
several processes:

* ``hdr`` -- ``uint32[RING_HDR_WORDS]``: the read-only description (size, mask, capacity, mode
  flags) on the first cache line, the producer ``head``/``tail`` on their own cache line and the
  consumer ``head``/``tail`` on another, with a spare line between them (as ``RTE_CACHE_GUARD``).
* ``slots`` -- ``int32[size]``: the objects; ``size`` is a power of two.

Indices are free-running 32-bit counters; a slot is ``index & mask``.  Differences are taken
modulo 2**32, so wrap-around is harmless.  Usable capacity is ``size - 1`` unless the ring was
created with an exact capacity (``RING_F_EXACT_SZ``).

Multi-producer enqueue (as in DPDK's default ring): reserve slots by a compare-and-swap on the
producer head, copy the objects in, wait until earlier producers have published (their tail
reaches our old head), then publish by a release store of the producer tail.  Consumers mirror
this on the consumer side.  The single-producer/-consumer variants replace the CAS by a plain
store.  Every index written by another thread or process is read with an acquire load.

Naming (DPDK's): ``_bulk`` moves exactly ``n`` objects or none and returns ``n`` or 0;
``_burst`` moves as many as possible and returns that count.  ``mp``/``sp`` and ``mc``/``sc``
name the producer/consumer mode; the unprefixed calls use the mode the ring was created with.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import cas, cpu_pause, load_acquire, load_relaxed, store_release

# header layout (uint32 words) -- 64-byte lines: [0] description, [32] producer, [64] consumer
RING_HDR_WORDS = 96
H_SIZE = 0
H_MASK = 1
H_CAPACITY = 2
H_FLAGS = 3
H_MAGIC = 4
PROD_HEAD = 32
PROD_TAIL = 33
CONS_HEAD = 64
CONS_TAIL = 65

RING_MAGIC = 0x52494E47  # "RING"

# creation flags (values as in rte_ring.h)
RING_F_SP_ENQ = 0x1
RING_F_SC_DEQ = 0x2
RING_F_EXACT_SZ = 0x4
RING_SZ_MASK = 0x7FFFFFFF  # largest size DPDK accepts (RTE_RING_SZ_MASK)

_M32 = 0xFFFFFFFF

_Z = np.int64(0)   # passed where a literal 0 would make Numba compile a separate specialisation

# behaviours of the shared move-head code
RING_QUEUE_FIXED = 0      # _bulk: all or nothing
RING_QUEUE_VARIABLE = 1   # _burst: as many as possible


@kernel
def ring_init(hdr, slots, capacity, flags):
    """Initialise an empty ring over ``hdr``/``slots``.

    ``slots.size`` must be a power of two; ``capacity`` must be ``slots.size - 1`` or, with
    ``RING_F_EXACT_SZ``, anything up to ``slots.size``.  Returns 0, or -22 (EINVAL).
    """
    size = slots.size
    if size < 1 or (size & (size - 1)) != 0 or size > RING_SZ_MASK:
        return -22
    if hdr.size < RING_HDR_WORDS:
        return -22
    if (flags & RING_F_EXACT_SZ) != 0:
        if capacity < 1 or capacity > size:
            return -22
    elif capacity != size - 1:
        return -22
    hdr[:] = 0
    hdr[H_SIZE] = size
    hdr[H_MASK] = size - 1
    hdr[H_CAPACITY] = capacity
    hdr[H_FLAGS] = flags
    hdr[H_MAGIC] = RING_MAGIC
    return 0


# The internal functions take the ring as (hdr, ho, slots, so): the header lives at word
# offset ``ho`` of ``hdr`` and the slots at offset ``so`` of ``slots``.  A mempool's ring is a
# piece of the domain's flat arrays; creating views of them per call would cost two atomic
# reference-count updates each, so offsets are passed instead.  Index arithmetic is unsigned:
# Numba adds negative-index wrap-around code to every signed index, which also stops LLVM
# from vectorising the copy loops.

@kernel
def _move_prod_head(hdr, ho, n, behavior, single):
    """Reserve up to ``n`` slots; returns (count, old_head).  count 0 means nothing reserved."""
    capacity = np.int64(hdr[ho + H_CAPACITY])
    while True:
        old_head = np.int64(load_relaxed(hdr, ho + PROD_HEAD))
        # acquire: the consumer has finished reading the slots it released
        cons_tail = np.int64(load_acquire(hdr, ho + CONS_TAIL))
        free = (capacity + cons_tail - old_head) & _M32
        m = n
        if m > free:
            if behavior == RING_QUEUE_FIXED:
                return 0, old_head
            m = free
        if m == 0:
            return 0, old_head
        new_head = (old_head + m) & _M32
        if single:
            hdr[ho + PROD_HEAD] = np.uint32(new_head)
            return m, old_head
        if np.int64(cas(hdr, ho + PROD_HEAD, old_head, new_head)) == old_head:
            return m, old_head
        cpu_pause()


@kernel
def _move_cons_head(hdr, ho, n, behavior, single):
    """Claim up to ``n`` filled slots; returns (count, old_head)."""
    while True:
        old_head = np.int64(load_relaxed(hdr, ho + CONS_HEAD))
        # acquire: the producer's slot writes are visible once we see its tail
        prod_tail = np.int64(load_acquire(hdr, ho + PROD_TAIL))
        entries = (prod_tail - old_head) & _M32
        m = n
        if m > entries:
            if behavior == RING_QUEUE_FIXED:
                return 0, old_head
            m = entries
        if m == 0:
            return 0, old_head
        new_head = (old_head + m) & _M32
        if single:
            hdr[ho + CONS_HEAD] = np.uint32(new_head)
            return m, old_head
        if np.int64(cas(hdr, ho + CONS_HEAD, old_head, new_head)) == old_head:
            return m, old_head
        cpu_pause()


@kernel
def _update_tail(hdr, tail_idx, old_val, new_val, single):
    """Publish [old_val, new_val) once every earlier reservation has been published."""
    if not single:
        # earlier producers (consumers) that reserved before us must publish first
        while np.int64(load_acquire(hdr, tail_idx)) != old_val:
            cpu_pause()
    store_release(hdr, tail_idx, new_val)


@kernel
def _copy_in(slots, so, mask, head, objs, start, m):
    so = np.uint64(so)
    start = np.uint64(start)
    idx = np.uint64(head) & np.uint64(mask)
    size = np.uint64(mask) + np.uint64(1)
    m = np.uint64(m)
    first = size - idx if idx + m > size else m
    for i in range(first):
        slots[so + idx + i] = objs[start + i]
    for i in range(first, m):
        slots[so + i - first] = objs[start + i]


@kernel
def _copy_out(slots, so, mask, head, objs, start, m):
    so = np.uint64(so)
    start = np.uint64(start)
    idx = np.uint64(head) & np.uint64(mask)
    size = np.uint64(mask) + np.uint64(1)
    m = np.uint64(m)
    first = size - idx if idx + m > size else m
    for i in range(first):
        objs[start + i] = slots[so + idx + i]
    for i in range(first, m):
        objs[start + i] = slots[so + i - first]


@kernel
def ring_do_enqueue(hdr, ho, slots, so, objs, start, n, behavior, single):
    """Enqueue ``objs[start:start+n]``; the common body of every enqueue call."""
    if n <= 0:
        return 0
    m, old_head = _move_prod_head(hdr, ho, n, behavior, single)
    if m == 0:
        return 0
    _copy_in(slots, so, hdr[ho + H_MASK], old_head, objs, start, m)
    _update_tail(hdr, ho + PROD_TAIL, old_head, (old_head + m) & _M32, single)
    return m


@kernel
def ring_do_dequeue(hdr, ho, slots, so, objs, start, n, behavior, single):
    """Dequeue into ``objs[start:start+n]``; the common body of every dequeue call."""
    if n <= 0:
        return 0
    m, old_head = _move_cons_head(hdr, ho, n, behavior, single)
    if m == 0:
        return 0
    _copy_out(slots, so, hdr[ho + H_MASK], old_head, objs, start, m)
    _update_tail(hdr, ho + CONS_TAIL, old_head, (old_head + m) & _M32, single)
    return m


@kernel
def ring_count_at(hdr, ho):
    """Objects in the ring whose header is at ``hdr[ho:]`` (a snapshot)."""
    prod_tail = np.int64(load_acquire(hdr, ho + PROD_TAIL))
    cons_tail = np.int64(load_acquire(hdr, ho + CONS_TAIL))
    c = (prod_tail - cons_tail) & _M32
    cap = np.int64(hdr[ho + H_CAPACITY])
    return c if c <= cap else cap


# --- the DPDK-named entry points --------------------------------------------------------------

@kernel
def ring_mp_enqueue_bulk(hdr, slots, objs, n):
    """Enqueue exactly ``n`` objects (multi-producer safe); returns ``n`` or 0."""
    return ring_do_enqueue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_FIXED), np.bool_(False))


@kernel
def ring_sp_enqueue_bulk(hdr, slots, objs, n):
    """Enqueue exactly ``n`` objects (single producer); returns ``n`` or 0."""
    return ring_do_enqueue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_FIXED), np.bool_(True))


@kernel
def ring_enqueue_bulk(hdr, slots, objs, n):
    """Enqueue exactly ``n`` objects in the ring's own producer mode; returns ``n`` or 0."""
    return ring_do_enqueue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_FIXED), (hdr[H_FLAGS] & RING_F_SP_ENQ) != 0)


@kernel
def ring_mp_enqueue_burst(hdr, slots, objs, n):
    """Enqueue up to ``n`` objects (multi-producer safe); returns how many."""
    return ring_do_enqueue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_VARIABLE), np.bool_(False))


@kernel
def ring_sp_enqueue_burst(hdr, slots, objs, n):
    """Enqueue up to ``n`` objects (single producer); returns how many."""
    return ring_do_enqueue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_VARIABLE), np.bool_(True))


@kernel
def ring_enqueue_burst(hdr, slots, objs, n):
    """Enqueue up to ``n`` objects in the ring's own producer mode; returns how many."""
    return ring_do_enqueue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_VARIABLE), (hdr[H_FLAGS] & RING_F_SP_ENQ) != 0)


@kernel
def ring_mc_dequeue_bulk(hdr, slots, objs, n):
    """Dequeue exactly ``n`` objects (multi-consumer safe); returns ``n`` or 0."""
    return ring_do_dequeue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_FIXED), np.bool_(False))


@kernel
def ring_sc_dequeue_bulk(hdr, slots, objs, n):
    """Dequeue exactly ``n`` objects (single consumer); returns ``n`` or 0."""
    return ring_do_dequeue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_FIXED), np.bool_(True))


@kernel
def ring_dequeue_bulk(hdr, slots, objs, n):
    """Dequeue exactly ``n`` objects in the ring's own consumer mode; returns ``n`` or 0."""
    return ring_do_dequeue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_FIXED), (hdr[H_FLAGS] & RING_F_SC_DEQ) != 0)


@kernel
def ring_mc_dequeue_burst(hdr, slots, objs, n):
    """Dequeue up to ``n`` objects (multi-consumer safe); returns how many."""
    return ring_do_dequeue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_VARIABLE), np.bool_(False))


@kernel
def ring_sc_dequeue_burst(hdr, slots, objs, n):
    """Dequeue up to ``n`` objects (single consumer); returns how many."""
    return ring_do_dequeue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_VARIABLE), np.bool_(True))


@kernel
def ring_dequeue_burst(hdr, slots, objs, n):
    """Dequeue up to ``n`` objects in the ring's own consumer mode; returns how many."""
    return ring_do_dequeue(hdr, _Z, slots, _Z, objs, _Z, np.int64(n), np.int64(RING_QUEUE_VARIABLE), (hdr[H_FLAGS] & RING_F_SC_DEQ) != 0)


@kernel
def ring_count(hdr):
    """Objects in the ring (a snapshot: exact only when nobody is enqueuing or dequeuing)."""
    return ring_count_at(hdr, 0)


@kernel
def ring_free_count(hdr):
    """Free slots in the ring (a snapshot)."""
    return np.int64(hdr[H_CAPACITY]) - ring_count(hdr)
