"""The page allocator under the page pool: single and bulk allocation, references, bad input."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import njit

from pktbuf import DoubleFree, InvalidArgument, InvalidHandle, OutOfMemory
from pktbuf.buf.pagepool.api import PageArena
from pktbuf.buf.pagepool import arena as A

from .conftest import assert_same, free_pages, snapshot


def test_alloc_page_hands_out_lowest_ids_first_with_one_reference(arena):
    got = [arena.alloc_page() for _ in range(3)]
    assert got == [0, 1, 2]
    assert [arena.ref_count(p) for p in got] == [1, 1, 1]
    assert arena.free_count == arena.n_pages - 3
    assert arena.stats() == dict(alloc_calls=3, bulk_calls=0, pages_out=3, pages_in=0, fail=0)


def test_freed_page_is_reused_first(arena):
    a, b = arena.alloc_page(), arena.alloc_page()
    assert arena.put_page(a) is True
    assert arena.ref_count(a) == 0
    assert arena.alloc_page() == a          # LIFO: the cache-hot page
    assert arena.put_page(b) is True


def test_empty_arena_raises_and_changes_nothing():
    ar = PageArena(4)
    pages = [ar.alloc_page() for _ in range(4)]
    before = snapshot(ar)
    with pytest.raises(OutOfMemory):
        ar.alloc_page()
    after = snapshot(ar)
    # only the failure counter moved
    before[0][A.A_STAT_FAIL] += 1
    assert_same(before, after)
    assert sorted(pages) == [0, 1, 2, 3]


def test_bulk_fills_only_empty_slots_in_order(arena):
    arr = np.array([-1, 500, -1, -1, 7, -1], np.int32)
    assert arena.alloc_pages_bulk(arr) == 4
    assert arr.tolist() == [0, 500, 1, 2, 7, 3]
    assert [arena.ref_count(p) for p in (0, 1, 2, 3)] == [1] * 4
    assert arena.ref_count(500) == 0 and arena.ref_count(7) == 0   # untouched slots
    assert arena.stats()["bulk_calls"] == 1 and arena.stats()["pages_out"] == 4
    assert arena.alloc_pages_bulk(arr) == 0                        # nothing empty: no call
    assert arena.stats()["bulk_calls"] == 1


def test_bulk_partial_success_when_arena_runs_low():
    ar = PageArena(10)
    arr = np.full(64, -1, np.int32)
    assert ar.alloc_pages_bulk(arr) == 10
    assert sorted(arr[:10].tolist()) == list(range(10)) and (arr[10:] == -1).all()
    assert ar.free_count == 0
    assert ar.alloc_pages_bulk(arr) == 0
    assert ar.stats()["fail"] == 1


def test_bulk_rejects_bad_arrays(arena):
    with pytest.raises(InvalidArgument):
        arena.alloc_pages_bulk(np.full(4, -1, np.int64))
    with pytest.raises(InvalidHandle):
        arena.alloc_pages_bulk(np.array([-1, -5], np.int32))
    assert arena.free_count == arena.n_pages


def test_references_get_and_put(arena):
    p = arena.alloc_page()
    assert arena.get_page(p) == 2
    assert arena.put_page(p) is False
    assert arena.ref_count(p) == 1
    assert arena.put_page(p) is True
    before = snapshot(arena)
    with pytest.raises(DoubleFree):
        arena.put_page(p)
    with pytest.raises(DoubleFree):
        arena.get_page(p)
    with pytest.raises(InvalidHandle):
        arena.put_page(arena.n_pages)
    with pytest.raises(InvalidHandle):
        arena.put_page(-1)
    assert_same(before, snapshot(arena))


def test_page_view_is_the_page_in_the_region(arena):
    p = arena.alloc_page()
    v = arena.page_view(p)
    assert v.size == 4096
    v[:] = 0x5A
    off = p * 4096
    assert (arena.region.array[off:off + 4096] == 0x5A).all()
    assert arena.address(p) == arena.region.address + off
    assert int(A.page_address(arena.state, p)) == arena.address(p)


def test_bad_construction():
    with pytest.raises(InvalidArgument):
        PageArena(0)
    with pytest.raises(InvalidArgument):
        PageArena(4, page_size=3000)


@njit(nogil=True)
def _churn(arena, n, keep, seed):
    """Allocate and free pages for ``n`` rounds, holding up to ``keep`` at a time; returns the
    number of errors seen (a page handed out twice shows up as a refcount != 1)."""
    np.random.seed(seed)
    held = np.full(keep, -1, np.int32)
    bad = 0
    for i in range(n):
        k = np.random.randint(0, keep)
        if held[k] >= 0:
            if A.page_ref_count(arena, held[k]) != 1:
                bad += 1
            if A.put_page(arena, held[k]) != 1:
                bad += 1
            held[k] = -1
        elif np.random.randint(0, 2) == 0:
            p = A.alloc_page(arena)
            if p >= 0:
                held[k] = p
        else:
            A.alloc_pages_bulk(arena, held[k:k + 1], 1)
    for k in range(keep):
        if held[k] >= 0:
            A.put_page(arena, held[k])
    return bad


def test_two_threads_share_the_arena():
    ar = PageArena(96)
    _churn(ar.state, 10, 4, 0)
    res = [None, None]

    def run(i):
        res[i] = _churn(ar.state, 300_000, 40, i + 1)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert res == [0, 0]
    assert sorted(free_pages(ar)) == list(range(96))
    st = ar.stats()
    assert st["pages_out"] == st["pages_in"]
