"""Page pool kernels: Linux's ``page_pool`` over a page arena.

A pool hands out whole order-0 pages of one :mod:`arena <pktbuf.pagepool.arena>` and takes
them back, recycling them instead of returning them to the allocator whenever it can.  Its state
(:data:`PAGE_POOL`) is a block of five arrays:

* ``ctl`` -- ``int64[PP_CTL_WORDS]``: line 0 is the alloc side (``alloc.count`` and
  ``pages_state_hold_cnt``, touched by the pool's own context only), line 1 the description,
  line 2 ``pages_state_release_cnt`` (atomic: pages leave the pool from any thread).
* ``cache`` -- ``int32[PP_ALLOC_CACHE_SIZE]``: the alloc cache, a LIFO of 128 pages.  Lock-free,
  hence only the pool's own context (one RX queue / NAPI instance in Linux, one thread here) may
  allocate or recycle *directly*.
* ``ring_hdr``/``ring_slots`` -- the recycle ring (Linux's ``ptr_ring``): a
  :mod:`pktbuf.ring` ring, multi-producer (pages come back from any thread) and
  single-consumer (only the alloc side refills from it).  Linux serialises producers with a
  spin lock; the core ring reserves slots with one compare-and-swap per call instead, which
  is the same "one synchronisation per batch" that the bulk put relies on.
* ``stats`` -- ``int64[PP_STATS_WORDS]``: the eleven counters of ``CONFIG_PAGE_POOL_STATS``
  with Linux's names and meanings (see :data:`PP_STAT_NAMES`); the alloc ones on one cache
  line (plain adds, one context), the recycle ones on another (atomic adds where any thread
  can reach them -- Linux keeps those per CPU instead).

Allocation (``page_pool_alloc_pages``): pop the cache (``fast``); if it is empty, refill up to 64
pages from the ring in one burst (``refill``; an empty ring counts ``empty``); if the ring is
empty too, the slow path asks the arena for pages (``slow``).  The slow path has two strategies,
selected per pool for the A/B benchmark:

* ``PP_REFILL_BULK`` (the default, Linux since 2021): one ``alloc_pages_bulk`` call for 64 pages
  straight into the empty cache, then pop one -- the arena lock is taken once per 64 pages;
* ``PP_REFILL_SINGLE`` (Linux before 2021): one ``alloc_page`` call that returns the page
  directly -- the arena lock is taken for every page.

Freeing (``page_pool_put_page``): drop the pool reference; the last one decides.  A page whose
page reference count is 1 (the pool is its only owner) is recyclable: into the cache if the
caller allows direct recycling and the cache has room (``cached``, else ``cache_full``), else
into the ring (``ring``, or ``ring_full`` and released).  A page somebody else still holds
(``get_page``) is released (``released_refcnt``).  Releasing unmaps the page, bumps
``pages_state_release_cnt`` and drops the pool's page reference (``put_page``), so the page goes
back to the arena once every holder has dropped theirs.

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

from .._jit import kernel
from ..block import Layout
from ..atomics import fetch_add, field_cas, field_load_acquire, load_relaxed, store_relaxed
from ..errors import E_ALREADY, E_BADF, E_BUSY, E_INVAL, E_NOMEM
from ..rawmem import stack_i32
from ..ring.kernels import (RING_HDR_WORDS, ring_count, ring_mp_enqueue_burst,
                            ring_sc_dequeue_burst)
from .arena import (A_NPAGES, A_PAGE_SHIFT, PG_DMA_MAPPED, PG_STAGED, alloc_page,
                    alloc_pages_bulk, put_page)

__all__ = ["PAGE_POOL", "PP_ALLOC_CACHE_SIZE", "PP_ALLOC_CACHE_REFILL", "PP_STAT_NAMES",
           "PP_FLAG_DMA_MAP", "PP_REFILL_BULK", "PP_REFILL_SINGLE",
           "page_pool_alloc_pages", "page_pool_put_page", "page_pool_put_full_page",
           "page_pool_recycle_direct", "page_pool_put_page_bulk", "page_pool_release_page",
           "page_pool_ref_page", "page_pool_get_stats", "page_pool_inflight",
           "page_pool_destroy", "page_pool_release", "page_pool_get_dma_addr"]

PP_ALLOC_CACHE_SIZE = 128     # alloc cache entries
PP_ALLOC_CACHE_REFILL = 64    # refill unit = NAPI budget
XDP_BULK_QUEUE_SIZE = 16      # on-stack staging of the bulk put
PP_RING_DEFAULT = 1024        # ring size when pool_size is not given
PP_RING_MAX = 16384

# creation flags (values as Linux's)
PP_FLAG_DMA_MAP = 0x1         # map a page when it enters the pool, unmap when it leaves
PP_FLAG_ALL = PP_FLAG_DMA_MAP

# slow-path strategies
PP_REFILL_BULK = 0
PP_REFILL_SINGLE = 1

# pool life cycle
PP_ALIVE = 1
PP_DETACHED = 2     # destroyed, pages still in flight: release() again later
PP_FREED = 3        # nothing in flight; the pool is gone

# ctl words
P_COUNT = 0         # alloc.count
P_HOLD = 1          # pages_state_hold_cnt
P_DESTROY_CNT = 2
P_ID = 8
P_FLAGS = 9
P_REFILL = 10
P_STATE = 11
P_DIRECT = 12       # direct recycling allowed (cleared by destroy, as cpuid = -1 / napi = NULL)
P_POOL_SIZE = 13
P_RELEASE = 16      # pages_state_release_cnt
PP_CTL_WORDS = 24

# statistics (index into stats); names are Linux's struct page_pool_stats fields
PP_STAT_FAST = 0
PP_STAT_SLOW = 1
PP_STAT_SLOW_HIGH_ORDER = 2
PP_STAT_EMPTY = 3
PP_STAT_REFILL = 4
PP_STAT_WAIVE = 5
PP_STAT_CACHED = 8
PP_STAT_CACHE_FULL = 9
PP_STAT_RING = 10
PP_STAT_RING_FULL = 11
PP_STAT_RELEASED_REFCNT = 12
PP_STATS_WORDS = 16
PP_STAT_NAMES = ("fast", "slow", "slow_high_order", "empty", "refill", "waive",
                 "cached", "cache_full", "ring", "ring_full", "released_refcnt")
PP_STAT_INDEX = (PP_STAT_FAST, PP_STAT_SLOW, PP_STAT_SLOW_HIGH_ORDER, PP_STAT_EMPTY, PP_STAT_REFILL, PP_STAT_WAIVE,
                 PP_STAT_CACHED, PP_STAT_CACHE_FULL, PP_STAT_RING, PP_STAT_RING_FULL, PP_STAT_RELEASED_REFCNT)

_M32 = 0xFFFFFFFF

PAGE_POOL = Layout("page_pool", [
    ("ctl", np.int64, PP_CTL_WORDS),
    ("cache", np.int32, PP_ALLOC_CACHE_SIZE),
    ("ring_hdr", np.uint32, RING_HDR_WORDS),
    ("ring_slots", np.int32, None),     # the recycle ring: a power of two >= its size
    ("stats", np.int64, PP_STATS_WORDS),
])
"""A page pool's block: take it from ``pool.state`` and pass it, with the arena's block, to the
kernels."""


# ---------------------------------------------------------------------------------------------
# pages entering and leaving the pool

@kernel(inline="always")
def _enter_pool(pool, arena, p):
    """A fresh page from the arena becomes the pool's (``page_pool_set_pp_info`` + DMA map)."""
    pg = arena.pages[p]
    pg.pp = pool.ctl[P_ID]
    if (pool.ctl[P_FLAGS] & PP_FLAG_DMA_MAP) != 0:
        pg.dma_addr = np.int64(p) << arena.ctl[A_PAGE_SHIFT]
        pg.flags |= PG_DMA_MAPPED


