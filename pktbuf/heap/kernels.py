"""Heap kernels: ``rte_malloc`` / ``rte_zmalloc`` / ``rte_calloc`` / ``rte_realloc`` / ``rte_free``.

The heap (layout in :mod:`pktbuf.heap.layout`) keeps DPDK's design: elements in address order,
free elements on size-class lists (here one list per power of two of grains), first fit within
a class, allocation from the *end* of the chosen free element (its start and list entry usually
stay put), splitting off what is not needed, and merging a freed element with both free
neighbours.  Like DPDK it keeps freed memory zeroed, so ``zmalloc`` needs no memset; memory
whose contents are unknown (a heap created over memory that was not cleared) is *dirty*.

The idea this module carries: ``heap_free`` clears the block **before** it takes the heap lock.
Upstream (``malloc_heap_free`` -> ``malloc_elem_free``) merges and then memsets inside the lock,
so every other thread waits for the memset of a large block.  Here:

1. **Claim** the block without the lock: one compare-and-swap of its state word
   ``BUSY -> FREEING``.  A second free of the same pointer (even racing, from another thread)
   fails the swap and returns -114; a pointer that is not the start of a live block finds
   another state and returns -9.  Nothing is changed in either case.
2. **Zero** the block's bytes without the lock.  Nobody else can touch them: the block is not
   free yet (neighbours that are freed meanwhile do not merge with a ``FREEING`` element) and not
   allocated to anyone else.
3. **Lock**, merge with the neighbours that are free *now*, put the result on its list,
   publish it ``FREE``, unlock.  A neighbour that was being zeroed concurrently merges with us
   when its own step 3 runs, so after both frees no two free elements are adjacent.

``ELEM_FREEING`` also protects ``heap_realloc``: the owner claims the block for the resize, so
a concurrent free of it is refused.  The switch ``zero_in_lock`` (ctl word ``H_ZERO_IN_LOCK``)
does the memset after taking the lock instead, the upstream placement, for the A/B benchmark.

**Dirty tracking.**  Each free element records one dirty range ``[dlo, dhi)`` (grains); all its
bytes outside the range are zero.  The rules:

* a heap over fresh memory (a new memfd is zero-filled) starts clean; over memory of unknown
  contents it starts as one element dirty end to end;
* a freed block is zeroed completely (steps 2/3), so its own part of a merge is clean;
* a merge takes the smallest range covering the dirty ranges of the parts (the *hull*): a
  dirty neighbour makes only its own part dirty unless dirty parts lie on both sides, when the
  clean middle is (conservatively) counted as dirty too -- more zeroing later, never less;
* a split gives each piece the intersection of the range with its span;
* ``zmalloc`` zeroes the dirty range of the block it gets (nothing at all for clean memory).

DPDK keeps one ``dirty`` flag per element and ORs it on merge, so one dirty neighbour makes
the whole merged element dirty and later zmallocs of it memset everything; a range keeps the
clean parts known to be clean, so a zmalloc clears only what was written.  Header bytes need no erasing on merge here (no in-band
headers).

Kernels return an address (> 0) or 0 / a count on success and a negative code otherwise:
-22 (EINVAL) size <= 0 or alignment not a power of two, -12 (ENOMEM) no free element fits,
-9 (EBADF) not a pointer to the start of a block of this heap, -114 (EALREADY) the block is
already free or being freed.  ``heap_free(heap, 0)`` is a no-op, as ``rte_free(NULL)``.
"""
from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros

from .._jit import kernel
from ..atomics import field_cas, field_load_acquire, field_store_release
from ..errors import E_ALREADY, E_BADF, E_FAULT, E_INVAL, E_NOMEM
from ..rawmem import addr_u8, memcpy, memset
from ..spinlock import spin_is_locked, spin_lock, spin_unlock
from .layout import (ELEM_BUSY, ELEM_FREE, ELEM_FREEING, ELEM_NONE, GRAIN, GRAIN_SHIFT,
                     H_ALLOC_COUNT, H_ALLOC_GRAINS, H_BASE, H_FREE_COUNT, H_FREE_GRAINS, H_HEADS,
                     H_LOCK, H_MAGIC, H_NGRAINS, H_NONEMPTY, H_ZERO_IN_LOCK, HEAP_CTL_WORDS,
                     HEAP_MAGIC, MAX_GRAINS, N_CLASSES, V_ADJACENT_FREE, V_BITMAP, V_COUNTERS,
                     V_DIRTY_RANGE, V_FREE_LIST, V_INTERIOR, V_LOCKED, V_NOT_ZERO, V_PREV, V_SIZE,
                     V_STATE)

