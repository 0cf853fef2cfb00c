"""Page pool allocation: the alloc cache, its refill from the recycle ring, the slow path.

Allocation (``page_pool_alloc_pages``): pop the cache (``fast``); if it is empty, refill up to 64
pages from the ring in one burst (``refill``; an empty ring counts ``empty``); if the ring is
empty too, the slow path asks the arena for pages (``slow``).  The slow path has two strategies,
selected per pool for the A/B benchmark:

* ``PP_REFILL_BULK`` (the default, Linux since 2021): one ``alloc_pages_bulk`` call for 64 pages
  straight into the empty cache, then pop one -- the arena lock is taken once per 64 pages;
* ``PP_REFILL_SINGLE`` (Linux before 2021): one ``alloc_page`` call that returns the page
  directly -- the arena lock is taken for every page.

Only the pool's own context may allocate (the cache is lock-free).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_INVAL, E_NOMEM
from ..ring.kernels import ring_count, ring_sc_dequeue_burst
from .arena import alloc_page, alloc_pages_bulk
from .layout import (P_COUNT, P_HOLD, P_REFILL, P_STATE, PP_ALIVE, PP_ALLOC_CACHE_REFILL,
                     PP_REFILL_BULK, PP_STAT_EMPTY, PP_STAT_FAST, PP_STAT_REFILL, PP_STAT_SLOW)
from .pages import _enter_pool

__all__ = ["page_pool_alloc_pages"]


@kernel
def _refill_alloc_cache(pool):
    """Cache empty: take up to 64 pages from the ring in one burst.  Returns a page or -1."""
    hdr = pool.ring_hdr
    if ring_count(hdr) == 0:
        pool.stats[PP_STAT_EMPTY] += 1
        return np.int64(-1)
    got = ring_sc_dequeue_burst(hdr, pool.ring_slots, pool.cache, PP_ALLOC_CACHE_REFILL)
    if got == 0:   # a producer reserved but has not published yet
        pool.stats[PP_STAT_EMPTY] += 1
        return np.int64(-1)
    got -= 1
    pool.ctl[P_COUNT] = got
    pool.stats[PP_STAT_REFILL] += 1
    return np.int64(pool.cache[got])


@kernel
def _alloc_slow_bulk(pool, arena):
    """Slow path, 2021: 64 pages in one arena call into the empty cache, hand out the last."""
    cache = pool.cache
    for i in range(PP_ALLOC_CACHE_REFILL):
        cache[i] = -1
    got = alloc_pages_bulk(arena, cache, PP_ALLOC_CACHE_REFILL)
    if got == 0:
        return np.int64(E_NOMEM)
    cnt = 0
    for i in range(PP_ALLOC_CACHE_REFILL):
        p = cache[i]
        if p < 0:
            continue
        _enter_pool(pool, arena, p)
        cache[cnt] = p
        cnt += 1
    pool.ctl[P_HOLD] += cnt
    pool.stats[PP_STAT_SLOW] += 1
    cnt -= 1
    pool.ctl[P_COUNT] = cnt
    return np.int64(cache[cnt])


@kernel
def _alloc_slow_single(pool, arena):
    """Slow path before 2021: one page per arena call, returned directly."""
    p = alloc_page(arena)
    if p < 0:
        return np.int64(E_NOMEM)
    _enter_pool(pool, arena, p)
    pool.ctl[P_HOLD] += 1
    pool.stats[PP_STAT_SLOW] += 1
    return p


@kernel
def _alloc_pages_slow(pool, arena):
    """Cache empty: refill from the ring, else the slow path.  A page or a negative code."""
    ctl = pool.ctl
    if ctl[P_STATE] != PP_ALIVE:
        return np.int64(E_INVAL)
    p = _refill_alloc_cache(pool)
    if p < 0:
        if ctl[P_REFILL] == PP_REFILL_BULK:
            p = _alloc_slow_bulk(pool, arena)
        else:
            p = _alloc_slow_single(pool, arena)
        if p < 0:
            return p
    arena.pages[p].pp_ref = 1
    return p


@kernel(inline="always")
def page_pool_alloc_pages(pool, arena):
    """One page from the pool: its id (the caller holds one pool reference), or -12 (ENOMEM)
    when the cache, the ring and the arena are all empty, or -22 (EINVAL) after destroy.

    Only the pool's own context may call this (the cache is lock-free).  Linux's
    ``page_pool_alloc_pages`` / ``page_pool_dev_alloc_pages``.  The fast path is inlined into
    the caller (a handful of loads and stores); the rest is a call.
    """
    ctl = pool.ctl
    c = ctl[P_COUNT]
    if c > 0:                      # fast path: the hottest page of the cache
        c -= 1
        ctl[P_COUNT] = c
        p = np.int64(pool.cache[c])
        pool.stats[PP_STAT_FAST] += 1
        arena.pages[p].pp_ref = 1
        return p
    return _alloc_pages_slow(pool, arena)
