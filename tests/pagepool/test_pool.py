"""Page pool paths, statistics, recycle/release accounting, bulk put, destroy."""
from __future__ import annotations

import numpy as np
import pytest

from pktbuf import Busy, DoubleFree, InvalidArgument, InvalidHandle, OutOfMemory, PktbufError
from pktbuf.buf.pagepool.api import PP_FLAG_DMA_MAP, PageArena, PagePool
from pktbuf.buf.pagepool import kernels as K

from .conftest import assert_same, audit, cache_contents, free_pages, ring_contents, snapshot


def stats(pool, **nonzero):
    want = dict.fromkeys(K.PP_STAT_NAMES, 0)
    want.update(nonzero)
    return want


# ---------------------------------------------------------------------------------------------
# allocation paths

def test_first_alloc_bulk_refills_64_and_returns_the_last(arena):
    pool = PagePool(arena)
    p = pool.alloc_page()
    assert p == 63
    assert pool.get_stats() == stats(pool, slow=1, empty=1)
    assert pool.cache_count == 63 and cache_contents(pool) == list(range(63))
    assert pool.hold_cnt == 64 and pool.inflight == 64
    assert arena.stats()["bulk_calls"] == 1 and arena.stats()["alloc_calls"] == 0
    rest = [pool.alloc_page() for _ in range(63)]
    assert rest == list(range(62, -1, -1))              # LIFO
    assert pool.get_stats() == stats(pool, slow=1, empty=1, fast=63)
    assert pool.alloc_page() == 127                     # next bulk
    assert pool.get_stats() == stats(pool, slow=2, empty=2, fast=63)
    audit(arena, [pool], {q: pool.id for q in rest + [p, 127]})


def test_single_refill_takes_one_page_per_arena_call(arena):
    pool = PagePool(arena, refill="single")
    got = [pool.alloc_page() for _ in range(5)]
    assert got == [0, 1, 2, 3, 4]
    assert pool.cache_count == 0
    assert pool.get_stats() == stats(pool, slow=5, empty=5)
    assert arena.stats()["alloc_calls"] == 5 and arena.stats()["bulk_calls"] == 0
    assert pool.inflight == 5
    audit(arena, [pool], dict.fromkeys(got, pool.id))


def test_bulk_refill_partial_when_arena_runs_low():
    ar = PageArena(10)
    pool = PagePool(ar)
    got = [pool.alloc_page() for _ in range(10)]
    assert sorted(got) == list(range(10))
    assert pool.get_stats() == stats(pool, slow=1, empty=1, fast=9)
    before = snapshot(ar, pool)
    with pytest.raises(OutOfMemory):
        pool.alloc_page()
    after = snapshot(ar, pool)
    # the failed attempt is counted (empty ring, arena failure) and nothing else moved
    assert pool.get_stats() == stats(pool, slow=1, empty=2, fast=9)
    assert ar.stats()["fail"] == 1
    diff = [i for i, (a, b) in enumerate(zip(before, after)) if not np.array_equal(a, b)]
    # arena ctl (fail counter), pool stats, and the cache slots above count (scratch: the
    # slow path clears 64 of them for the bulk call, as Linux does)
    assert diff == [0, 4, 7]
    assert pool.cache_count == 0


def test_refill_from_ring_takes_up_to_64(arena):
    pool = PagePool(arena)
    pages = [pool.alloc_page() for _ in range(100)]     # 2 bulk refills, cache has 28
    for p in pages:
        pool.put_page(p)                                # not direct: into the ring
    assert pool.get_stats()["ring"] == 100
    assert ring_contents(pool) == pages
    for _ in range(28):
        pool.alloc_page()                               # drain the cache
    assert pool.cache_count == 0
    q = pool.alloc_page()
    st = pool.get_stats()
    assert st["refill"] == 1 and st["slow"] == 2
    assert q == pages[63] and pool.cache_count == 63   # 64 moved, the last handed out
    assert ring_contents(pool) == pages[64:]
    assert pool.inflight == 128


# ---------------------------------------------------------------------------------------------
# freeing: direct, ring, release

