"""Heap behaviour: allocation, alignment, merging, dirty tracking, realloc, errors, stats."""
from __future__ import annotations

import numpy as np
import pytest

from pktbuf import DoubleFree, InvalidArgument, InvalidHandle, OutOfMemory
from pktbuf.buf.heap.api import GRAIN, Heap
from pktbuf.buf.heap import kernels as K
from pktbuf.buf.heap.layout import ELEM_BUSY, ELEM_FREE
from pktbuf.shm import Region

from .conftest import assert_unchanged, check_invariants, snapshot, walk


def g(heap, p):
    return (p - heap.base) // GRAIN


# These tests pin down the shared heap's placement and merging, so their heaps have no lcore
# caches (which keep small freed blocks out of the shared heap for their lcore's next malloc):
# the caches are tested in test_cache.py, and the contract with caches in test_model.py.

@pytest.fixture
def heap(zero_in_lock):
    h = Heap(GRAIN * 1000, zero_in_lock=zero_in_lock, cache=False)
    yield h
    h.close()


def dirty_heap(grains=100, zero_in_lock=False):
    r = Region(grains * GRAIN)
    r.array[:] = 0xA5                       # memory someone used before us
    return Heap(region=r, zero_in_lock=zero_in_lock, cache=False)


def close_dirty(h):
    """Close a dirty heap and its region (not the heap's own: it stays open otherwise)."""
    r = h.region
    h.close()
    r.close()


# ---------------------------------------------------------------------------------------------
# allocation

def test_blocks_come_from_the_end_and_do_not_overlap(heap):
    a = heap.malloc(64)
    b = heap.malloc(65)
    c = heap.malloc(1)
    assert g(heap, a) == 999 and g(heap, b) == 997 and g(heap, c) == 996
    assert [heap.usable_size(p) for p in (a, b, c)] == [64, 128, 64]
    check_invariants(heap, {a: 64, b: 65, c: 1})


def test_alignment(heap):
    for align in (128, 256, 4096, 8192):
        p = heap.malloc(100, align)
        assert p % align == 0
    check_invariants(heap)
    with pytest.raises(InvalidArgument):
        heap.malloc(10, 96)


def test_bad_sizes_and_exhaustion_leave_the_heap_unchanged(heap):
    p = heap.malloc(500)
    snap = snapshot(heap)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InvalidArgument):
            heap.malloc(bad)
    with pytest.raises(OutOfMemory):
        heap.malloc(1000 * GRAIN)
    with pytest.raises(OutOfMemory):
        heap.malloc(10, 1 << 40)
    with pytest.raises(OutOfMemory):
        heap.calloc(1 << 40, 1 << 40)
    assert_unchanged(heap, snap)
    check_invariants(heap, {p: 500})


def test_zmalloc_and_calloc_return_zeros(heap):
    p = heap.malloc(4000)
    heap.view(p)[:] = 0xEE
    heap.free(p)
    q = heap.zmalloc(4000)
    assert q == p and not heap.view(q).any()
    r = heap.calloc(10, 300)
    assert heap.usable_size(r) >= 3000 and not heap.view(r).any()


def test_exact_fit_uses_the_whole_element(heap):
    p = heap.malloc(1000 * GRAIN)
    assert p == heap.base
    assert heap.stats()["free_count"] == 0 and heap.stats()["heap_freesz_bytes"] == 0
    heap.free(p)
    assert walk(heap) == [(0, 1000, ELEM_FREE, 0, 0)]


# ---------------------------------------------------------------------------------------------
# freeing and merging

def test_free_merges_with_both_neighbours(heap):
    a, b, c, d = (heap.malloc(GRAIN * 10) for _ in range(4))  # d lowest, a highest
    heap.free(a)                      # next: end of heap; prev: c busy -> stays alone
    assert [e[2] for e in walk(heap)] == [ELEM_FREE, ELEM_BUSY, ELEM_BUSY, ELEM_BUSY, ELEM_FREE]
    heap.free(c)                      # neighbours d and b busy: alone
    heap.free(b)                      # between free c and free a: one element
    els = walk(heap)
    assert [(e[1], e[2]) for e in els] == [(960, ELEM_FREE), (10, ELEM_BUSY), (30, ELEM_FREE)]
    heap.free(d)                      # everything merges
    assert walk(heap) == [(0, 1000, ELEM_FREE, 0, 0)]
    check_invariants(heap, {})


