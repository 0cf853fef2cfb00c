"""Per-lcore caches of freed small blocks, in front of the shared heap.

Why: with two threads on one heap, every malloc and free of the shared heap takes the heap lock
and writes the free lists, counters and element entries; and the block one thread frees is the
head of its free list, so the other thread's next malloc gets it -- its lines, just cleared by
the first core, then move to the second core when that one writes or clears it.  For small
blocks that traffic is most of the cost (measurements in docs/heap.md).  A cache per lcore
keeps the blocks an lcore freed for that lcore's next mallocs of the same size: no heap lock,
no shared line, and the block's lines are still in that core's cache.  (DPDK's mempools keep
per-lcore caches for the same reason; ``rte_malloc`` has none.)

Layout (``heap.cache``, int32, one row of ``CACHE_ROW`` words per lcore, see
:mod:`.layout`): a header line -- the row's lock word, the number of blocks and grains it
holds -- then one 64-byte line per *bin*: bin ``b`` holds blocks of exactly ``b + 1`` grains,
word 0 the count, words 1.. a stack of their grains (LIFO: the block freed last, whose lines are
the warmest, goes out first).

Besides the bins, a row has one *large slot* (header word ``C_LARGE``): the last freed block
above the bins' bound and up to ``ctl[H_CACHE_LARGE]`` grains.  A malloc of exactly its grain
count takes it; a free of another large block puts the slot's block back into the shared heap
and takes its place.  Large blocks move between cores too when two threads share the heap's
lists (docs/heap.md); one per lcore is enough for a thread that frees and reallocates the same
size, and bounds what an lcore holds.

Rules:

* only blocks of at most ``ctl[H_CACHE_GRAINS]`` grains (0: caches off) -- or, in the large
  slot, ``ctl[H_CACHE_LARGE]`` grains -- requested with the default alignment are cached; a bin keeps at most ``min(CACHE_DEPTH, max(1,
  ctl[H_CACHE_BYTES] // block bytes))`` blocks: a free into a full bin first returns its
  older half to the shared heap, under one acquisition of the heap lock;
* a cached block is **zero** (cleared by the free that cached it, outside any lock) and in state
  ``ELEM_CACHED``: the shared heap counts it as allocated, a second free of it fails its
  claim (-114), and a zmalloc that gets it needs no memset;
* every operation on a row holds the row's lock.  The owning lcore only *tries* it
  (``spin_trylock``, one uncontended compare-and-swap on a line it owns) and uses the shared
  heap when it is held; a flush (:func:`_cache_flush`: on ENOMEM, at thread exit, on close,
  on request) waits for it.  So a flush from another thread is safe, and two threads misusing
  one lcore id lose the cache, not the heap's consistency.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import field_store_release, load_relaxed
from ...spinlock import spin_lock, spin_trylock, spin_unlock
from .elem import _merge_insert
from .layout import (C_BIN0, C_COUNT, C_GRAINS, C_LARGE, C_LOCK, CACHE_BINS, CACHE_DEPTH,
                     CACHE_LINE_I32, CACHE_ROW, CACHE_ROWS, ELEM_BUSY, ELEM_CACHED, GRAIN,
                     H_ALLOC_COUNT, H_ALLOC_GRAINS, H_CACHE_BYTES, H_CACHE_GRAINS, H_CACHE_LARGE,
                     H_FREE_GRAINS)
from .lock import _lock, _unlock


@kernel(inline="always")
def _cacheable(ctl, lcore, s):
    """Whether a block of ``s`` grains goes through ``lcore``'s cache (a bin or the large slot)."""
    return 0 <= lcore < CACHE_ROWS and (s <= ctl[H_CACHE_GRAINS] or s <= ctl[H_CACHE_LARGE])


@kernel(inline="always")
def _bin(lcore, s):
    return np.int64(lcore) * CACHE_ROW + C_BIN0 + (s - 1) * CACHE_LINE_I32


@kernel(inline="always")
def _to_heap(heap, g, s):
    """Cached (zero) block ``g`` of ``s`` grains becomes free in the shared heap.  Heap lock held."""
    ctl = heap.ctl
    _merge_insert(ctl, heap.elems, g)
    ctl[H_ALLOC_COUNT] -= 1
    ctl[H_ALLOC_GRAINS] -= s
    ctl[H_FREE_GRAINS] += s