@kernel(inline="always")
def _leave_pool(pool, arena, p):
    """The pool forgets ``p``: unmap it and count the release (its page reference stays)."""
    pg = arena.pages[p]
    pg.flags &= ~PG_DMA_MAPPED
    pg.dma_addr = 0
    pg.pp = -1
    pg.pp_ref = 0
    fetch_add(pool.ctl, P_RELEASE, 1)


@kernel
def page_pool_return_page(pool, arena, p):
    """The page leaves the pool for good: unmap, count the release, drop the pool's reference.

    The release count is bumped before the page reference is dropped: after that the page (and,
    for the last page of a destroyed pool, the pool) must not be touched.
    """
    _leave_pool(pool, arena, p)
    put_page(arena, p)


@kernel(inline="always")
def _owned(pool, arena, p):
    """0 if ``p`` is a page of this pool, else -9 (EBADF)."""
    if p < 0 or p >= arena.ctl[A_NPAGES]:
        return E_BADF
    if arena.pages[p].pp != pool.ctl[P_ID]:
        return E_BADF
    return 0


@kernel(inline="always")
def _pp_unref(pages, p):
    """Drop one pool reference; returns what is left (0 = we were the last) or -114."""
    while True:
        r = np.int64(field_load_acquire(pages, p, "pp_ref"))
        if r <= 0:
            return np.int64(E_ALREADY)
        if r == 1:
            # sole user: nobody else may touch it, but a racing double put must lose
            if np.int64(field_cas(pages, p, "pp_ref", 1, 0)) == 1:
                return np.int64(0)
        elif np.int64(field_cas(pages, p, "pp_ref", r, r - 1)) == r:
            return r - 1


