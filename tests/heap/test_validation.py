"""The Heap facade validates every argument before a kernel runs: bad types and ranges raise
from the PktbufError hierarchy with the heap unchanged, and never compile new kernels."""
from __future__ import annotations

import numpy as np
import pytest

from pktbuf import InvalidArgument, InvalidHandle, OutOfMemory, PktbufError
from pktbuf.buf.heap.api import GRAIN, Heap
from pktbuf.shm import Region

from ..sigs import run_battery_without_new_specialisations
from .conftest import assert_unchanged, check_invariants, snapshot

GARBAGE_SIZES = [(0, InvalidArgument), (-1, InvalidArgument), (1.5, InvalidArgument),
                 ("8", InvalidArgument), (None, InvalidArgument), (True, InvalidArgument),
                 (np.float64(8), InvalidArgument), (2 ** 63, OutOfMemory),
                 (2 ** 64, OutOfMemory), (2 ** 200, OutOfMemory)]
GARBAGE_ALIGNS = [(-64, InvalidArgument), (96, InvalidArgument), (1.0, InvalidArgument),
                  ("64", InvalidArgument), (False, InvalidArgument), (2 ** 63, OutOfMemory),
                  (2 ** 70, OutOfMemory)]
GARBAGE_PTRS = [(-1, InvalidHandle), (1.0, InvalidHandle), ("0", InvalidHandle),
                (None, InvalidHandle), (True, InvalidHandle), (2 ** 64, InvalidHandle),
                (12345, InvalidHandle)]


@pytest.fixture
def heap():
    h = Heap(GRAIN * 200)
    yield h
    h.close()


def refused(heap, fn, exc):
    snap = snapshot(heap)
    with pytest.raises(exc) as ei:
        fn()
    assert isinstance(ei.value, PktbufError)
    assert_unchanged(heap, snap)


def battery(heap):
    p = heap.malloc(100)
    live = {p: 100}
    for bad, exc in GARBAGE_SIZES:
        for call in (heap.malloc, heap.zmalloc, lambda s: heap.calloc(1, s),
                     lambda s: heap.calloc(s, 1), lambda s: heap.realloc(p, s)):
            refused(heap, lambda: call(bad), exc)
    for bad, exc in GARBAGE_ALIGNS:
        for call in (lambda a: heap.malloc(8, a), lambda a: heap.zmalloc(8, a),
                     lambda a: heap.calloc(2, 4, a), lambda a: heap.realloc(p, 8, a)):
            refused(heap, lambda: call(bad), exc)
    for bad, exc in GARBAGE_PTRS:
        for call in (heap.free, heap.usable_size, heap.view, lambda q: heap.realloc(q, 8)):
            refused(heap, lambda: call(bad), exc)
        if not isinstance(bad, int) or isinstance(bad, bool):
            refused(heap, lambda: heap.offset(bad), exc)
    for bad in (-2, 128, 1.5, "0", True):
        for call in (lambda: heap.malloc(8, lcore=bad), lambda: heap.zmalloc(8, lcore=bad),
                     lambda: heap.calloc(2, 4, lcore=bad), lambda: heap.free(p, lcore=bad),
                     lambda: heap.flush_cache(bad)):
            refused(heap, call, InvalidArgument)
    refused(heap, lambda: heap.calloc(2 ** 40, 2 ** 40), OutOfMemory)
    refused(heap, lambda: heap.view(p, 1.0), InvalidArgument)
    refused(heap, lambda: heap.view(p, 10 ** 6), InvalidArgument)
    refused(heap, lambda: heap.validate(check_zero="yes"), InvalidArgument)
    check_invariants(heap, live)
    heap.free(p)


def test_garbage_arguments(heap):
    battery(heap)
    check_invariants(heap, {})


def test_no_new_specialisations(heap):
    run_battery_without_new_specialisations(lambda: battery(heap))


def test_a_closed_heap_refuses_every_call():
    h = Heap(GRAIN * 10)
    p = h.malloc(10)
    h.close()
    for fn in (lambda: h.malloc(1), lambda: h.zmalloc(1), lambda: h.calloc(1, 1),
               lambda: h.realloc(p, 1), lambda: h.free(p), lambda: h.usable_size(p),
               lambda: h.view(p), lambda: h.stats(), lambda: h.validate(), lambda: h.base):
        with pytest.raises(InvalidArgument):
            fn()
    h.close()                                    # twice is fine
    assert repr(h) == "Heap(closed)"


@pytest.mark.parametrize("kw", [dict(size=1.5), dict(size="64"), dict(size=None),
                                dict(size=64, zero_in_lock="no"), dict(size=64, name=3),
                                dict(size=64, dirty=2), dict(region="r"),
                                dict(size=2 ** 80)])
def test_bad_construction(kw):
    with pytest.raises(PktbufError):
        Heap(**kw)


def test_a_closed_region_is_refused():
    r = Region(GRAIN * 4)
    r.close()
    with pytest.raises(InvalidArgument):
        Heap(region=r)
