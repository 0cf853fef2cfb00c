"""Heap kernels: ``rte_malloc`` / ``rte_zmalloc`` / ``rte_calloc`` / ``rte_realloc`` / ``rte_free``.

The heap (layout in :mod:`pktbuf.buf.heap.layout`) keeps DPDK's design: elements in address order,
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

``heap_lcore_malloc`` / ``heap_lcore_zmalloc`` / ``heap_lcore_free`` take an lcore and put
that lcore's cache of small freed blocks (:mod:`pktbuf.buf.heap.cache`) in front of all this:
a block of up to ``ctl[H_CACHE_GRAINS]`` grains is still claimed and zeroed by its free, then
kept for the lcore's next malloc of the same size instead of merged, so the common case takes
no heap lock at all.  ``heap_malloc`` & co. are these calls without an lcore.
``heap_lcore_malloc_counted`` / ``heap_lcore_free_counted`` are the same with the heap lock's
statistics compiled in (:mod:`pktbuf.buf.heap.lock`).

Dirty tracking (which bytes of a free element may be non-zero, so ``zmalloc`` clears only
those) and the free-list, split and merge primitives are in :mod:`pktbuf.buf.heap.elem`; the
read-only kernels (``heap_malloc_validate``, ``heap_find_elem``, ``heap_get_stats``,
``heap_validate``) in :mod:`pktbuf.buf.heap.audit`, re-exported here.

Kernels return an address (> 0) or 0 / a count on success and a negative code otherwise:
-22 (EINVAL) size <= 0 or alignment not a power of two, -12 (ENOMEM) no free element fits,
-9 (EBADF) not a pointer to the start of a block of this heap, -114 (EALREADY) the block is
already free or being freed.  ``heap_free(heap, 0)`` is a no-op, as ``rte_free(NULL)``.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import field_cas, field_store_release
from ...errors import E_ALREADY, E_BADF, E_INVAL, E_NOMEM
from ...lcore import LCORE_ANY
from ...rawmem import memcpy, memset
from .audit import heap_find_elem, heap_get_stats, heap_malloc_validate, heap_validate  # noqa: F401
from .cache import _cache_flush, _cache_flush_all, _cache_get, _cache_put, _cacheable
from .elem import (_cls, _free_tail, _grains, _list_insert, _list_remove, _malloc_locked,
                   _merge_insert, _ptr_grain, _state)
from .layout import (CACHE_ROWS, ELEM_BUSY, ELEM_CACHED, ELEM_FREE, ELEM_FREEING, ELEM_NONE,
                     GRAIN, GRAIN_SHIFT, H_ALLOC_COUNT, H_ALLOC_GRAINS, H_BASE, H_FREE_COUNT,
                     H_FREE_GRAINS, H_HEADS, H_LAST_OWNER, H_MAGIC, H_NGRAINS, H_ZERO_IN_LOCK,
                     HEAP_CTL_WORDS, HEAP_MAGIC, MAX_GRAINS, N_CLASSES, H_CACHE_GRAINS,
                     H_CACHE_LARGE)
from .layout import LS_CACHE_HIT, LS_CACHE_PUT
from .lock import _lock, _row, _unlock, _zero_begin, _zero_end

__all__ = ["heap_init", "heap_malloc", "heap_zmalloc", "heap_calloc", "heap_realloc",
           "heap_free", "heap_malloc_validate", "heap_get_stats", "heap_validate",
           "heap_find_elem", "heap_lcore_malloc", "heap_lcore_zmalloc", "heap_lcore_free",
           "heap_cache_flush", "heap_lcore_malloc_counted", "heap_lcore_free_counted"]

_MAX_SIZE = MAX_GRAINS * GRAIN


# ---------------------------------------------------------------------------------------------
# claiming a block, checking arguments

@kernel(inline="always")
def _claim(elems, g):
    """BUSY -> FREEING by compare-and-swap: 0, or -114 (already free / being freed), -9."""
    old = np.int64(field_cas(elems, g, "state", ELEM_BUSY, ELEM_FREEING))
    if old == ELEM_BUSY:
        return 0
    if old == ELEM_FREE or old == ELEM_FREEING or old == ELEM_CACHED:
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
# allocation (the search and the split are in .elem)

@kernel(literal=("stats",))
def _malloc_shared(heap, size, align, lcore, stats):
    """The shared heap's malloc: the block's grain, or a negative code (``lcore`` only names
    the statistics row)."""
    rc = _check_args(size, align)
    if rc < 0:
        return np.int64(rc)
    s = _grains(size)
    ctl = heap.ctl
    if s > ctl[H_NGRAINS]:
        return np.int64(E_NOMEM)
    t = _lock(heap, lcore, stats)
    a = _malloc_locked(ctl, heap.elems, s, align)
    _unlock(heap, lcore, stats, t)
    if a < 0:
        return np.int64(E_NOMEM)
    return a


@kernel
def _malloc(heap, size, align):
    """The common body of malloc/zmalloc/calloc without an lcore: the block's grain, or a
    negative code."""
    return _malloc_shared(heap, size, align, LCORE_ANY, False)


@kernel(literal=("stats",))
def _lcore_malloc(heap, lcore, size, align, stats):
    """malloc through ``lcore``'s cache: a cached block of the same size if there is one, else
    the shared heap; on ENOMEM every cache is flushed and the shared heap tried again."""
    rc = _check_args(size, align)
    if rc < 0:
        return np.int64(rc)
    ctl = heap.ctl
    s = _grains(size)
    if align <= GRAIN and _cacheable(ctl, lcore, s):
        a = _cache_get(heap, lcore, s, stats)
        if a >= 0:
            if stats:
                heap.lockstat[_row(lcore) + LS_CACHE_HIT] += 1
            return a
    a = _malloc_shared(heap, size, align, lcore, stats)
    if a == E_NOMEM and (ctl[H_CACHE_GRAINS] > 0 or ctl[H_CACHE_LARGE] > 0) \
            and _cache_flush_all(heap) > 0:
        a = _malloc_shared(heap, size, align, lcore, stats)
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
# freeing (the merge is in .elem)

@kernel(inline="always")
def _zero_block(heap, g, s, lcore, stats):
    t = _zero_begin(stats)
    memset(heap.ctl[H_BASE] + (g << GRAIN_SHIFT), 0, s << GRAIN_SHIFT)
    _zero_end(heap, lcore, stats, t, s << GRAIN_SHIFT)


@kernel(literal=("stats",))
def _free_claimed_shared(heap, g, lcore, stats, zeroed):
    """Free block ``g`` that we hold in FREEING state to the shared heap: zero it (unless
    ``zeroed``), then merge under the lock."""
    ctl = heap.ctl
    elems = heap.elems
    s = np.int64(elems[g].size)
    in_lock = ctl[H_ZERO_IN_LOCK] != 0
    if not in_lock and not zeroed:
        _zero_block(heap, g, s, lcore, stats)   # the seed idea: nobody waits for this
    t = _lock(heap, lcore, stats)
    if in_lock and not zeroed:
        _zero_block(heap, g, s, lcore, stats)   # upstream placement: everyone waits
    _merge_insert(ctl, elems, g)
    ctl[H_ALLOC_COUNT] -= 1
    ctl[H_ALLOC_GRAINS] -= s
    ctl[H_FREE_GRAINS] += s
    _unlock(heap, lcore, stats, t)


@kernel
def _free_claimed(heap, g):
    """Free block ``g`` that we hold in FREEING state: zero it, then merge under the lock."""
    _free_claimed_shared(heap, g, LCORE_ANY, False, False)


@kernel(literal=("stats",))
def _lcore_free(heap, lcore, ptr, stats):
    """free through ``lcore``'s cache: claim, zero (outside any lock), keep it in the cache if
    it is small enough, else merge it into the shared heap."""
    if ptr == 0:
        return 0
    g = _ptr_grain(heap.ctl, ptr)
    if g < 0:
        return E_BADF
    rc = _claim(heap.elems, g)
    if rc < 0:
        return rc
    s = np.int64(heap.elems[g].size)
    if _cacheable(heap.ctl, lcore, s):
        _zero_block(heap, g, s, lcore, stats)
        if _cache_put(heap, lcore, g, s, stats):
            if stats:
                heap.lockstat[_row(lcore) + LS_CACHE_PUT] += 1
            return 0
        _free_claimed_shared(heap, g, lcore, stats, True)
        return 0
    _free_claimed_shared(heap, g, lcore, stats, False)
    return 0


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
    ctl[H_LAST_OWNER] = -1
    heap.cache[:] = 0
    heap.lockstat[:] = 0
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
    t0 = _lock(heap, LCORE_ANY, False)
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
    _unlock(heap, LCORE_ANY, False, t0)


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
    t0 = _lock(heap, LCORE_ANY, False)
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
    _unlock(heap, LCORE_ANY, False, t0)
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


# ---------------------------------------------------------------------------------------------
# through an lcore's cache

@kernel
def heap_lcore_malloc(heap, lcore, size, align):
    """heap_malloc through the cache of ``lcore`` (0 .. MAX_LCORE - 1; ``LCORE_ANY`` = -1 uses
    the shared heap only): a block of the same grain count that this lcore freed, if its
    cache holds one (no heap lock), else the shared heap; before reporting -12 every lcore's
    cache is flushed and the shared heap tried again.  Cached blocks read as zeros.  Two
    threads must not use one lcore id at once (if they do, they bypass the cache, see
    :mod:`.cache`)."""
    a = _lcore_malloc(heap, lcore, size, align, False)
    if a < 0:
        return a
    return heap.ctl[H_BASE] + (a << GRAIN_SHIFT)


@kernel
def heap_lcore_zmalloc(heap, lcore, size, align):
    """heap_zmalloc through ``lcore``'s cache (a cached block is zero: no memset)."""
    a = _lcore_malloc(heap, lcore, size, align, False)
    if a < 0:
        return a
    _zero_dirty(heap, a)
    return heap.ctl[H_BASE] + (a << GRAIN_SHIFT)


