"""Heap elements and free lists: the primitives the heap kernels are built from.

Everything here works on the element table and control words of :mod:`pktbuf.buf.heap.layout`:
the size class of an element (:func:`_cls`), its free list (insert, remove), the dirty range of
a free element (clip, hull), finding and carving a block out of a free element (allocation:
first fit from the end of the element, splitting off the rest), and merging a freed element
with its free neighbours.  Every function that changes the lists runs under the heap lock,
taken by the kernels in :mod:`pktbuf.buf.heap.kernels`.

**Dirty tracking.**  Each free element records one dirty range ``[dlo, dhi)`` (grains); all its
bytes outside the range are zero.  The rules:

* a heap over fresh memory (a new memfd is zero-filled) starts clean; over memory of unknown
  contents it starts as one element dirty end to end;
* a freed block is zeroed completely (steps 2/3 of ``heap_free``, :mod:`pktbuf.buf.heap.kernels`),
  so its own part of a merge is clean;
* a merge takes the smallest range covering the dirty ranges of the parts (the *hull*): a
  dirty neighbour makes only its own part dirty unless dirty parts lie on both sides, when the
  clean middle is (conservatively) counted as dirty too -- more zeroing later, never less;
* a split gives each piece the intersection of the range with its span;
* ``zmalloc`` zeroes the dirty range of the block it gets (nothing at all for clean memory).

DPDK keeps one ``dirty`` flag per element and ORs it on merge, so one dirty neighbour makes
the whole merged element dirty and later zmallocs of it memset everything; a range keeps the
clean parts known to be clean, so a zmalloc clears only what was written.  Header bytes need no erasing on merge here (no in-band
headers).
"""
from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros

from ..._jit import kernel
from ...atomics import field_load_acquire, field_store_release
from .layout import (ELEM_BUSY, ELEM_FREE, ELEM_NONE, GRAIN, GRAIN_SHIFT, H_ALLOC_COUNT,
                     H_ALLOC_GRAINS, H_BASE, H_FREE_COUNT, H_FREE_GRAINS, H_HEADS, H_NGRAINS,
                     H_NONEMPTY)


# ---------------------------------------------------------------------------------------------
# size classes, dirty ranges, the element table, free lists (all inlined)

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