__all__ = ["heap_init", "heap_malloc", "heap_zmalloc", "heap_calloc", "heap_realloc",
           "heap_free", "heap_malloc_validate", "heap_get_stats", "heap_validate",
           "heap_find_elem"]

_MAX_SIZE = MAX_GRAINS * GRAIN


# ---------------------------------------------------------------------------------------------
# small helpers (all inlined)

@kernel(inline="always")
def _cls(s):
    """Free list of an element of ``s`` grains: ceil(log2(s))."""
    if s <= 1:
        return np.int64(0)
    return np.int64(64 - leading_zeros(np.uint64(s - 1)))


@kernel(inline="always")
def _grains(size):
    return (np.int64(size) + (GRAIN - 1)) >> GRAIN_SHIFT


@kernel(inline="always")
def _clip(lo, hi, a, b):
    """The dirty range [lo, hi) intersected with [a, b); (0, 0) if empty."""
    lo2 = lo if lo > a else a
    hi2 = hi if hi < b else b
    if lo2 >= hi2:
        return np.int64(0), np.int64(0)
    return np.int64(lo2), np.int64(hi2)


@kernel(inline="always")
def _hull(lo1, hi1, lo2, hi2):
    """Smallest range covering two dirty ranges (either may be empty)."""
    if lo1 >= hi1:
        return np.int64(lo2), np.int64(hi2)
    if lo2 >= hi2:
        return np.int64(lo1), np.int64(hi1)
    return np.int64(min(lo1, lo2)), np.int64(max(hi1, hi2))


@kernel(inline="always")
def _state(elems, g):
    return np.int64(field_load_acquire(elems, g, "state"))


@kernel(inline="always")
def _list_insert(ctl, elems, g, c):
    """Push element ``g`` on free list ``c`` (LIFO, as LIST_INSERT_HEAD)."""
    head = ctl[H_HEADS + c]
    e = elems[g]
    e.cls = c
    e.fprev = -1
    e.fnext = head
    if head >= 0:
        elems[head].fprev = g
    ctl[H_HEADS + c] = g
    ctl[H_NONEMPTY] |= np.int64(1) << c


@kernel(inline="always")
def _list_remove(ctl, elems, g):
    e = elems[g]
    c = np.int64(e.cls)
    nx = e.fnext
    pv = e.fprev
    if pv >= 0:
        elems[pv].fnext = nx
    else:
        ctl[H_HEADS + c] = nx
        if nx < 0:
            ctl[H_NONEMPTY] &= ~(np.int64(1) << c)
    if nx >= 0:
        elems[nx].fprev = pv
    e.cls = -1


@kernel(inline="always")
def _free_tail(ctl, elems, t, end, owner, lo, hi):
    """After a split: [t, end) becomes a free element (dirty range clipped to it) right above
    element ``owner``, or, if it is empty, ``owner`` now reaches ``end``.  Under the lock."""
    n = ctl[H_NGRAINS]
    if t < end:
        tlo, thi = _clip(lo, hi, t, end)
        e = elems[t]
        e.size = end - t
        e.prev = owner
        e.dlo = tlo
        e.dhi = thi
        _list_insert(ctl, elems, t, _cls(end - t))
        if end < n:
            elems[end].prev = t
        field_store_release(elems, t, "state", ELEM_FREE)
        ctl[H_FREE_COUNT] += 1
    elif end < n:
        elems[end].prev = owner


