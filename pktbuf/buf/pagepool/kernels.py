"""Page pool kernels: Linux's ``page_pool`` over a page arena.

A pool hands out whole order-0 pages of one :mod:`arena <pktbuf.buf.pagepool.arena>` and takes
them back, recycling them instead of returning them to the allocator whenever it can.

The modules:

* :mod:`.layout` -- the pool's block (:data:`PAGE_POOL`: control words, the alloc cache, the
  recycle ring, the statistics), constants, flags, ``PP_STAT_NAMES``;
* :mod:`.pages` -- a page entering and leaving the pool, the pool's references to a page;
* :mod:`.alloc` -- ``page_pool_alloc_pages``: the cache, its refill from the ring, the slow
  path into the arena;
* :mod:`.recycle` -- ``page_pool_put_page`` and the other ways back: recycle into the cache or
  the ring, or release;
* this module -- accounting, statistics and shutdown, and every public name of the others, so
  ``from pktbuf.buf.pagepool.kernels import ...`` reaches all of them.

In flight: ``page_pool_inflight`` = hold - release (pages that entered the pool from the arena
and have not left it; pages in the cache or ring count).  ``page_pool_destroy`` disables direct
recycling, empties the cache, unmaps every page still out, drains the ring, and returns the
in-flight count; while it is not zero, call ``page_pool_release`` again later (Linux retries
every second) -- late returns land in the ring and the retry drains them.

Deviation from Linux, on purpose: a page sitting in the pool has ``pp_ref == 0`` and a page
handed out has 1 (Linux leaves it at 1 in both), so putting a page twice is caught
(-114, EALREADY) instead of corrupting the cache.

Every kernel returns 0 / a page id / a count on success and a negative errno-style code with
nothing changed on bad input: -9 (EBADF) page id outside the arena or not owned by this pool,
-114 (EALREADY) the page is not handed out, -12 (ENOMEM) the arena is empty, -22 (EINVAL) the
pool is being destroyed.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_relaxed, store_relaxed
from ...errors import E_BADF
from ...rawmem import stack_i32
from ..ring.kernels import ring_sc_dequeue_burst
from .alloc import page_pool_alloc_pages  # noqa: F401
from .arena import A_NPAGES, PG_DMA_MAPPED
from .layout import (P_COUNT, P_DESTROY_CNT, P_DIRECT, P_FLAGS, P_HOLD, P_ID, P_POOL_SIZE,  # noqa: F401
                     P_REFILL, P_RELEASE, P_STATE, PAGE_POOL, PP_ALIVE, PP_ALLOC_CACHE_REFILL,
                     PP_ALLOC_CACHE_SIZE, PP_CTL_WORDS, PP_DETACHED, PP_FLAG_ALL, PP_FLAG_DMA_MAP,
                     PP_FREED, PP_REFILL_BULK, PP_REFILL_SINGLE, PP_RING_DEFAULT, PP_RING_MAX,
                     PP_STAT_CACHE_FULL, PP_STAT_CACHED, PP_STAT_EMPTY, PP_STAT_FAST,
                     PP_STAT_INDEX, PP_STAT_NAMES, PP_STAT_REFILL, PP_STAT_RELEASED_REFCNT,
                     PP_STAT_RING, PP_STAT_RING_FULL, PP_STAT_SLOW, PP_STAT_SLOW_HIGH_ORDER,
                     PP_STAT_WAIVE, PP_STATS_WORDS, XDP_BULK_QUEUE_SIZE)
from .pages import _owned, page_pool_return_page
from .recycle import (page_pool_put_full_page, page_pool_put_page,  # noqa: F401
                      page_pool_put_page_bulk, page_pool_put_unrefed_page,
                      page_pool_recycle_direct, page_pool_ref_page, page_pool_release_page)

__all__ = ["PAGE_POOL", "PP_ALLOC_CACHE_SIZE", "PP_ALLOC_CACHE_REFILL", "PP_STAT_NAMES",
           "PP_FLAG_DMA_MAP", "PP_REFILL_BULK", "PP_REFILL_SINGLE",
           "page_pool_alloc_pages", "page_pool_put_page", "page_pool_put_full_page",
           "page_pool_recycle_direct", "page_pool_put_page_bulk", "page_pool_release_page",
           "page_pool_ref_page", "page_pool_get_stats", "page_pool_inflight",
           "page_pool_destroy", "page_pool_release", "page_pool_get_dma_addr"]

_M32 = 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# accounting, statistics, shutdown

@kernel
def page_pool_inflight(pool):
    """hold - release as a signed 32-bit distance (wrap-safe): pages that entered the pool from
    the arena and have not left it, wherever they are (user, cache, ring)."""
    d = (load_relaxed(pool.ctl, P_HOLD) - load_relaxed(pool.ctl, P_RELEASE)) & _M32
    if d >= 0x80000000:
        d -= 0x100000000
    return d


@kernel
def page_pool_get_stats(pool, out):
    """Copy the eleven counters, in :data:`PP_STAT_NAMES` order, into ``out[:11]``."""
    for i in range(len(PP_STAT_INDEX)):
        out[i] = load_relaxed(pool.stats, PP_STAT_INDEX[i])
    return 0


@kernel
def page_pool_get_dma_addr(pool, arena, p):
    """The DMA address (iova) ``p`` was mapped at, or -9 if it is not a mapped page of this pool."""
    if _owned(pool, arena, p) < 0 or (arena.pages[p].flags & PG_DMA_MAPPED) == 0:
        return np.int64(E_BADF)
    return arena.pages[p].dma_addr


@kernel
def _scrub(pool, arena):
    """First release: empty the cache and unmap every page of the pool still out."""
    c = pool.ctl[P_COUNT]
    pool.ctl[P_COUNT] = 0
    for i in range(c):
        page_pool_return_page(pool, arena, pool.cache[i])
    if (pool.ctl[P_FLAGS] & PP_FLAG_DMA_MAP) != 0:
        pid = pool.ctl[P_ID]
        pg = arena.pages
        for p in range(arena.ctl[A_NPAGES]):
            if pg[p].pp == pid and (pg[p].flags & PG_DMA_MAPPED) != 0:
                pg[p].flags &= ~PG_DMA_MAPPED
                pg[p].dma_addr = 0


@kernel
def page_pool_release(pool, arena):
    """One shutdown attempt: drain the ring and return the in-flight count (0 = pool freed).

    Call after ``page_pool_destroy`` while the result is positive; a negative result means more
    pages came back than went out (a caller bug, as Linux's WARN).
    """
    if pool.ctl[P_STATE] == PP_FREED:
        return np.int64(0)
    if pool.ctl[P_DESTROY_CNT] == 0:
        _scrub(pool, arena)
    pool.ctl[P_DESTROY_CNT] += 1
    buf = stack_i32(PP_ALLOC_CACHE_REFILL)
    while True:
        got = ring_sc_dequeue_burst(pool.ring_hdr, pool.ring_slots, buf, PP_ALLOC_CACHE_REFILL)
        if got == 0:
            break
        for i in range(got):
            page_pool_return_page(pool, arena, buf[i])
    inflight = page_pool_inflight(pool)
    if inflight == 0:
        store_relaxed(pool.ctl, P_STATE, PP_FREED)
    return inflight


@kernel
def page_pool_destroy(pool, arena):
    """Stop the pool: no more direct recycling or allocation, then a first
    ``page_pool_release``.  Returns the in-flight count; retry ``page_pool_release`` while > 0."""
    if pool.ctl[P_STATE] == PP_ALIVE:
        store_relaxed(pool.ctl, P_DIRECT, 0)
        store_relaxed(pool.ctl, P_STATE, PP_DETACHED)
    return page_pool_release(pool, arena)