@kernel(literal=("stats",))
def _cache_get(heap, lcore, s, stats):
    """A cached block of ``s`` grains for ``lcore`` (now BUSY), or -1."""
    c = heap.cache
    r = np.int64(lcore) * CACHE_ROW
    if not spin_trylock(c, r + C_LOCK):
        return np.int64(-1)
    g = np.int64(-1)
    if s > heap.ctl[H_CACHE_GRAINS]:
        v = np.int64(c[r + C_LARGE])
        if v > 0 and np.int64(heap.elems[v - 1].size) == s:
            g = v - 1
            c[r + C_LARGE] = 0
    else:
        b = _bin(lcore, s)
        n = np.int64(c[b])
        if n > 0:
            g = np.int64(c[b + n])
            c[b] = n - 1
    if g >= 0:
        c[r + C_COUNT] -= 1
        c[r + C_GRAINS] -= s
        field_store_release(heap.elems, g, "state", ELEM_BUSY)
    spin_unlock(c, r + C_LOCK)
    return g


@kernel(literal=("stats",))
def _cache_put(heap, lcore, g, s, stats):
    """Keep claimed, zeroed block ``g`` (``s`` grains) in ``lcore``'s cache; False if the row is
    held by someone else (the caller frees it to the shared heap then)."""
    c = heap.cache
    ctl = heap.ctl
    r = np.int64(lcore) * CACHE_ROW
    if not spin_trylock(c, r + C_LOCK):
        return False
    e = heap.elems[g]
    e.dlo = 0
    e.dhi = 0
    if s > ctl[H_CACHE_GRAINS]:
        # the large slot: its previous block goes back to the shared heap
        v = np.int64(c[r + C_LARGE])
        if v > 0:
            vs = np.int64(heap.elems[v - 1].size)
            t = _lock(heap, lcore, stats)
            _to_heap(heap, v - 1, vs)
            _unlock(heap, lcore, stats, t)
            c[r + C_COUNT] -= 1
            c[r + C_GRAINS] -= vs
        field_store_release(heap.elems, g, "state", ELEM_CACHED)
        c[r + C_LARGE] = g + 1
        c[r + C_COUNT] += 1
        c[r + C_GRAINS] += s
        spin_unlock(c, r + C_LOCK)
        return True
    b = _bin(lcore, s)
    n = np.int64(c[b])
    lim = ctl[H_CACHE_BYTES] // (s * GRAIN)
    lim = min(CACHE_DEPTH, max(1, lim))
    if n >= lim:
        # spill the older half (the bottom of the stack) under one acquisition of the heap lock
        k = (n + 1) // 2
        t = _lock(heap, lcore, stats)
        for i in range(k):
            _to_heap(heap, np.int64(c[b + 1 + i]), s)
        _unlock(heap, lcore, stats, t)
        for i in range(n - k):
            c[b + 1 + i] = c[b + 1 + k + i]
        n -= k
        c[r + C_COUNT] -= k
        c[r + C_GRAINS] -= k * s
    field_store_release(heap.elems, g, "state", ELEM_CACHED)
    c[b + 1 + n] = g
    c[b] = n + 1
    c[r + C_COUNT] += 1
    c[r + C_GRAINS] += s
    spin_unlock(c, r + C_LOCK)
    return True


@kernel(literal=("stats",))
def _cache_flush(heap, lcore, stats):
    """Return every block of ``lcore``'s cache to the shared heap (waits for the row's lock);
    the number of blocks returned."""
    c = heap.cache
    r = np.int64(lcore) * CACHE_ROW
    if load_relaxed(c, r + C_COUNT) == 0:
        return np.int64(0)
    spin_lock(c, r + C_LOCK)
    total = np.int64(c[r + C_COUNT])
    if total > 0:
        t = _lock(heap, lcore, stats)
        for bi in range(CACHE_BINS):
            b = r + C_BIN0 + bi * CACHE_LINE_I32
            for i in range(np.int64(c[b])):
                _to_heap(heap, np.int64(c[b + 1 + i]), bi + 1)
            c[b] = 0
        v = np.int64(c[r + C_LARGE])
        if v > 0:
            _to_heap(heap, v - 1, np.int64(heap.elems[v - 1].size))
            c[r + C_LARGE] = 0
        _unlock(heap, lcore, stats, t)
        c[r + C_COUNT] = 0
        c[r + C_GRAINS] = 0
    spin_unlock(c, r + C_LOCK)
    return total


@kernel
def _cache_flush_all(heap):
    """Flush every lcore's cache; the number of blocks returned."""
    total = np.int64(0)
    for lc in range(CACHE_ROWS):
        total += _cache_flush(heap, lc, False)
    return total
