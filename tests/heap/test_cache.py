"""The per-lcore caches of small freed blocks: reuse, the zero invariant, double frees, the
statistics, spilling, flushing (on request, on ENOMEM, at thread exit, on close) and threads."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from numba import njit

from pktbuf import DoubleFree, InvalidArgument, InvalidHandle
from pktbuf.buf.heap.api import GRAIN, Heap
from pktbuf.atomics import cas, fetch_add, load_acquire
from pktbuf.buf.heap import kernels as K
from pktbuf.buf.heap.layout import (CACHE_DEPTH, ELEM_BUSY, ELEM_CACHED, ELEM_FREE, V_CACHE,
                                    V_NOT_ZERO)
from pktbuf.lcore import LCORE_ANY
from pktbuf.rawmem import addr_u8
from pktbuf.shm import Region

from .conftest import assert_unchanged, cached_blocks, check_invariants, snapshot, walk


def g(heap, p):
    return (p - heap.base) // GRAIN


@pytest.fixture
def heap():
    h = Heap(GRAIN * 4000)
    yield h
    h.close()


def test_a_freed_small_block_goes_back_to_its_lcore_only(heap):
    p = heap.malloc(1000, lcore=0)
    heap.free(p, lcore=0)
    assert walk(heap)[-1][0] == g(heap, p) and walk(heap)[-1][2] == ELEM_CACHED
    assert cached_blocks(heap) == {g(heap, p): (0, 16)}
    q = heap.malloc(1000, lcore=1)            # lcore 1 does not see lcore 0's cache
    assert q != p
    assert heap.malloc(1000, lcore=0) == p    # lcore 0 gets it back
    assert heap.malloc(960, lcore=0) != p     # (a cached block serves only its lcore)
    check_invariants(heap)


def test_only_default_aligned_small_blocks_are_cached():
    heap = Heap(GRAIN * 4000, cache_large=0)
    big = heap.malloc(4097, lcore=0)
    heap.free(big, lcore=0)                         # above cache_max, no large slot
    al = heap.malloc(64, 4096, lcore=0)
    p = heap.malloc(64, lcore=0)
    heap.free(p, lcore=0)
    assert heap.malloc(64, 4096, lcore=0) != p     # aligned requests bypass the cache
    heap.free(al, lcore=0)
    assert set(cached_blocks(heap)) == {g(heap, p), g(heap, al)}
    assert heap.stats()["cached_count"] == 2
    heap.free(heap.malloc(64, lcore=LCORE_ANY), lcore=LCORE_ANY)   # no lcore: no cache
    assert heap.stats()["cached_count"] == 2
    check_invariants(heap)
    heap.close()


def test_the_large_slot_keeps_the_last_large_block(heap):
    a = heap.malloc(64 << 10, lcore=0)
    b = heap.malloc(5000, lcore=0)
    heap.view(a)[:] = 7
    heap.free(a, lcore=0)
    assert cached_blocks(heap) == {g(heap, a): (0, 1024)}
    heap.validate(check_zero=True)
    assert heap.malloc(60 << 10, lcore=0) != a        # another grain count: shared heap
    assert heap.malloc(64 << 10, lcore=1) != a        # another lcore
    c = heap.malloc(64 << 10, lcore=0)
    assert c == a and not heap.view(c).any()
    heap.free(c, lcore=0)
    heap.free(b, lcore=0)                             # replaces a, which goes back and merges
    assert cached_blocks(heap) == {g(heap, b): (0, 79)}
    assert walk(heap)[[e[0] for e in walk(heap)].index(g(heap, a))][2] == ELEM_FREE
    st = heap.stats()
    assert st["cached_count"] == 1 and st["cached_bytes"] == 79 * GRAIN
    with pytest.raises(DoubleFree):
        heap.free(b, lcore=0)
    check_invariants(heap)
    big = Heap(GRAIN * 40000)                         # 2.5 MB: above 1 MiB nothing is cached
    p = big.malloc((1 << 20) + 1, lcore=0)
    big.free(p, lcore=0)
    assert not cached_blocks(big)
    big.close()


def test_cached_blocks_are_zero_and_a_malloc_of_one_reads_zeros(heap):
    ps = [heap.malloc(n, lcore=3) for n in (1, 65, 700, 4096)]
    for i, p in enumerate(ps):
        heap.view(p)[:] = 0x5A + i
    for p in ps:
        heap.free(p, lcore=3)
    heap.validate(check_zero=True)
    check_invariants(heap, {})
    for n, p in zip((1, 65, 700, 4096), ps):
        q = heap.malloc(n, lcore=3)                # malloc, not zmalloc: still zero
        assert q == p and not heap.view(q).any()
    for p in ps:
        heap.free(p, lcore=3)
    for n, p in zip((1, 65, 700, 4096), ps):
        assert heap.zmalloc(n, lcore=3) == p and not heap.view(p).any()
    assert heap.calloc(10, 6, lcore=3) > 0


def test_validate_finds_a_dirty_or_lost_cached_block(heap):
    p = heap.malloc(128, lcore=0)
    heap.free(p, lcore=0)
    heap.region.array[p - heap.base + 100] = 1
    with pytest.raises(Exception) as e:
        heap.validate(check_zero=True)
    assert e.value.reason == V_NOT_ZERO
    heap.region.array[p - heap.base + 100] = 0
    heap.state.elems[g(heap, p)]["state"] = ELEM_BUSY        # cached but not marked so
    with pytest.raises(Exception) as e:
        heap.validate()
    assert e.value.reason == V_CACHE
    heap.state.elems[g(heap, p)]["state"] = ELEM_CACHED
    heap.validate(check_zero=True)


def test_a_cached_block_cannot_be_freed_again(heap):
    p = heap.malloc(200, lcore=0)
    heap.free(p, lcore=0)
    snap = snapshot(heap)
    for lc in (0, 1, LCORE_ANY):
        with pytest.raises(DoubleFree):
            heap.free(p, lcore=lc)
        with pytest.raises(DoubleFree):
            heap.realloc(p, 300)
        with pytest.raises(DoubleFree):
            heap.usable_size(p)
    with pytest.raises(InvalidHandle):
        heap.free(p + GRAIN, lcore=0)
    assert_unchanged(heap, snap)
    assert K.heap_lcore_free(heap.state, 0, p) == -114


def test_stats_count_cached_blocks_as_free(heap):
    total = heap.size
    ps = [heap.malloc(64 * k, lcore=0) for k in (1, 2, 3)]
    heap.free(ps[0], lcore=0)
    heap.free(ps[2], lcore=0)
    st = heap.stats()
    assert st["alloc_count"] == 1 and st["heap_allocsz_bytes"] == 128
    assert st["cached_count"] == 2 and st["cached_bytes"] == 64 * 4
    assert st["heap_freesz_bytes"] == total - 128
    assert st["free_count"] == 1                         # the shared heap's one free element
    assert heap.flush_cache(0) == 2
    st = heap.stats()
    assert st["cached_count"] == 0 and st["cached_bytes"] == 0
    assert st["heap_freesz_bytes"] == total - 128 and st["alloc_count"] == 1
    check_invariants(heap, {ps[1]: 128})


def test_a_full_bin_returns_its_older_half_to_the_shared_heap(heap):
    ps = [heap.malloc(64, lcore=0) for _ in range(CACHE_DEPTH + 1)]
    for p in ps:
        heap.free(p, lcore=0)
    held = cached_blocks(heap)
    assert 0 < len(held) <= CACHE_DEPTH
    assert g(heap, ps[-1]) in held                         # the newest stays
    assert g(heap, ps[0]) not in held                      # the oldest went back
    check_invariants(heap, {})
    # per-bin byte budget: 4 KiB blocks, 16 KiB per bin -> at most 4 kept
    qs = [heap.malloc(4096, lcore=1) for _ in range(6)]
    for q in qs:
        heap.free(q, lcore=1)
    assert sum(1 for lc, s in cached_blocks(heap).values() if lc == 1) <= 4
    check_invariants(heap, {})
    heap.flush_cache()
    assert len(walk(heap)) == 1


def test_out_of_memory_flushes_every_cache_first():
    h = Heap(GRAIN * 64)
    ps = [h.malloc(1024, lcore=lc) for lc in (0, 1, 2, 3)]     # the whole heap
    for lc, p in enumerate(ps):
        h.free(p, lcore=lc)
    assert h.stats()["cached_count"] == 4 and h.stats()["free_count"] == 0
    p = h.malloc(GRAIN * 64, lcore=5)                          # fits only after the flush
    assert p == h.base and h.stats()["cached_count"] == 0
    h.free(p, lcore=5)
    h.flush_cache()
    check_invariants(h, {})
    h.close()


def test_out_of_memory_flushes_the_large_slots_too():
    h = Heap(GRAIN * 200, cache_max=0)                         # large slots only
    ps = [h.malloc(100 * GRAIN, lcore=lc) for lc in (0, 1)]    # the whole heap
    for lc, p in enumerate(ps):
        h.free(p, lcore=lc)
    assert h.stats()["cached_count"] == 2
    p = h.malloc(150 * GRAIN, lcore=2)
    assert h.stats()["cached_count"] == 0
    h.free(p, lcore=2)
    h.flush_cache()
    check_invariants(h, {})
    h.close()


def test_flush_on_thread_exit():
    h = Heap(GRAIN * 1000)
    out = []

    def work():
        p = h.malloc(256)
        q = h.malloc(2048)
        h.free(p)
        h.free(q)
        out.append(h.stats()["cached_count"])

    t = threading.Thread(target=work)
    t.start()
    t.join()
    del t
    gc.collect()
    assert out == [2]
    assert h.stats()["cached_count"] == 0
    assert walk(h) == [(0, 1000, ELEM_FREE, 0, 0)]
    check_invariants(h, {})
    h.close()


def test_close_flushes_the_caches_into_the_region():
    r = Region(GRAIN * 100)
    h = Heap(region=r, dirty=False)
    p = h.malloc(100, lcore=0)
    h.free(p, lcore=0)
    state = h.state
    h.close()
    assert not r.closed
    assert state.elems[0]["size"] == 100 and state.elems[0]["state"] == ELEM_FREE
    r.close()


def test_cache_switches():
    h = Heap(GRAIN * 10)
    assert h.cache
    h.close()
    h = Heap(GRAIN * 10, cache=False)
    assert not h.cache
    h.close()
    h = Heap(GRAIN * 10, zero_in_lock=True)
    assert not h.cache and h.zero_in_lock
    h.close()
    with pytest.raises(InvalidArgument):
        Heap(GRAIN * 10, zero_in_lock=True, cache=True)
    for bad in (-1, 4097, 1.5):
        with pytest.raises(InvalidArgument):
            Heap(GRAIN * 10, cache_max=bad)
    for bad in (-1, 1.5, "1"):
        with pytest.raises(InvalidArgument):
            Heap(GRAIN * 10, cache_large=bad)
    h = Heap(GRAIN * 100, cache_max=128, cache_large=0)
    p = h.malloc(192, lcore=0)
    h.free(p, lcore=0)
    q = h.malloc(128, lcore=0)
    h.free(q, lcore=0)
    assert list(cached_blocks(h)) == [g(h, q)]
    for lc in (-2, 128, "0"):
        with pytest.raises(InvalidArgument):
            h.malloc(64, lcore=lc)
    h.close()


# ---------------------------------------------------------------------------------------------
# threads

@njit(nogil=True, cache=True)
def _churn(heap, lcore, iters, seed, gate, ptrs, out):
    """Random small mallocs/frees through ``lcore``'s cache; half of the frees are of blocks
    another thread allocated (``ptrs`` is shared: a slot is taken by exchanging it for 0)."""
    np.random.seed(seed)
    fetch_add(gate, 0, 1)
    while load_acquire(gate, 0) < gate[1]:
        pass
    bad = 0
    for _ in range(iters):
        k = np.random.randint(0, ptrs.size)
        p = ptrs[k]
        if p != 0:
            if cas(ptrs, k, p, 0) == p:
                v = addr_u8(p, 64)
                if v[0] != 0xAB:
                    bad += 1
                if K.heap_lcore_free(heap, lcore, p) != 0:
                    bad += 1
        else:
            n = np.random.randint(1, 4096)
            q = K.heap_lcore_malloc(heap, lcore, n, 0)
            if q <= 0:
                continue
            v = addr_u8(q, n)
            for i in range(n):
                if v[i] != 0:
                    bad += 1
                    break
            v[:] = 0xAB
            if cas(ptrs, k, 0, q) != 0:
                K.heap_lcore_free(heap, lcore, q)
    out[0] = bad
    return 0


def _run(targets):
    ts = [threading.Thread(target=f, args=a) for f, a in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _drain(h, ptrs):
    for p in ptrs:
        if p:
            h.free(int(p), lcore=LCORE_ANY)
    h.flush_cache()
    assert walk(h) == [(0, h.ngrains, ELEM_FREE, 0, 0)]
    check_invariants(h, {})


def test_two_lcores_freeing_each_others_blocks():
    h = Heap(8 << 20)
    ptrs = np.zeros(64, np.int64)
    out = np.zeros((2, 2), np.int64)
    _churn(h.state, 0, 10, 1, np.array([0, 1], np.int64), ptrs, out[0])      # compile
    gate = np.array([0, 2], np.int64)
    _run([(_churn, (h.state, lc, 100_000, 7 + lc, gate, ptrs, out[lc])) for lc in (0, 1)])
    assert out[:, 0].tolist() == [0, 0], "a block was not zero when handed out, or lost data"
    check_invariants(h)
    _drain(h, ptrs)
    h.close()


@njit(nogil=True, cache=True)
def _flusher(heap, lcore, done):
    n = 0
    while load_acquire(done, 0) == 0:
        n += K.heap_cache_flush(heap, lcore)
    return n


def test_a_flush_from_another_thread_while_the_lcore_runs():
    h = Heap(8 << 20)
    ptrs = np.zeros(16, np.int64)
    out = np.zeros(2, np.int64)
    done = np.zeros(1, np.int64)
    _churn(h.state, 0, 10, 1, np.array([0, 1], np.int64), ptrs, out)
    done[0] = 1
    _flusher(h.state, 0, done)
    done[0] = 0
    flushed = []

    def churn():
        try:
            _churn(h.state, 0, 200_000, 3, np.array([0, 1], np.int64), ptrs, out)
        finally:
            done[0] = 1                    # the flusher's acquire load sees it

    _run([(churn, ()), (lambda: flushed.append(_flusher(h.state, 0, done)), ())])
    assert out[0] == 0 and len(flushed) == 1
    check_invariants(h)
    _drain(h, ptrs)
    h.close()


def test_counted_kernels_count_the_lock():
    from pktbuf.buf.heap.layout import LS_ACQUIRE, LS_ANY_ROW, LS_CACHE_HIT, LS_HANDOFF, LS_WORDS
    for kw, acq in (({"cache": False}, 2), ({}, 0)):
        h = Heap(1 << 20, **kw)
        ls = h.state.lockstat
        p = K.heap_lcore_malloc_counted(h.state, 2, 100, 0)
        K.heap_lcore_free_counted(h.state, 2, p)
        ls[:] = 0
        for _ in range(50):
            p = K.heap_lcore_malloc_counted(h.state, 2, 100, 0)
            assert K.heap_lcore_free_counted(h.state, 2, p) == 0
        row = ls[2 * LS_WORDS:3 * LS_WORDS]
        assert row[LS_ACQUIRE] == acq * 50 and row[LS_HANDOFF] == 0
        assert row[LS_CACHE_HIT] == (50 if acq == 0 else 0)
        K.heap_lcore_malloc_counted(h.state, LCORE_ANY, 100, 0)
        assert ls[LS_ANY_ROW * LS_WORDS + LS_ACQUIRE] == 1
        assert ls[LS_ANY_ROW * LS_WORDS + LS_HANDOFF] == 1       # row 2 held it last
        # the release kernels never count
        ls[:] = 0
        K.heap_free(h.state, K.heap_malloc(h.state, 100, 0))
        assert not ls.any()
        h.close()