@kernel(inline="always")
def _ptr_grain(ctl, ptr):
    """Grain of a block pointer, or -1 if it cannot be one (outside, not grain aligned)."""
    off = np.int64(ptr) - ctl[H_BASE]
    if off < 0 or (off & (GRAIN - 1)) != 0:
        return np.int64(-1)
    g = off >> GRAIN_SHIFT
    if g >= ctl[H_NGRAINS]:
        return np.int64(-1)
    return g


@kernel(inline="always")
def _claim(elems, g):
    """BUSY -> FREEING by compare-and-swap: 0, or -114 (already free / being freed), -9."""
    old = np.int64(field_cas(elems, g, "state", ELEM_BUSY, ELEM_FREEING))
    if old == ELEM_BUSY:
        return 0
    if old == ELEM_FREE or old == ELEM_FREEING:
        return E_ALREADY
    return E_BADF


@kernel(inline="always")
def _check_args(size, align):
    if size <= 0 or size > _MAX_SIZE:
        return E_INVAL
    if align < 0 or (align & (align - 1)) != 0:
        return E_INVAL
    return 0


# ---------------------------------------------------------------------------------------------
# allocation (under the lock)

@kernel(inline="always")
def _fit(ctl, elems, g, s, align):
    """Start grain of an ``s``-grain block at the end of free element ``g``, or -1."""
    end = g + np.int64(elems[g].size)
    a = end - s
    if a < g:
        return np.int64(-1)
    if align > GRAIN:
        base = ctl[H_BASE]
        al = (base + (a << GRAIN_SHIFT)) & ~(np.int64(align) - 1)
        a = (al - base) >> GRAIN_SHIFT
        if a < g:
            return np.int64(-1)
    return a


@kernel
def _carve(ctl, elems, g, a, s):
    """Hand out [a, a+s) of free element ``g``: ``g`` keeps [g, a), a tail element gets the rest.

    The block's dirty range is left in ``elems[a]`` for zmalloc.
    """
    e = elems[g]
    end = g + np.int64(e.size)
    lo = np.int64(e.dlo)
    hi = np.int64(e.dhi)
    tail = a + s
    _free_tail(ctl, elems, tail, end, a, lo, hi)
    if a > g:
        e.size = a - g
        flo, fhi = _clip(lo, hi, g, a)
        e.dlo = flo
        e.dhi = fhi
        c = _cls(a - g)
        if c != e.cls:
            _list_remove(ctl, elems, g)
            _list_insert(ctl, elems, g, c)
        elems[a].prev = g
    else:
        _list_remove(ctl, elems, g)
        ctl[H_FREE_COUNT] -= 1
    b = elems[a]
    b.size = s
    b.cls = -1
    blo, bhi = _clip(lo, hi, a, tail)
    b.dlo = blo
    b.dhi = bhi
    field_store_release(elems, a, "state", ELEM_BUSY)
    ctl[H_ALLOC_COUNT] += 1
    ctl[H_ALLOC_GRAINS] += s
    ctl[H_FREE_GRAINS] -= s


@kernel
def _malloc_locked(ctl, elems, s, align):
    """First fit from the class of ``s`` upwards; returns the block's grain or -1."""
    c = _cls(s)
    bits = np.uint64(ctl[H_NONEMPTY]) >> np.uint64(c)
    while bits != 0:
        k = c + np.int64(trailing_zeros(bits))
        g = ctl[H_HEADS + k]
        while g >= 0:
            a = _fit(ctl, elems, g, s, align)
            if a >= 0:
                _carve(ctl, elems, g, a, s)
                return a
            g = np.int64(elems[g].fnext)
        bits &= bits - np.uint64(1)
    return np.int64(-1)


@kernel
def _malloc(heap, size, align):
    """The common body of malloc/zmalloc/calloc: the block's grain, or a negative code."""
    rc = _check_args(size, align)
    if rc < 0:
        return np.int64(rc)
    s = _grains(size)
    ctl = heap.ctl
    if s > ctl[H_NGRAINS]:
        return np.int64(E_NOMEM)
    spin_lock(ctl, H_LOCK)
    a = _malloc_locked(ctl, heap.elems, s, align)
    spin_unlock(ctl, H_LOCK)
    if a < 0:
        return np.int64(E_NOMEM)
    return a


