"""Returning pages to a page pool: put (recycle or release), bulk put, release, fragments.

Freeing (``page_pool_put_page``): drop the pool reference; the last one decides.  A page whose
page reference count is 1 (the pool is its only owner) is recyclable: into the cache if the
caller allows direct recycling and the cache has room (``cached``, else ``cache_full``), else
into the ring (``ring``, or ``ring_full`` and released).  A page somebody else still holds
(``get_page``) is released (``released_refcnt``).  Releasing unmaps the page, bumps
``pages_state_release_cnt`` and drops the pool's page reference (``put_page``), so the page goes
back to the arena once every holder has dropped theirs.

``page_pool_put_page_bulk`` is all or nothing and produces into the ring once per batch of
16; ``page_pool_release_page`` takes a page out of the pool for good; ``page_pool_ref_page``
takes one more pool reference (fragments).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import fetch_add, field_cas, field_load_acquire
from ...errors import E_ALREADY, E_BUSY
from ...rawmem import stack_i32
from ..ring.kernels import ring_mp_enqueue_burst
from .arena import PG_STAGED
from .layout import (P_COUNT, P_DIRECT, PP_ALLOC_CACHE_SIZE, PP_STAT_CACHE_FULL, PP_STAT_CACHED,
                     PP_STAT_RELEASED_REFCNT, PP_STAT_RING, PP_STAT_RING_FULL, XDP_BULK_QUEUE_SIZE)
from .pages import _leave_pool, _owned, _pp_unref, page_pool_return_page

__all__ = ["page_pool_put_page", "page_pool_put_full_page", "page_pool_recycle_direct",
           "page_pool_put_page_bulk", "page_pool_release_page", "page_pool_ref_page",
           "page_pool_put_unrefed_page"]


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
