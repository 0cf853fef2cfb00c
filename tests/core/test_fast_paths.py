"""The inlined fast paths against the general ones they stand for.

* ``mempool_get`` / ``mempool_put`` (one object, the cache hit written out) leave caches, rings
  and statistics exactly as ``mempool_get_bulk`` / ``mempool_put_bulk`` of 1 do, across
  refills, flushes, cacheless pools and ``LCORE_ANY``;
* ``pktmbuf_alloc`` / ``pktmbuf_free`` one at a time end in the state of the bulk calls;
* the facade's O(n) check of ``free_bulk`` (``entry._free_check_simple``) gives the error the
  full check gives, for the first bad entry, and leaves every pool as it was.
"""
import random

import numpy as np
import pytest

from pktbuf import (
    LCORE_ANY,
    DoubleFree,
    InvalidHandle,
    Mempool,
    PktmbufPool,
    SanityCheckError,
)
from pktbuf.buf.domain import entry as E
from pktbuf.buf.domain.domain import Domain
from pktbuf.buf.mbuf import free as FR
from pktbuf.buf.mbuf import raw as RAW
from pktbuf.buf.mempool import kernels as MK

from .snap import assert_same, pool_snapshot


def _state(p):
    s = pool_snapshot(p)
    s["stats"] = p.domain.stats_view()[p.id].copy()
    s.pop("data")
    return s


@pytest.mark.parametrize("cache", [0, 1, 8, 64])
@pytest.mark.parametrize("lcore", [0, 5, LCORE_ANY])
def test_single_object_get_put_is_bulk_of_one(cache, lcore):
    da, db = Domain(max_objects=4096, max_ring_slots=8192), Domain(max_objects=4096, max_ring_slots=8192)
    a, b = Mempool(200, 64, cache, domain=da), Mempool(200, 64, cache, domain=db)
    one = np.empty(1, np.int32)
    rng = random.Random(cache * 131 + lcore)
    held_a, held_b = [], []
    for _ in range(3000):
        if held_a and (len(held_a) == 200 or rng.random() < 0.45):
            k = rng.randrange(len(held_a)) if rng.random() < 0.2 else len(held_a) - 1
            ha, hb = held_a.pop(k), held_b.pop(k)
            assert MK.mempool_put(da.state, a.id, lcore, ha) == 0
            one[0] = hb
            assert MK.mempool_put_bulk(db.state, b.id, lcore, one, 1) == 0
        else:
            ha = MK.mempool_get(da.state, a.id, lcore)
            rc = MK.mempool_get_bulk(db.state, b.id, lcore, one, 1)
            assert (ha < 0) == (rc < 0)
            if ha >= 0:
                assert ha - a.obj_base == one[0] - b.obj_base
                held_a.append(ha)
                held_b.append(int(one[0]))
        sa, sb = _state(a), _state(b)
        for k in ("clen", "stats"):
            assert np.array_equal(sa[k], sb[k]), k
    assert a.obj_base == b.obj_base            # two fresh domains: the same handles
    sa, sb = _state(a), _state(b)
    for k in ("slots", "cobj", "hdr"):
        assert np.array_equal(sa[k], sb[k]), k


def test_single_mbuf_alloc_free_is_bulk_of_one():
    da, db = Domain(max_objects=4096, max_ring_slots=8192), Domain(max_objects=4096, max_ring_slots=8192)
    a, b = PktmbufPool(300, 32, 512, domain=da), PktmbufPool(300, 32, 512, domain=db)
    one = np.empty(1, np.int32)
    rng = random.Random(7)
    held_a, held_b = [], []
    for _ in range(4000):
        if held_a and (len(held_a) == 300 or rng.random() < 0.5):
            k = rng.randrange(len(held_a))
            assert FR.pktmbuf_free(da.state, 0, held_a.pop(k)) == 0
            one[0] = held_b.pop(k)
            assert FR.pktmbuf_free_bulk(db.state, 0, one, 1) == 0
        else:
            h = RAW.pktmbuf_alloc(da.state, a.id, 0)
            rc = RAW.pktmbuf_alloc_bulk(db.state, b.id, 0, one, 1)
            assert (h < 0) == (rc < 0)
            if h >= 0:
                held_a.append(h)
                held_b.append(int(one[0]))
                assert h - a.obj_base == one[0] - b.obj_base
    sa, sb = _state(a), _state(b)
    for k in ("clen", "stats"):
        assert np.array_equal(sa[k], sb[k]), k
    assert np.array_equal(sa["desc"][["state", "refcnt", "nb_segs", "next", "data_off",
                                      "pkt_len", "port"]],
                          sb["desc"][["state", "refcnt", "nb_segs", "next", "data_off",
                                      "pkt_len", "port"]])