@kernel(inline="always")
def _zero_dirty(heap, a):
    """zmalloc: clear the dirty part of block ``a`` (clean memory is zero already)."""
    b = heap.elems[a]
    lo = np.int64(b.dlo)
    hi = np.int64(b.dhi)
    if lo < hi:
        memset(heap.ctl[H_BASE] + (lo << GRAIN_SHIFT), 0, (hi - lo) << GRAIN_SHIFT)
        b.dlo = 0
        b.dhi = 0


# ---------------------------------------------------------------------------------------------
# freeing (merge under the lock)

@kernel
def _merge_insert(ctl, elems, g):
    """Element ``g`` (zeroed, not on any list) becomes free: merge with free neighbours, list
    the result, publish it FREE.  Under the lock."""
    n = ctl[H_NGRAINS]
    size = np.int64(elems[g].size)
    lo = np.int64(0)
    hi = np.int64(0)
    nx = g + size
    if nx < n and _state(elems, nx) == ELEM_FREE:
        _list_remove(ctl, elems, nx)
        lo, hi = _hull(lo, hi, elems[nx].dlo, elems[nx].dhi)
        size += elems[nx].size
        field_store_release(elems, nx, "state", ELEM_NONE)
        ctl[H_FREE_COUNT] -= 1
    start = g
    listed = False
    pv = np.int64(elems[g].prev)
    if pv >= 0 and _state(elems, pv) == ELEM_FREE:
        p = elems[pv]
        lo, hi = _hull(p.dlo, p.dhi, lo, hi)
        size += p.size
        field_store_release(elems, g, "state", ELEM_NONE)
        start = pv
        if _cls(size) == p.cls:
            listed = True                 # stays where it is on its list
        else:
            _list_remove(ctl, elems, pv)
        ctl[H_FREE_COUNT] -= 1
    end = start + size
    if end < n:
        elems[end].prev = start
    e = elems[start]
    e.size = size
    e.dlo = lo
    e.dhi = hi
    if not listed:
        _list_insert(ctl, elems, start, _cls(size))
    field_store_release(elems, start, "state", ELEM_FREE)
    ctl[H_FREE_COUNT] += 1


@kernel
def _free_claimed(heap, g):
    """Free block ``g`` that we hold in FREEING state: zero it, then merge under the lock."""
    ctl = heap.ctl
    elems = heap.elems
    s = np.int64(elems[g].size)
    addr = ctl[H_BASE] + (g << GRAIN_SHIFT)
    in_lock = ctl[H_ZERO_IN_LOCK] != 0
    if not in_lock:
        memset(addr, 0, s << GRAIN_SHIFT)       # the seed idea: nobody waits for this
    spin_lock(ctl, H_LOCK)
    if in_lock:
        memset(addr, 0, s << GRAIN_SHIFT)       # upstream placement: everyone waits
    _merge_insert(ctl, elems, g)
    ctl[H_ALLOC_COUNT] -= 1
    ctl[H_ALLOC_GRAINS] -= s
    ctl[H_FREE_GRAINS] += s
    spin_unlock(ctl, H_LOCK)


# ---------------------------------------------------------------------------------------------
# public kernels

@kernel
def heap_init(heap, base, ngrains, dirty):
    """One free element over ``ngrains`` grains at address ``base`` (64-byte aligned);
    ``dirty`` if the memory's contents are unknown.  Returns 0 or -22."""
    ctl = heap.ctl
    elems = heap.elems
    if ngrains < 1 or ngrains > MAX_GRAINS or elems.size < ngrains \
            or ctl.size < HEAP_CTL_WORDS or (base & (GRAIN - 1)) != 0:
        return E_INVAL
    ctl[:] = 0
    for k in range(N_CLASSES):
        ctl[H_HEADS + k] = -1
    ctl[H_BASE] = base
    ctl[H_NGRAINS] = ngrains
    ctl[H_MAGIC] = HEAP_MAGIC
    e = elems[0]
    e.state = ELEM_NONE
    e.size = ngrains
    e.prev = -1
    if dirty:
        e.dlo = 0
        e.dhi = ngrains
    else:
        e.dlo = 0
        e.dhi = 0
    _list_insert(ctl, elems, 0, _cls(ngrains))
    e.state = ELEM_FREE
    ctl[H_FREE_GRAINS] = ngrains
    ctl[H_FREE_COUNT] = 1
    return 0