def test_direct_recycling_until_the_cache_is_full(arena):
    pool = PagePool(arena)
    pages = [pool.alloc_page() for _ in range(192)]     # 3 refills; cache holds 0 now
    assert pool.cache_count == 0
    for p in pages[:128]:
        pool.recycle_direct(p)
    assert pool.cache_count == 128
    pool.recycle_direct(pages[128])                     # full: falls through to the ring
    st = pool.get_stats()
    assert st["cached"] == 128 and st["cache_full"] == 1 and st["ring"] == 1
    assert ring_contents(pool) == [pages[128]]
    audit(arena, [pool], dict.fromkeys(pages[129:], pool.id))


def test_ring_full_releases_to_the_arena():
    ar = PageArena(64)
    pool = PagePool(ar, pool_size=4)
    pages = [pool.alloc_page() for _ in range(6)]
    free0 = ar.free_count
    for p in pages:
        pool.put_page(p)
    st = pool.get_stats()
    assert st["ring"] == 4 and st["ring_full"] == 2
    assert ring_contents(pool) == pages[:4]
    assert ar.free_count == free0 + 2
    assert set(free_pages(ar)[-2:]) == set(pages[4:])
    assert pool.release_cnt == 2 and pool.inflight == 64 - 2
    audit(ar, [pool], {})


def test_elevated_page_refcount_is_released_not_recycled(arena):
    pool = PagePool(arena)
    p = pool.alloc_page()
    arena.get_page(p)                        # e.g. an skb frag still holds the page
    pool.put_page(p, allow_direct=True)
    assert pool.get_stats()["released_refcnt"] == 1
    assert pool.get_stats()["cached"] == 0 and pool.ring_count == 0
    assert pool.inflight == 63                # left the pool ...
    assert arena.ref_count(p) == 1            # ... but the other holder still has it
    audit(arena, [pool], {}, extra={p})
    assert arena.put_page(p) is True
    audit(arena, [pool], {})


def test_release_page_keeps_the_callers_reference(arena):
    pool = PagePool(arena, flags=PP_FLAG_DMA_MAP)
    p = pool.alloc_page()
    assert pool.dma_addr(p) == p * 4096
    pool.release_page(p)
    assert pool.inflight == 63 and arena.ref_count(p) == 1
    with pytest.raises(InvalidHandle):
        pool.dma_addr(p)
    with pytest.raises(InvalidHandle):        # the pool does not know it any more
        pool.put_page(p)
    audit(arena, [pool], {}, extra={p})
    assert arena.put_page(p) is True


def test_fragment_references(arena):
    pool = PagePool(arena)
    p = pool.alloc_page()
    assert pool.ref_page(p) == 2
    with pytest.raises(Busy):
        pool.release_page(p)
    pool.put_page(p)                          # one fragment done: nothing recycled yet
    assert pool.ring_count == 0 and arena.state.pages[p]["pp_ref"] == 1
    pool.put_page(p)                          # the last one recycles
    assert ring_contents(pool) == [p]
    with pytest.raises(DoubleFree):
        pool.put_page(p)


# ---------------------------------------------------------------------------------------------
# bulk put

def test_put_page_bulk_goes_to_the_ring_in_batches_of_16():
    ar = PageArena(256)
    pool = PagePool(ar, pool_size=20)
    pages = [pool.alloc_page() for _ in range(40)]
    pool.put_page_bulk(pages)
    st = pool.get_stats()
    # batch 1: 16 fit; batch 2: 4 fit, 12 released (one ring_full); batch 3: 8 released
    assert st["ring"] == 20 and st["ring_full"] == 2
    assert ring_contents(pool) == pages[:20]
    assert pool.release_cnt == 20
    audit(ar, [pool], {})


def test_put_page_bulk_direct_fills_the_cache(arena):
    pool = PagePool(arena)
    pages = [pool.alloc_page() for _ in range(64)]
    pool.put_page_bulk(pages, allow_direct=True)
    assert pool.get_stats()["cached"] == 64
    assert cache_contents(pool) == pages
    audit(arena, [pool], {})


def test_put_page_bulk_counts_references(arena):
    pool = PagePool(arena)
    a, b, c = (pool.alloc_page() for _ in range(3))
    pool.ref_page(b)
    pool.put_page_bulk([a, b, b, c])          # b listed twice, holds two references
    assert sorted(ring_contents(pool)) == sorted([a, b, c])
    assert pool.get_stats()["ring"] == 3