@kernel
def heap_lcore_free(heap, lcore, ptr):
    """heap_free through ``lcore``'s cache: the block is claimed and zeroed as by heap_free, then
    kept in the cache when it is small enough (a full bin first returns its older half to the
    shared heap), else merged into the shared heap.  Returns as heap_free: 0, -9, -114 (also
    for a block that sits in a cache: it is free)."""
    return _lcore_free(heap, lcore, ptr, False)


@kernel
def heap_cache_flush(heap, lcore):
    """Return the blocks of ``lcore``'s cache (``LCORE_ANY``: of every lcore) to the shared heap,
    merging them there; the number of blocks.  Safe while the lcore runs (it waits for the
    row's lock)."""
    if lcore == LCORE_ANY:
        return _cache_flush_all(heap)
    if lcore < 0 or lcore >= CACHE_ROWS:
        return np.int64(E_INVAL)
    return _cache_flush(heap, lcore, False)


@kernel
def heap_lcore_malloc_counted(heap, lcore, size, align):
    """heap_lcore_malloc, instrumented: lock statistics in ``heap.lockstat`` (see
    :mod:`.lock`).  For measurements; the other kernels never count."""
    a = _lcore_malloc(heap, lcore, size, align, True)
    if a < 0:
        return a
    return heap.ctl[H_BASE] + (a << GRAIN_SHIFT)


@kernel
def heap_lcore_free_counted(heap, lcore, ptr):
    """heap_lcore_free, instrumented (see heap_lcore_malloc_counted)."""
    return _lcore_free(heap, lcore, ptr, True)