@kernel
def heap_malloc(heap, size, align):
    """``rte_malloc``: a block of at least ``size`` bytes aligned to ``align`` (0 = 64, a power
    of two); its address, or -22 / -12.  The bytes are not cleared."""
    a = _malloc(heap, size, align)
    if a < 0:
        return a
    return heap.ctl[H_BASE] + (a << GRAIN_SHIFT)


@kernel
def heap_zmalloc(heap, size, align):
    """``rte_zmalloc``: as heap_malloc, and the block reads as zeros.  Only its dirty part (if
    any) is memset: freed memory is already zero."""
    a = _malloc(heap, size, align)
    if a < 0:
        return a
    _zero_dirty(heap, a)
    return heap.ctl[H_BASE] + (a << GRAIN_SHIFT)


@kernel
def heap_calloc(heap, num, size, align):
    """``rte_calloc``: zeroed room for ``num`` objects of ``size`` bytes; -22 if either is not
    positive, -12 if the product is larger than any heap can be."""
    if num <= 0 or size <= 0:
        return np.int64(E_INVAL)
    if num > _MAX_SIZE // size:
        return np.int64(E_NOMEM)
    return heap_zmalloc(heap, num * size, align)


@kernel
def heap_free(heap, ptr):
    """``rte_free``: return a block.  0, or -9 (not a block of this heap), -114 (already free
    or being freed); on error nothing changes.  ``ptr == 0`` is a no-op."""
    if ptr == 0:
        return 0
    g = _ptr_grain(heap.ctl, ptr)
    if g < 0:
        return E_BADF
    rc = _claim(heap.elems, g)
    if rc < 0:
        return rc
    _free_claimed(heap, g)
    return 0


@kernel
def _shrink(heap, g, ns):
    """Cut block ``g`` (claimed) down to ``ns`` grains; the tail is zeroed and freed."""
    ctl = heap.ctl
    elems = heap.elems
    s = np.int64(elems[g].size)
    t = g + ns
    tlen = s - ns
    taddr = ctl[H_BASE] + (t << GRAIN_SHIFT)
    in_lock = ctl[H_ZERO_IN_LOCK] != 0
    if not in_lock:
        memset(taddr, 0, tlen << GRAIN_SHIFT)
    spin_lock(ctl, H_LOCK)
    if in_lock:
        memset(taddr, 0, tlen << GRAIN_SHIFT)
    elems[g].size = ns
    e = elems[t]
    e.size = tlen
    e.prev = g
    e.cls = -1
    nx = t + tlen
    if nx < ctl[H_NGRAINS]:
        elems[nx].prev = t
    _merge_insert(ctl, elems, t)
    ctl[H_ALLOC_GRAINS] -= tlen
    ctl[H_FREE_GRAINS] += tlen
    spin_unlock(ctl, H_LOCK)


@kernel
def _grow_in_place(heap, g, ns):
    """Extend claimed block ``g`` to ``ns`` grains into its free upper neighbour, if that one is
    free and large enough.  True if done."""
    ctl = heap.ctl
    elems = heap.elems
    s = np.int64(elems[g].size)
    nx = g + s
    n = ctl[H_NGRAINS]
    done = False
    spin_lock(ctl, H_LOCK)
    if nx < n and _state(elems, nx) == ELEM_FREE and s + elems[nx].size >= ns:
        f = elems[nx]
        end = nx + np.int64(f.size)
        lo = np.int64(f.dlo)
        hi = np.int64(f.dhi)
        _list_remove(ctl, elems, nx)
        field_store_release(elems, nx, "state", ELEM_NONE)
        ctl[H_FREE_COUNT] -= 1
        _free_tail(ctl, elems, g + ns, end, g, lo, hi)
        elems[g].size = ns
        ctl[H_ALLOC_GRAINS] += ns - s
        ctl[H_FREE_GRAINS] -= ns - s
        done = True
    spin_unlock(ctl, H_LOCK)
    return done


