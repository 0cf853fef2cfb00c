"""Helpers for the heap tests: an independent walk of the element table, snapshots."""
from __future__ import annotations

import numpy as np
import pytest

from pktbuf.buf.heap.api import GRAIN, Heap
from pktbuf.buf.heap.layout import (C_BIN0, C_COUNT, C_GRAINS, C_LARGE, CACHE_BINS, CACHE_LINE_I32, CACHE_ROW,
                                    CACHE_ROWS, ELEM_BUSY, ELEM_CACHED, ELEM_FREE, ELEM_FREEING,
                                    ELEM_NONE)


def cached_blocks(heap: Heap) -> dict[int, tuple[int, int]]:
    """grain -> (lcore, grains) of every block the lcore caches hold, read with NumPy; asserts
    that the rows' counters agree and that no block is held twice."""
    c = heap.state.cache.reshape(CACHE_ROWS, CACHE_ROW)
    out = {}
    for lc in range(CACHE_ROWS):
        n = grains = 0
        for b in range(CACHE_BINS):
            line = c[lc, C_BIN0 + b * CACHE_LINE_I32:C_BIN0 + (b + 1) * CACHE_LINE_I32]
            for gr in line[1:1 + line[0]]:
                assert int(gr) not in out, f"block {int(gr)} cached twice"
                out[int(gr)] = (lc, b + 1)
                n += 1
                grains += b + 1
        if c[lc, C_LARGE] > 0:                      # the large slot
            gr = int(c[lc, C_LARGE]) - 1
            assert gr not in out, f"block {gr} cached twice"
            size = int(heap.state.elems[gr]["size"])
            out[gr] = (lc, size)
            n += 1
            grains += size
        assert (int(c[lc, C_COUNT]), int(c[lc, C_GRAINS])) == (n, grains), f"lcore {lc} counters"
    return out


def walk(heap: Heap) -> list[tuple[int, int, int, int, int]]:
    """(start, size, state, dlo, dhi) of every element, in address order -- read from the
    table with NumPy, independently of the kernels' own validate."""
    e = heap.state.elems
    out = []
    g = 0
    while g < heap.ngrains:
        size = int(e[g]["size"])
        assert size >= 1, f"element at {g} has size {size}"
        out.append((g, size, int(e[g]["state"]), int(e[g]["dlo"]), int(e[g]["dhi"])))
        g += size
    assert g == heap.ngrains, "elements do not tile the heap"
    return out


def check_invariants(heap: Heap, live: dict[int, int] | None = None) -> list:
    """The heap's invariants, checked without trusting the kernels:

    * elements tile the heap; every grain inside an element is marked as no element start;
    * the ``prev`` links follow the order;
    * no two free elements are adjacent;
    * every free byte outside its element's dirty range is zero;
    * the cached elements are exactly the blocks the lcore caches hold, each of its bin's size,
      with an empty dirty range and every byte zero;
    * with ``live`` (block address -> requested size): the busy elements are exactly those
      blocks, each large enough, and every byte is accounted for (free + busy = total).
    """
    els = walk(heap)
    e = heap.state.elems
    states = e["state"][:heap.ngrains]
    starts = np.zeros(heap.ngrains, bool)
    starts[[s for s, *_ in els]] = True
    assert (states[~starts] == ELEM_NONE).all(), "stray element start inside an element"
    prev = -1
    for start, size, st, lo, hi in els:
        assert st in (ELEM_FREE, ELEM_BUSY, ELEM_FREEING, ELEM_CACHED)
        assert int(e[start]["prev"]) == prev
        prev = start
    for (s1, _, st1, _, _), (s2, _, st2, _, _) in zip(els, els[1:]):
        assert not (st1 == ELEM_FREE and st2 == ELEM_FREE), f"adjacent free elements at {s1}, {s2}"
    mem = heap.region.array
    cached = cached_blocks(heap)
    assert sorted(cached) == [s for s, _, st, _, _ in els if st == ELEM_CACHED]
    for start, size, st, lo, hi in els:
        if st == ELEM_CACHED:
            assert cached[start][1] == size and lo >= hi
            assert not mem[start * GRAIN:(start + size) * GRAIN].any(), \
                f"non-zero byte in cached block {start}"
    for start, size, st, lo, hi in els:
        if st != ELEM_FREE:
            continue
        chunk = mem[start * GRAIN:(start + size) * GRAIN].reshape(size, GRAIN)
        clean = np.ones(size, bool)
        if lo < hi:
            assert start <= lo and hi <= start + size
            clean[lo - start:hi - start] = False
        assert not chunk[clean].any(), f"non-zero byte in clean free memory of element {start}"
    if live is not None:
        busy = {heap.base + s * GRAIN: size * GRAIN for s, size, st, _, _ in els if st == ELEM_BUSY}
        assert set(busy) == set(live), "busy elements differ from the live blocks"
        for p, n in live.items():
            assert busy[p] >= n
        free = sum(size for _, size, st, _, _ in els if st == ELEM_FREE) * GRAIN
        in_cache = sum(size for _, size, st, _, _ in els if st == ELEM_CACHED) * GRAIN
        assert free + in_cache + sum(busy.values()) == heap.size
        st = heap.stats()
        assert st["alloc_count"] == len(live)
        assert st["heap_allocsz_bytes"] == sum(busy.values())
        assert st["heap_freesz_bytes"] == free + in_cache
        assert st["cached_bytes"] == in_cache and st["cached_count"] == len(cached)
        assert st["free_count"] == sum(1 for x in els if x[2] == ELEM_FREE)
        assert st["greatest_free_size"] == max([x[1] for x in els if x[2] == ELEM_FREE],
                                               default=0) * GRAIN
    heap.validate(check_zero=True)
    return els


def snapshot(heap: Heap):
    return (heap.state.ctl.copy(), heap.state.elems[:heap.ngrains].copy(),
            heap.region.array.copy(), heap.state.cache.copy())


def assert_unchanged(heap: Heap, snap):
    ctl, elems, mem, cache = snap
    assert np.array_equal(heap.state.cache, cache)
    assert np.array_equal(heap.state.ctl, ctl)
    assert np.array_equal(heap.state.elems[:heap.ngrains], elems)
    assert np.array_equal(heap.region.array, mem)


@pytest.fixture(params=[False, True], ids=["zero-outside-lock", "zero-inside-lock"])
def zero_in_lock(request):
    return request.param
