"""Several threads on one heap, through the nogil kernels.

Stress: each thread keeps up to 24 blocks of random size (64 B .. 70 KB, sometimes aligned),
writes a pattern unique to (thread, block) over the whole requested size, and checks it before
freeing or after a realloc; zmalloc/calloc blocks are checked for zeros first.  About a second
per run, both zeroing placements, and with the lcore caches (each thread its own lcore) or
without (``LCORE_ANY``).  Afterwards (caches flushed) the heap must be one free, zero element
again.

Races on one pointer: two threads free the same blocks at the same time; exactly one free of
each block may succeed.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import njit

from pktbuf.atomics import fetch_add, load_acquire
from pktbuf.buf.heap.api import Heap
from pktbuf.buf.heap import kernels as K
from pktbuf.buf.heap.layout import ELEM_FREE
from pktbuf.rawmem import addr_u8

from .conftest import check_invariants, walk

SLOTS = 24


@njit(nogil=True, cache=True)
def _fill(addr, n, value):
    v = addr_u8(addr, n)
    for i in range(n):
        v[i] = (value + i) & 0xFF


@njit(nogil=True, cache=True)
def _check(addr, n, value):
    v = addr_u8(addr, n)
    for i in range(n):
        if v[i] != ((value + i) & 0xFF):
            return False
    return True


@njit(nogil=True, cache=True)
def _is_zero(addr, n):
    v = addr_u8(addr, n)
    for i in range(n):
        if v[i] != 0:
            return False
    return True


@njit(nogil=True, cache=True)
def _stress(heap, tid, lcore, iters, seed, gate, out):
    np.random.seed(seed)
    ptr = np.zeros(SLOTS, np.int64)
    size = np.zeros(SLOTS, np.int64)
    tag = np.zeros(SLOTS, np.int64)
    fetch_add(gate, 0, 1)                      # start together
    while load_acquire(gate, 0) < gate[1]:
        pass
    bad = 0
    oom = 0
    ops = 0
    serial = tid * 1_000_003
    for it in range(iters):
        k = np.random.randint(0, SLOTS)
        if ptr[k] != 0:
            if not _check(ptr[k], size[k], tag[k]):
                bad += 1
            if np.random.randint(0, 4) == 0:    # realloc keeps the prefix
                ns = np.int64(np.random.randint(1, 70_000))
                q = K.heap_realloc(heap, ptr[k], ns, 0)
                if q > 0:
                    keep = size[k] if size[k] < ns else ns
                    if not _check(q, keep, tag[k]):
                        bad += 1
                    serial += 1
                    ptr[k] = q
                    size[k] = ns
                    tag[k] = serial
                    _fill(q, ns, serial)
                else:
                    oom += 1
            else:
                if K.heap_lcore_free(heap, lcore, ptr[k]) != 0:
                    bad += 1
                ptr[k] = 0
        else:
            r = np.random.randint(0, 8)
            n = np.int64(np.random.randint(1, 70_000)) if r < 3 else np.int64(np.random.randint(1, 2000))
            align = 4096 if r == 7 else 0
            if r == 5:
                p = K.heap_calloc(heap, 4, (n + 3) // 4, 0)
                n = 4 * ((n + 3) // 4)
            elif r >= 4:
                p = K.heap_lcore_zmalloc(heap, lcore, n, align)
            else:
                p = K.heap_lcore_malloc(heap, lcore, n, align)
            if p <= 0:
                oom += 1
                continue
            if align and p % align != 0:
                bad += 1
            if r >= 4 and not _is_zero(p, n):
                bad += 1
            serial += 1
            ptr[k] = p
            size[k] = n
            tag[k] = serial
            _fill(p, n, serial)
        ops += 1
    for k in range(SLOTS):
        if ptr[k] != 0:
            if not _check(ptr[k], size[k], tag[k]):
                bad += 1
            if K.heap_lcore_free(heap, lcore, ptr[k]) != 0:
                bad += 1
    out[0] = bad
    out[1] = oom
    out[2] = ops
    return 0


def _run_threads(target, args_per_thread):
    ts = [threading.Thread(target=target, args=a) for a in args_per_thread]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


@pytest.mark.parametrize("lcores", ["shared", "own-lcore"])
@pytest.mark.parametrize("threads", [2, 3])
def test_stress_patterns(zero_in_lock, threads, lcores):
    heap = Heap(24 << 20, zero_in_lock=zero_in_lock)
    out = np.zeros((threads, 4), np.int64)
    _stress(heap.state, 0, 0, 50, 1, np.array([0, 1], np.int64), out[0])    # compile
    gate = np.array([0, threads], np.int64)
    iters = 90_000 if threads == 2 else 60_000                          # ~1 s in total
    lc = [t if lcores == "own-lcore" else -1 for t in range(threads)]
    _run_threads(_stress, [(heap.state, t, lc[t], iters, 100 + t, gate, out[t])
                           for t in range(threads)])
    assert out[:, 0].tolist() == [0] * threads, "a block lost its pattern, or a call failed"
    assert (out[:, 2] > iters // 2).all()
    check_invariants(heap, {})
    heap.flush_cache()
    els = walk(heap)
    assert len(els) == 1 and els[0][2] == ELEM_FREE
    check_invariants(heap, {})
    st = heap.stats()
    assert st["alloc_count"] == 0 and st["heap_freesz_bytes"] == heap.size
    heap.close()


@njit(nogil=True, cache=True)
def _free_all(heap, ptrs, gate, out):
    fetch_add(gate, 0, 1)
    while load_acquire(gate, 0) < gate[1]:
        pass
    ok = 0
    already = 0
    other = 0
    for i in range(ptrs.size):
        rc = K.heap_free(heap, ptrs[i])
        if rc == 0:
            ok += 1
        elif rc == -114 or rc == -9:
            already += 1      # -9: the block was freed and merged away already
        else:
            other += 1
    out[0] = ok
    out[1] = already
    out[2] = other
    return 0


def test_racing_double_frees_free_each_block_once(zero_in_lock):
    heap = Heap(8 << 20, zero_in_lock=zero_in_lock)
    out = np.zeros((2, 4), np.int64)
    warm = np.array([K.heap_malloc(heap.state, 64, 0)], np.int64)
    _free_all(heap.state, warm, np.array([0, 1], np.int64), out[0])
    for rnd in range(20):
        ptrs = np.array([K.heap_malloc(heap.state, 64 + 97 * (i % 50), 0) for i in range(400)],
                        np.int64)
        assert (ptrs > 0).all()
        rev = ptrs[::-1].copy()
        gate = np.array([0, 2], np.int64)
        _run_threads(_free_all, [(heap.state, ptrs, gate, out[0]), (heap.state, rev, gate, out[1])])
        assert out[:, 0].sum() == 400 and out[:, 1].sum() == 400 and out[:, 2].sum() == 0
        check_invariants(heap, {})
        assert len(walk(heap)) == 1
    heap.close()