def test_put_page_bulk_bad_entries_change_nothing(arena):
    pool = PagePool(arena)
    other = PagePool(arena)
    pages = [pool.alloc_page() for _ in range(5)]
    foreign = other.alloc_page()
    arena_page = arena.alloc_page()
    user = {p: pool.id for p in pages}
    user[foreign] = other.id
    for bad, exc in (([pages[0], foreign], InvalidHandle),
                     ([pages[0], arena_page], InvalidHandle),
                     ([pages[0], 10_000], InvalidHandle),
                     ([pages[0], -3], InvalidHandle),
                     ([pages[1], pages[2], pages[1]], DoubleFree)):
        before = snapshot(arena, pool, other)
        with pytest.raises(exc):
            pool.put_page_bulk(bad)
        assert_same(before, snapshot(arena, pool, other))
    pool.put_page(pages[4])
    before = snapshot(arena, pool, other)
    with pytest.raises(DoubleFree):
        pool.put_page_bulk([pages[0], pages[4]])
    assert_same(before, snapshot(arena, pool, other))
    del user[pages[4]]
    audit(arena, [pool, other], user, extra={arena_page})


def test_single_put_bad_input_changes_nothing(arena):
    pool = PagePool(arena)
    other = PagePool(arena)
    p = pool.alloc_page()
    q = other.alloc_page()
    pool.put_page(p)
    for bad, exc in ((p, DoubleFree), (q, InvalidHandle), (arena.n_pages, InvalidHandle),
                     (-1, InvalidHandle), (1 << 40, InvalidHandle)):
        before = snapshot(arena, pool, other)
        with pytest.raises(exc):
            pool.put_page(bad)
        with pytest.raises(exc):
            pool.release_page(bad)
        assert_same(before, snapshot(arena, pool, other))
    with pytest.raises(InvalidHandle):
        pool.put_page("3")


# ---------------------------------------------------------------------------------------------
# destroy

def test_destroy_with_pages_in_flight_and_late_returns(arena):
    pool = PagePool(arena, flags=PP_FLAG_DMA_MAP)
    out = [pool.alloc_page() for _ in range(70)]        # cache: 58, out: 70
    pool.put_page(out[0])                               # one in the ring
    assert pool.inflight == 128
    assert pool.destroy() == 69                         # cache and ring returned
    assert pool.destroyed and not pool.freed
    assert pool.cache_count == 0 and pool.ring_count == 0
    assert arena.free_count == arena.n_pages - 69
    for p in out[1:]:                                   # in-flight pages lost their mapping
        assert not arena.state.pages[p]["flags"] & 0x2
    with pytest.raises(InvalidArgument):
        pool.alloc_page()
    pool.put_page(out[1], allow_direct=True)            # direct recycling is off: ring
    assert pool.ring_count == 1 and pool.cache_count == 0
    assert pool.release() == 68
    pool.put_page_bulk(out[2:])
    assert pool.release() == 0
    assert pool.freed
    assert arena.free_count == arena.n_pages
    assert pool.release() == 0                          # retry after the end is harmless
    audit(arena, [pool], {})


def test_destroy_of_an_idle_pool_frees_it_at_once(arena):
    pool = PagePool(arena)
    pages = [pool.alloc_page() for _ in range(10)]
    pool.put_page_bulk(pages, allow_direct=True)
    assert pool.destroy() == 0 and pool.freed
    assert arena.free_count == arena.n_pages
    with pytest.raises(PktbufError):
        PagePool(arena).release()                       # not destroyed yet


def test_inflight_is_a_wrap_safe_32_bit_distance(arena):
    pool = PagePool(arena)
    pool.state.ctl[K.P_HOLD] = (1 << 32) + 5
    pool.state.ctl[K.P_RELEASE] = (1 << 32) - 3
    assert pool.inflight == 8
    pool.state.ctl[K.P_HOLD] = 3
    pool.state.ctl[K.P_RELEASE] = 5
    assert pool.inflight == -2


def test_bad_pool_parameters(arena):
    with pytest.raises(InvalidArgument):
        PagePool(arena, flags=0x80)
    with pytest.raises(InvalidArgument):
        PagePool(arena, refill="lazy")
    with pytest.raises(InvalidArgument):
        PagePool(arena, pool_size=0)
    assert PagePool(arena, pool_size=1 << 20).pool_size == K.PP_RING_MAX