# ---------------------------------------------------------------------------------------------
# allocation

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


# ---------------------------------------------------------------------------------------------
# freeing

@kernel
def _ring_put(pool, arena, objs, k):
    """Produce ``objs[:k]`` into the ring in one reservation; release what does not fit
    (after the ring is published, as Linux releases outside the producer lock)."""
    got = ring_mp_enqueue_burst(pool.ring_hdr, pool.ring_slots, objs, k)
    if got > 0:
        fetch_add(pool.stats, PP_STAT_RING, got)
    if got < k:
        fetch_add(pool.stats, PP_STAT_RING_FULL, 1)
        for i in range(got, k):
            page_pool_return_page(pool, arena, objs[i])


@kernel(inline="always")
def _recycle_direct_ok(pool, allow_direct):
    return allow_direct and pool.ctl[P_DIRECT] != 0


@kernel(inline="always")
def _recycle_in_cache(pool, p):
    """Direct recycling: push ``p`` on the cache if it has room (``cached``/``cache_full``)."""
    c = pool.ctl[P_COUNT]
    if c < PP_ALLOC_CACHE_SIZE:
        pool.cache[c] = p
        pool.ctl[P_COUNT] = c + 1
        pool.stats[PP_STAT_CACHED] += 1
        return True
    pool.stats[PP_STAT_CACHE_FULL] += 1
    return False


@kernel
def page_pool_put_unrefed_page(pool, arena, p, allow_direct):
    """The last pool reference of ``p`` is gone: recycle (cache, else ring) or release."""
    if np.int64(field_load_acquire(arena.pages, p, "refcount")) != 1:
        fetch_add(pool.stats, PP_STAT_RELEASED_REFCNT, 1)
        page_pool_return_page(pool, arena, p)
        return
    if _recycle_direct_ok(pool, allow_direct) and _recycle_in_cache(pool, p):
        return
    one = stack_i32(1)
    one[0] = p
    _ring_put(pool, arena, one, 1)


@kernel(inline="always")
def page_pool_put_page(pool, arena, p, allow_direct):
    """Return page ``p`` (drop one pool reference; the last recycles or releases it).

    ``allow_direct`` may be True only in the pool's own context (Linux: NAPI / softirq of the
    pool's queue).  Returns 0, -9 (EBADF) if ``p`` is not a page of this pool, -114 (EALREADY)
    if it is not handed out.  Direct recycling into a cache with room is inlined into the
    caller; the ring and release paths are a call.
    """
    rc = _owned(pool, arena, p)
    if rc < 0:
        return rc
    r = _pp_unref(arena.pages, p)
    if r < 0:
        return r
    if r == 0:
        c = pool.ctl[P_COUNT]
        if allow_direct and c < PP_ALLOC_CACHE_SIZE and pool.ctl[P_DIRECT] != 0 \
                and np.int64(field_load_acquire(arena.pages, p, "refcount")) == 1:
            pool.cache[c] = p
            pool.ctl[P_COUNT] = c + 1
            pool.stats[PP_STAT_CACHED] += 1
        else:
            page_pool_put_unrefed_page(pool, arena, p, allow_direct)
    return 0


@kernel
def page_pool_put_full_page(pool, arena, p, allow_direct):
    """``page_pool_put_page`` for a page whose whole length may have been written (Linux syncs
    ``max_len`` for the device; there is no device here, so it is the same call)."""
    return page_pool_put_page(pool, arena, p, allow_direct)