def _full_check_error(dom, arr):
    """The code of the full check (pktmbuf_free_check), or 0."""
    scratch = np.empty(4096, np.int32)
    from pktbuf.buf.mbuf.check import pktmbuf_free_check
    return int(pktmbuf_free_check(dom.state, arr, arr.size, scratch))


def test_facade_free_check_gives_the_full_checks_error():
    dom = Domain(max_objects=4096, max_ring_slots=8192)
    p = PktmbufPool(64, 16, 512, domain=dom)
    q = PktmbufPool(64, 16, 512, domain=dom)
    plain = Mempool(8, 64, domain=dom)
    obj = plain.get()
    rng = random.Random(3)
    for trial in range(400):
        a = p.alloc_bulk(rng.randrange(2, 12), lcore=0)
        b = q.alloc_bulk(rng.randrange(1, 6), lcore=0)
        held = [int(x) for x in a] + [int(x) for x in b]
        freed = held.pop(rng.randrange(len(held)))
        dom.free_bulk(np.array([freed], np.int32), lcore=0)
        arr = list(held)
        rng.shuffle(arr)
        for _ in range(rng.randrange(0, 3)):
            arr.insert(rng.randrange(len(arr) + 1),
                       rng.choice([-1, freed, held[0], 10 ** 6, obj, -1]))
        if rng.random() < 0.2:                      # a corrupt buffer address
            victim = rng.choice(held)
            saved = int(dom.state.mb[victim]["buf_addr"])
            dom.state.mb[victim]["buf_addr"] = 8
        else:
            victim = None
        x = np.array(arr, np.int32)
        want = _full_check_error(dom, x)
        before = [pool_snapshot(s) for s in (p, q)]
        rc = int(E.py_free_bulk_simple(dom.state.address, 0, x, x.size))
        if rc == E.FREE_NEEDS_CHECK:
            for s, b0 in zip((p, q), before):
                assert_same(b0, pool_snapshot(s))
            rc = int(E.py_free_bulk(dom.state, 0, x, x.size, np.empty(4096, np.int32)))
        assert rc == want, (trial, arr)
        if rc < 0:
            for s, b0 in zip((p, q), before):
                assert_same(b0, pool_snapshot(s))
        if victim is not None:
            dom.state.mb[victim]["buf_addr"] = saved
        if rc < 0:
            dom.free_bulk(np.array(held, np.int32), lcore=0)
    assert p.audit() == 64 and q.audit() == 64


def test_facade_free_bulk_fast_path_errors():
    dom = Domain(max_objects=4096, max_ring_slots=8192)
    p = PktmbufPool(64, 16, 512, domain=dom)
    a = p.alloc_bulk(8)
    before = pool_snapshot(p)
    with pytest.raises(DoubleFree):
        p.free_bulk(np.array([a[0], a[1], a[0]], np.int32))        # listed twice
    with pytest.raises(InvalidHandle):
        p.free_bulk(np.array([a[0], 10 ** 6], np.int32))
    saved = int(dom.state.mb[a[2]]["buf_addr"])
    dom.state.mb[a[2]]["buf_addr"] = 8
    with pytest.raises(SanityCheckError):
        p.free_bulk(a[:4])
    dom.state.mb[a[2]]["buf_addr"] = saved
    assert_same(before, pool_snapshot(p))
    p.free_bulk(a)
    assert p.audit() == 64