@kernel
def heap_realloc(heap, ptr, size, align):
    """``rte_realloc``: resize block ``ptr`` to ``size`` bytes, in place when it can (shrink, or
    grow into a free upper neighbour, keeping ``align``), else move: allocate, copy, free.

    Returns the (possibly new) address; ``ptr == 0`` is heap_malloc.  On -12 (ENOMEM) the old
    block is untouched, as C's realloc.  -22 for size <= 0 or a bad alignment; -9 / -114 as
    heap_free.  Bytes beyond the old size are not cleared.
    """
    if ptr == 0:
        return heap_malloc(heap, size, align)
    rc = _check_args(size, align)
    if rc < 0:
        return np.int64(rc)
    ctl = heap.ctl
    g = _ptr_grain(ctl, ptr)
    if g < 0:
        return np.int64(E_BADF)
    rc = _claim(heap.elems, g)
    if rc < 0:
        return np.int64(rc)
    s = np.int64(heap.elems[g].size)
    ns = _grains(size)
    al = np.int64(align) if align > GRAIN else np.int64(GRAIN)
    if (np.int64(ptr) & (al - 1)) == 0:
        if ns <= s:
            if ns < s:
                _shrink(heap, g, ns)
            field_store_release(heap.elems, g, "state", ELEM_BUSY)
            return np.int64(ptr)
        if _grow_in_place(heap, g, ns):
            field_store_release(heap.elems, g, "state", ELEM_BUSY)
            return np.int64(ptr)
    a = _malloc(heap, size, align)
    if a < 0:
        field_store_release(heap.elems, g, "state", ELEM_BUSY)
        return a
    keep = s if s < ns else ns
    dst = ctl[H_BASE] + (a << GRAIN_SHIFT)
    memcpy(dst, np.int64(ptr), keep << GRAIN_SHIFT)
    _free_claimed(heap, g)
    return dst


@kernel
def heap_malloc_validate(heap, ptr):
    """``rte_malloc_validate``: the usable size of live block ``ptr`` (bytes), or -9 / -114."""
    g = _ptr_grain(heap.ctl, ptr)
    if g < 0:
        return np.int64(E_BADF)
    st = _state(heap.elems, g)
    if st == ELEM_BUSY:
        return np.int64(heap.elems[g].size) << GRAIN_SHIFT
    if st == ELEM_FREE or st == ELEM_FREEING:
        return np.int64(E_ALREADY)
    return np.int64(E_BADF)


@kernel
def heap_find_elem(heap, ptr):
    """Start grain and state of the element containing address ``ptr`` (a walk under the lock,
    for error reports), or (-1, -1) if ``ptr`` is outside the heap."""
    ctl = heap.ctl
    off = np.int64(ptr) - ctl[H_BASE]
    n = ctl[H_NGRAINS]
    if off < 0 or off >= (n << GRAIN_SHIFT):
        return np.int64(-1), np.int64(-1)
    target = off >> GRAIN_SHIFT
    spin_lock(ctl, H_LOCK)
    g = np.int64(0)
    st = np.int64(-1)
    while g < n:
        size = np.int64(heap.elems[g].size)
        if size < 1:
            break
        if target < g + size:
            st = _state(heap.elems, g)
            break
        g += size
    spin_unlock(ctl, H_LOCK)
    return g, st


@kernel
def heap_get_stats(heap, out):
    """``rte_malloc_get_socket_stats``: ``out[:6]`` = total, free, allocated bytes, greatest free
    block (bytes), free elements, allocated elements (see ``layout.STAT_NAMES``)."""
    ctl = heap.ctl
    elems = heap.elems
    spin_lock(ctl, H_LOCK)
    big = np.int64(0)
    bits = np.uint64(ctl[H_NONEMPTY])
    if bits != 0:
        k = np.int64(63 - leading_zeros(bits))   # the largest class holds the largest block
        g = ctl[H_HEADS + k]
        while g >= 0:
            if elems[g].size > big:
                big = np.int64(elems[g].size)
            g = np.int64(elems[g].fnext)
    out[0] = ctl[H_NGRAINS] << GRAIN_SHIFT
    out[1] = ctl[H_FREE_GRAINS] << GRAIN_SHIFT
    out[2] = ctl[H_ALLOC_GRAINS] << GRAIN_SHIFT
    out[3] = big << GRAIN_SHIFT
    out[4] = ctl[H_FREE_COUNT]
    out[5] = ctl[H_ALLOC_COUNT]
    spin_unlock(ctl, H_LOCK)
    return 0