def test_freed_memory_is_zero(heap):
    ps = [heap.malloc(3000) for _ in range(5)]
    for i, p in enumerate(ps):
        heap.view(p)[:] = i + 1
    for p in ps[::2]:
        heap.free(p)
    check_invariants(heap, {p: 3000 for p in ps[1::2]})
    assert not heap.region.array[g(heap, ps[0]) * GRAIN:][:3000].any()


def test_bad_free_is_an_error_and_changes_nothing(heap):
    a = heap.malloc(1000)
    b = heap.malloc(100)
    heap.view(a)[:] = 1
    heap.free(b)                                  # b merged into the big free element
    cases = [(b, DoubleFree),                     # freed before (and merged away)
             (a + GRAIN, InvalidHandle),          # inside a live block
             (a + 1, InvalidHandle),              # not grain aligned
             (heap.base - GRAIN, InvalidHandle),  # below the heap
             (heap.base + heap.size, InvalidHandle),
             (heap.base, DoubleFree),             # start of the free element
             (-5, InvalidHandle), (1 << 70, InvalidHandle), ("x", InvalidHandle)]
    for ptr, exc in cases:
        snap = snapshot(heap)
        with pytest.raises(exc):
            heap.free(ptr)
        assert_unchanged(heap, snap)
    heap.free(a)
    snap = snapshot(heap)
    with pytest.raises(DoubleFree):
        heap.free(a)
    assert_unchanged(heap, snap)
    heap.free(0)                                  # rte_free(NULL)
    assert_unchanged(heap, snap)


def test_double_free_of_an_unmerged_block_is_reported_as_such(heap):
    a, b, c = heap.malloc(64), heap.malloc(64), heap.malloc(64)
    heap.free(b)                                  # neighbours busy: stays its own element
    snap = snapshot(heap)
    with pytest.raises(DoubleFree):
        heap.free(b)
    assert_unchanged(heap, snap)
    assert int(K.heap_free(heap.state, b)) == -114


# ---------------------------------------------------------------------------------------------
# dirty memory

def test_dirty_heap_zmalloc_clears_only_unknown_memory(zero_in_lock):
    h = dirty_heap(100, zero_in_lock)
    assert walk(h) == [(0, 100, ELEM_FREE, 0, 100)]
    p = h.malloc(10 * GRAIN)                      # grains 90..99, dirty
    assert (h.view(p) == 0xA5).all()
    e = h.state.elems[90]
    assert (e["dlo"], e["dhi"]) == (90, 100)
    h.free(p)                                     # zeroed; merged with dirty [0, 90)
    assert walk(h) == [(0, 100, ELEM_FREE, 0, 90)]
    q = h.malloc(10 * GRAIN)                      # the same grains, now clean: no memset due
    assert q == p and (h.state.elems[90]["dlo"], h.state.elems[90]["dhi"]) == (0, 0)
    assert not h.view(q).any()
    h.free(q)
    z = h.zmalloc(20 * GRAIN)                     # 80..99: 80..89 dirty, cleared by zmalloc
    assert not h.view(z).any()
    h.free(z)
    assert walk(h) == [(0, 100, ELEM_FREE, 0, 80)]
    check_invariants(h, {})
    close_dirty(h)


def test_merge_with_a_dirty_neighbour_keeps_only_its_part_dirty():
    h = dirty_heap(100)
    a = h.malloc(30 * GRAIN)                      # 70..99
    b = h.malloc(30 * GRAIN)                      # 40..69
    c = h.malloc(30 * GRAIN)                      # 10..39  (0..9 stays free, dirty)
    h.free(a)                                     # clean free element 70..99
    h.free(c)                                     # zeroed, merged with dirty 0..9: dirty [0, 10)
    assert walk(h) == [(0, 40, ELEM_FREE, 0, 10), (40, 30, ELEM_BUSY, 40, 70),
                       (70, 30, ELEM_FREE, 0, 0)]
    h.free(b)                                     # one element; dirty part only [0, 10)
    assert walk(h) == [(0, 100, ELEM_FREE, 0, 10)]
    check_invariants(h, {})
    z = h.zmalloc(100 * GRAIN)
    assert not h.view(z).any()
    close_dirty(h)


def test_clean_middle_between_dirty_neighbours_is_covered_by_the_hull(zero_in_lock):
    h = dirty_heap(100, zero_in_lock)
    p = h.malloc(10 * GRAIN, 4096)                # 4096 = 64 grains: block 64..73
    assert g(h, p) == 64
    assert walk(h) == [(0, 64, ELEM_FREE, 0, 64), (64, 10, ELEM_BUSY, 64, 74),
                       (74, 26, ELEM_FREE, 74, 100)]
    h.free(p)                                     # zeroed, but dirty on both sides
    assert walk(h) == [(0, 100, ELEM_FREE, 0, 100)]
    check_invariants(h, {})
    z = h.zmalloc(100 * GRAIN)
    assert not h.view(z).any()
    h.free(z)
    assert walk(h) == [(0, 100, ELEM_FREE, 0, 0)]  # everything has been zeroed once now
    check_invariants(h, {})
    close_dirty(h)