@kernel
def page_pool_recycle_direct(pool, arena, p):
    """Return ``p`` from the pool's own context, into the cache if it has room."""
    return page_pool_put_page(pool, arena, p, True)


@kernel
def _bulk_dry_run(pool, arena, pages, n):
    """0 if every entry is a handed-out page of this pool listed at most as often as it has
    pool references, else -9 / -114.  Changes nothing (the marks it uses are cleared)."""
    for i in range(n):
        rc = _owned(pool, arena, pages[i])
        if rc < 0:
            return rc
    pg = arena.pages
    rc = 0
    done = 0
    for i in range(n):
        p = pages[i]
        r = np.int64(field_load_acquire(pg, p, "pp_ref"))
        if r <= 0:
            rc = E_ALREADY
            break
        if r == 1:              # the common case: a mark catches a repeat in O(1)
            if (pg[p].flags & PG_STAGED) != 0:
                rc = E_ALREADY
                break
            pg[p].flags |= PG_STAGED
        else:                   # fragments: count the repeats
            cnt = 0
            for j in range(n):
                if pages[j] == p:
                    cnt += 1
            if cnt > r:
                rc = E_ALREADY
                break
        done = i + 1
    for i in range(done):
        pg[pages[i]].flags &= ~PG_STAGED
    return rc


@kernel
def page_pool_put_page_bulk(pool, arena, pages, n, allow_direct):
    """Return ``pages[:n]`` (one pool reference each; a page may appear as often as it has
    references).  All or nothing: -9 (EBADF) if any entry is not a page of this pool, -114
    (EALREADY) if some page would lose more references than it has; then nothing changed.

    Pass 1 drops the references; the pages whose last reference went are compacted to the
    front of ``pages`` (the array is overwritten, as Linux's).  Those go to the cache if direct
    recycling is allowed and it has room; the rest are staged 16 at a time and produced into
    the ring with one reservation per batch, overflow released after it.
    """
    pg = arena.pages
    rc = _bulk_dry_run(pool, arena, pages, n)
    if rc < 0:
        return rc
    m = 0
    for i in range(n):          # pass 1: drop references, keep the last ones (in place)
        p = pages[i]
        if _pp_unref(pg, p) == 0:
            pages[m] = p
            m += 1
    stage = stack_i32(XDP_BULK_QUEUE_SIZE)
    k = 0
    direct = _recycle_direct_ok(pool, allow_direct)
    for i in range(m):
        p = pages[i]
        if np.int64(field_load_acquire(pg, p, "refcount")) != 1:
            fetch_add(pool.stats, PP_STAT_RELEASED_REFCNT, 1)
            page_pool_return_page(pool, arena, p)
            continue
        if direct and _recycle_in_cache(pool, p):
            continue
        stage[k] = p
        k += 1
        if k == XDP_BULK_QUEUE_SIZE:
            _ring_put(pool, arena, stage, k)
            k = 0
    if k > 0:
        _ring_put(pool, arena, stage, k)
    return 0


@kernel
def page_pool_release_page(pool, arena, p):
    """Take handed-out page ``p`` out of the pool without recycling it: the pool forgets it
    (unmapped, counted as released) and the caller keeps it with its page reference, to drop
    with ``put_page`` when done -- Linux's ``page_pool_release_page`` (4.18 to 6.5), used when
    an XDP frame becomes an skb.  Returns 0, -9 (EBADF), -114 (EALREADY, not handed out) or
    -16 (EBUSY, other pool references -- fragments -- are still out)."""
    rc = _owned(pool, arena, p)
    if rc < 0:
        return rc
    r = np.int64(field_cas(arena.pages, p, "pp_ref", 1, 0))
    if r != 1:
        return E_ALREADY if r <= 0 else E_BUSY
    _leave_pool(pool, arena, p)
    return 0


@kernel
def page_pool_ref_page(pool, arena, p):
    """Take one more pool reference on a handed-out page (fragment users); returns the count."""
    rc = _owned(pool, arena, p)
    if rc < 0:
        return rc
    pg = arena.pages
    while True:
        r = np.int64(field_load_acquire(pg, p, "pp_ref"))
        if r <= 0:
            return np.int64(E_ALREADY)
        if np.int64(field_cas(pg, p, "pp_ref", r, r + 1)) == r:
            return r + 1


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
