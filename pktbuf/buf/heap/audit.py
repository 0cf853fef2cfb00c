"""Read-only heap kernels: what a pointer is, the statistics, and the invariant audit.

* ``heap_malloc_validate`` (``rte_malloc_validate``): the usable size of a live block;
* ``heap_find_elem``: the element containing an address (a walk, for error reports);
* ``heap_get_stats`` (``rte_malloc_get_socket_stats``): sizes and counts, under the lock;
* ``heap_validate``: every invariant of a quiescent heap -- element order and links, free
  lists, counters, dirty ranges, and (optionally) that free memory outside the dirty ranges
  reads as zero.  Reasons are ``layout.V_*``.

None of them changes the heap.  They are re-exported by :mod:`pktbuf.buf.heap.kernels`.
"""
from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from ..._jit import kernel
from ...errors import E_ALREADY, E_BADF, E_FAULT
from ...rawmem import addr_u8
from ...atomics import load_relaxed
from ...spinlock import spin_is_locked, spin_lock, spin_unlock
from .elem import _cls, _ptr_grain, _state
from .layout import (C_BIN0, C_COUNT, C_GRAINS, C_LARGE, C_LOCK, CACHE_BINS, CACHE_LINE_I32, CACHE_ROW,
                     CACHE_ROWS, ELEM_CACHED, V_CACHE)
from .layout import (ELEM_BUSY, ELEM_FREE, ELEM_FREEING, ELEM_NONE, GRAIN_SHIFT, H_ALLOC_COUNT,
                     H_ALLOC_GRAINS, H_BASE, H_FREE_COUNT, H_FREE_GRAINS, H_HEADS, H_LOCK,
                     H_NGRAINS, H_NONEMPTY, N_CLASSES, V_ADJACENT_FREE, V_BITMAP, V_COUNTERS,
                     V_DIRTY_RANGE, V_FREE_LIST, V_INTERIOR, V_LOCKED, V_NOT_ZERO, V_PREV, V_SIZE,
                     V_STATE)

__all__ = ["heap_malloc_validate", "heap_find_elem", "heap_get_stats", "heap_validate"]


@kernel
def heap_malloc_validate(heap, ptr):
    """``rte_malloc_validate``: the usable size of live block ``ptr`` (bytes), or -9 / -114."""
    g = _ptr_grain(heap.ctl, ptr)
    if g < 0:
        return np.int64(E_BADF)
    st = _state(heap.elems, g)
    if st == ELEM_BUSY:
        return np.int64(heap.elems[g].size) << GRAIN_SHIFT
    if st == ELEM_FREE or st == ELEM_FREEING or st == ELEM_CACHED:
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
def _cached_totals(heap):
    """Blocks and grains in all lcore caches (a snapshot: relaxed reads of each row)."""
    n = np.int64(0)
    grains = np.int64(0)
    for lc in range(CACHE_ROWS):
        r = lc * CACHE_ROW
        n += load_relaxed(heap.cache, r + C_COUNT)
        grains += load_relaxed(heap.cache, r + C_GRAINS)
    return n, grains


@kernel
def heap_get_stats(heap, out):
    """``rte_malloc_get_socket_stats``: ``out[:8]`` = total, free, allocated bytes, greatest free
    block (bytes), free elements, allocated elements (see ``layout.STAT_NAMES``), then the
    bytes and blocks held in lcore caches.  Cached blocks are free for the user: they count in
    the free bytes and not in the allocated bytes and elements; ``free_count`` and the greatest
    free block are of the shared heap's free elements (a cached block serves only its lcore and
    its size).  The cache figures are a snapshot while other threads run."""
    ctl = heap.ctl
    elems = heap.elems
    ncached, gcached = _cached_totals(heap)
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
    out[1] = (ctl[H_FREE_GRAINS] + gcached) << GRAIN_SHIFT
    out[2] = (ctl[H_ALLOC_GRAINS] - gcached) << GRAIN_SHIFT
    out[3] = big << GRAIN_SHIFT
    out[4] = ctl[H_FREE_COUNT]
    out[5] = ctl[H_ALLOC_COUNT] - ncached
    out[6] = gcached << GRAIN_SHIFT
    out[7] = ncached
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
    ncached = np.int64(0)
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
        if st != ELEM_FREE and st != ELEM_BUSY and st != ELEM_FREEING and st != ELEM_CACHED:
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
            if st == ELEM_CACHED:
                ncached += 1
                if e.dlo < e.dhi:
                    reason = V_CACHE
                    where = g
                    break
                if check_zero:
                    mem = addr_u8(base + (g << GRAIN_SHIFT), size << GRAIN_SHIFT)
                    for i in range(size << GRAIN_SHIFT):
                        if mem[i] != 0:
                            reason = V_NOT_ZERO
                            where = g + (i >> GRAIN_SHIFT)
                            break
                    if reason != 0:
                        break
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
    if reason == 0:
        # every cached element is in exactly one cache slot of its size; rows count right
        listed = np.int64(0)
        for lc in range(CACHE_ROWS):
            r = lc * CACHE_ROW
            c = heap.cache
            rn = np.int64(0)
            rg = np.int64(0)
            if c[r + C_LOCK] != 0:
                reason = V_LOCKED
                where = -1
                break
            for bi in range(CACHE_BINS):
                b = r + C_BIN0 + bi * CACHE_LINE_I32
                for i in range(np.int64(c[b])):
                    h = np.int64(c[b + 1 + i])
                    if h < 0 or h >= n or elems[h].state != ELEM_CACHED or elems[h].size != bi + 1:
                        reason = V_CACHE
                        where = h
                        break
                    rn += 1
                    rg += bi + 1
                if reason != 0:
                    break
            if reason != 0:
                break
            v = np.int64(c[r + C_LARGE])
            if v > 0:
                h = v - 1
                if h >= n or elems[h].state != ELEM_CACHED:
                    reason = V_CACHE
                    where = h
                    break
                rn += 1
                rg += elems[h].size
            if rn != c[r + C_COUNT] or rg != c[r + C_GRAINS]:
                reason = V_CACHE
                where = -1
                break
            listed += rn
        if reason == 0 and listed != ncached:
            reason = V_CACHE
            where = -1
    if reason == 0 and (nfree != ctl[H_FREE_COUNT] or free_grains != ctl[H_FREE_GRAINS]
                        or nalloc != ctl[H_ALLOC_COUNT] or alloc_grains != ctl[H_ALLOC_GRAINS]):
        reason = V_COUNTERS
    info[0] = reason
    info[1] = where
    return E_FAULT if reason != 0 else 0