@kernel
def heap_validate(heap, check_zero, info):
    """Check every invariant of a quiescent heap (nobody else may use it meanwhile).

    Returns 0, or -14 (EFAULT) with ``info[0]`` = reason (``layout.V_*``) and ``info[1]`` = the
    grain where it was found.  ``check_zero`` also reads every byte of free memory outside the
    dirty ranges (slow).
    """
    ctl = heap.ctl
    elems = heap.elems
    n = ctl[H_NGRAINS]
    base = ctl[H_BASE]
    if spin_is_locked(ctl, H_LOCK):
        info[0] = V_LOCKED
        info[1] = -1
        return E_FAULT
    g = np.int64(0)
    prev = np.int64(-1)
    prev_free = False
    nfree = np.int64(0)
    free_grains = np.int64(0)
    nalloc = np.int64(0)
    alloc_grains = np.int64(0)
    reason = 0
    where = np.int64(-1)
    while g < n:
        e = elems[g]
        size = np.int64(e.size)
        st = np.int64(e.state)
        if size < 1 or g + size > n:
            reason = V_SIZE
            where = g
            break
        if st != ELEM_FREE and st != ELEM_BUSY and st != ELEM_FREEING:
            reason = V_STATE
            where = g
            break
        if e.prev != prev:
            reason = V_PREV
            where = g
            break
        for i in range(g + 1, g + size):
            if elems[i].state != ELEM_NONE:
                reason = V_INTERIOR
                where = i
                break
        if reason != 0:
            break
        if st == ELEM_FREE:
            if prev_free:
                reason = V_ADJACENT_FREE
                where = g
                break
            if e.cls != _cls(size):
                reason = V_FREE_LIST
                where = g
                break
            lo = np.int64(e.dlo)
            hi = np.int64(e.dhi)
            if lo < hi and (lo < g or hi > g + size):
                reason = V_DIRTY_RANGE
                where = g
                break
            if check_zero:
                mem = addr_u8(base + (g << GRAIN_SHIFT), size << GRAIN_SHIFT)
                for i in range(size << GRAIN_SHIFT):
                    gi = g + (i >> GRAIN_SHIFT)
                    if mem[i] != 0 and not (lo <= gi and gi < hi):
                        reason = V_NOT_ZERO
                        where = gi
                        break
                if reason != 0:
                    break
            nfree += 1
            free_grains += size
            prev_free = True
        else:
            nalloc += 1
            alloc_grains += size
            prev_free = False
        prev = g
        g += size
    if reason == 0:
        # every list entry is a FREE element of its class, linked both ways, listed once
        listed = np.int64(0)
        for k in range(N_CLASSES):
            h = ctl[H_HEADS + k]
            if (h >= 0) != ((ctl[H_NONEMPTY] >> k) & 1 == 1):
                reason = V_BITMAP
                where = k
                break
            before = np.int64(-1)
            while h >= 0:
                if h >= n or elems[h].state != ELEM_FREE or elems[h].cls != k \
                        or elems[h].fprev != before or listed > nfree:
                    reason = V_FREE_LIST
                    where = h
                    break
                listed += 1
                before = h
                h = np.int64(elems[h].fnext)
            if reason != 0:
                break
        if reason == 0 and listed != nfree:
            reason = V_FREE_LIST
    if reason == 0 and (nfree != ctl[H_FREE_COUNT] or free_grains != ctl[H_FREE_GRAINS]
                        or nalloc != ctl[H_ALLOC_COUNT] or alloc_grains != ctl[H_ALLOC_GRAINS]):
        reason = V_COUNTERS
    info[0] = reason
    info[1] = where
    return E_FAULT if reason != 0 else 0