# ---------------------------------------------------------------------------------------------
# realloc

def test_realloc_shrinks_in_place_and_frees_the_tail(heap):
    p = heap.malloc(100 * GRAIN)
    heap.view(p)[:] = np.arange(100 * GRAIN) % 251
    q = heap.realloc(p, 10 * GRAIN)
    assert q == p and heap.usable_size(p) == 10 * GRAIN
    assert (heap.view(p) == np.arange(10 * GRAIN) % 251).all()
    check_invariants(heap, {p: 10 * GRAIN})


def test_realloc_grows_in_place_into_a_free_neighbour(heap):
    hi = heap.malloc(50 * GRAIN)
    p = heap.malloc(10 * GRAIN)
    heap.view(p)[:] = 9
    heap.free(hi)                                  # free room right above p
    q = heap.realloc(p, 40 * GRAIN)
    assert q == p and heap.usable_size(p) == 40 * GRAIN
    assert (heap.view(p)[:10 * GRAIN] == 9).all()
    check_invariants(heap, {p: 40 * GRAIN})


def test_realloc_moves_when_it_must_and_copies(heap):
    p = heap.malloc(10 * GRAIN)                    # the top of the heap
    below = heap.malloc(GRAIN)
    heap.view(p)[:] = 3
    q = heap.realloc(p, 20 * GRAIN)                # nothing free above p: it must move
    assert q != p and heap.usable_size(q) == 20 * GRAIN
    assert (heap.view(q)[:10 * GRAIN] == 3).all()
    with pytest.raises(DoubleFree):                # the old block was freed
        heap.usable_size(p)
    check_invariants(heap, {q: 20 * GRAIN, below: GRAIN})


def test_realloc_out_of_memory_keeps_the_block(heap):
    p = heap.malloc(600 * GRAIN)
    heap.view(p)[:] = 4
    snap = snapshot(heap)
    with pytest.raises(OutOfMemory):
        heap.realloc(p, 700 * GRAIN)
    assert_unchanged(heap, snap)
    assert (heap.view(p) == 4).all()


def test_realloc_alignment_and_null(heap):
    p = heap.realloc(0, 100)
    assert heap.usable_size(p) == 128
    q = heap.realloc(p, 100, 8192)
    assert q % 8192 == 0
    with pytest.raises(InvalidHandle):
        heap.realloc(q + GRAIN, 10)
    with pytest.raises(InvalidArgument):
        heap.realloc(q, 0)
    check_invariants(heap, {q: 100})


# ---------------------------------------------------------------------------------------------
# statistics and construction

def test_stats(heap):
    assert heap.stats() == dict(heap_totalsz_bytes=64000, heap_freesz_bytes=64000,
                                heap_allocsz_bytes=0, greatest_free_size=64000, free_count=1,
                                alloc_count=0, cached_bytes=0, cached_count=0)
    a = heap.malloc(1000)
    b = heap.malloc(1000)
    heap.free(a)
    assert heap.stats() == dict(heap_totalsz_bytes=64000, heap_freesz_bytes=64000 - 1024,
                                heap_allocsz_bytes=1024, greatest_free_size=64000 - 2048,
                                free_count=2, alloc_count=1, cached_bytes=0, cached_count=0)
    heap.free(b)


def test_validate_detects_corruption(heap):
    p = heap.malloc(1000)
    heap.state.elems[g(heap, p)]["size"] += 1
    with pytest.raises(Exception) as ei:
        heap.validate()
    assert ei.value.reason in (1, 3, 5)
    heap.state.elems[g(heap, p)]["size"] -= 1
    heap.validate()
    heap.region.array[0] = 1                        # non-zero byte in clean free memory
    heap.validate()                                 # not read without check_zero
    with pytest.raises(Exception) as ei:
        heap.validate(check_zero=True)
    assert ei.value.reason == 9


def test_construction_errors():
    with pytest.raises(InvalidArgument):
        Heap(0)
    r = Region(1000)
    with pytest.raises(InvalidArgument):
        Heap(region=r)
    r.close()
    h = Heap(100)
    assert h.size == 128 and h.ngrains == 2
    h.close()
