"""Mempool: the DPDK 26.07 cache algorithm step by step, all-or-nothing get, stats, audit."""
import numpy as np
import pytest

from pktbuf import (Busy, DoubleFree, InvalidArgument, InvalidHandle, LCORE_ANY, Mempool,
                    PktbufError, PoolExhausted)
from pktbuf.buf.mempool import kernels as MK

from .snap import assert_same, pool_snapshot


def ring_count(pool):
    return int(MK.ring_count_at(pool.domain.state.ring_hdr, pool.id * 96))


def test_cache_algorithm_step_by_step(domain):
    p = Mempool(1024, 64, cache_size=64, domain=domain)          # half = 32
    a = p.get_bulk(10, lcore=0)                                  # refill 32, hand out 10
    assert p.cache_count(0) == 22 and ring_count(p) == 1024 - 32
    p.put_bulk(a, lcore=0)                                       # fits
    assert p.cache_count(0) == 32
    b = p.get_bulk(40, lcore=1)                                  # another lcore: 40 > 32 -> direct
    assert p.cache_count(1) == 0
    p.put_bulk(b, lcore=0)                                       # 72 > 64 and 40 > 32: bypass
    assert p.cache_count(0) == 32 and ring_count(p) == 1024 - 32
    c = p.get_bulk(30, lcore=LCORE_ANY)
    p.put_bulk(c, lcore=0)                                       # 62 fits
    assert p.cache_count(0) == 62
    bottom = p.domain.cache_objs_view()[p.id, 0, :32].copy()
    top = p.domain.cache_objs_view()[p.id, 0, 32:62].copy()
    d = p.get_bulk(10, lcore=LCORE_ANY)
    before = ring_count(p)
    p.put_bulk(d, lcore=0)                                       # 72 > 64, 10 <= 32: flush bottom half
    assert p.cache_count(0) == 40 and ring_count(p) == before + 32
    objs = p.domain.cache_objs_view()[p.id, 0]
    assert np.array_equal(objs[:30], top), "the hot part slid down"
    assert np.array_equal(objs[30:40], d)
    flushed = p.domain.state.ring_slots[p._ring_base:p._ring_base + p._ring_size]
    assert set(bottom) <= set(flushed), "the coldest half went to the ring"
    e = p.get_bulk(50, lcore=0)                                  # drain 40, refill 32, hand 10
    assert p.cache_count(0) == 22
    f = p.get_bulk(100, lcore=0)                                 # drain 22, 78 > 32: direct
    assert p.cache_count(0) == 0
    p.put_bulk(np.concatenate([e, f]), lcore=LCORE_ANY)
    assert p.avail_count == 1024 and p.audit() == 1024


def test_hottest_object_goes_out_first(domain):
    p = Mempool(256, 16, cache_size=32, domain=domain)
    a = p.get_bulk(3, lcore=0)
    p.put_bulk(a, lcore=0)
    assert p.get(lcore=0) == a[-1]


def test_failed_get_rolls_back(domain):
    p = Mempool(100, 16, cache_size=64, domain=domain)
    held = p.get_bulk(90, lcore=LCORE_ANY)
    p.put_bulk(held[:5], lcore=0)
    assert p.cache_count(0) == 5 and ring_count(p) == 10
    snap = pool_snapshot(p)
    fails = p.stats()["get_fail_bulk"]
    with pytest.raises(PoolExhausted):
        p.get_bulk(20, lcore=0)       # 5 cached + 10 in ring < 20
    assert_same(snap, pool_snapshot(p))
    assert p.stats()["get_fail_bulk"] == fails + 1
    got = p.get_bulk(15, lcore=0)     # exactly what is there
    assert len(set(got.tolist())) == 15 and p.avail_count == 0
    p.put_bulk(np.concatenate([got, held[5:]]))
    assert p.audit() == 100


def test_cacheless_pool_and_lcore_any(domain):
    p = Mempool(64, 8, cache_size=0, domain=domain)
    a = p.get_bulk(64, lcore=3)
    assert p.avail_count == 0 and p.cache_count(3) == 0
    with pytest.raises(PoolExhausted):
        p.get(lcore=3)
    p.put_bulk(a, lcore=3)
    assert ring_count(p) == 64
    s = p.stats()
    assert s["get_common_pool_objs"] == 64 and s["put_common_pool_objs"] >= 64


def test_stats_count_bulk_calls_and_objects(domain):
    p = Mempool(512, 8, cache_size=128, domain=domain)
    base = p.stats()
    for _ in range(5):
        p.put_bulk(p.get_bulk(7, lcore=2), lcore=2)
    s = p.stats()
    assert s["get_success_bulk"] - base["get_success_bulk"] == 5
    assert s["get_success_objs"] - base["get_success_objs"] == 35
    assert s["put_bulk"] - base["put_bulk"] == 5 and s["put_objs"] - base["put_objs"] == 35


def test_objects_have_their_own_memory(domain):
    p = Mempool(10, 100, domain=domain)
    assert p.elt_size == 128
    a, b = p.get(), p.get()
    p.obj_view(a)[:] = 1
    p.obj_view(b)[:] = 2
    assert p.obj_view(a).sum() == 128 and p.obj_view(b).sum() == 256
    with pytest.raises(InvalidHandle):
        p.obj_view(10_000)


def test_put_validation_leaves_pool_unchanged(domain):
    p = Mempool(32, 8, cache_size=8, domain=domain)
    q = Mempool(32, 8, domain=domain)
    a = p.get_bulk(4, lcore=0)
    snap = pool_snapshot(p)
    for bad, exc in ((np.array([a[0], q.get()]), InvalidHandle),     # foreign object
                     (np.array([a[0], a[0]]), DoubleFree),          # twice in one call
                     (np.array([a[1], 10 ** 6]), InvalidHandle),
                     (np.array([-1]), InvalidHandle)):
        with pytest.raises(exc):
            p.put_bulk(bad, lcore=0)
        assert_same(snap, pool_snapshot(p))
    p.put_bulk(a, lcore=0)
    with pytest.raises(DoubleFree):
        p.put(a[0], lcore=0)
    assert p.audit() == 32


@pytest.mark.parametrize("kw", [dict(n=0, elt_size=8), dict(n=-1, elt_size=8),
                                dict(n=10, elt_size=8, cache_size=11),
                                dict(n=1000, elt_size=8, cache_size=513),
                                dict(n=10, elt_size=0), dict(n=10, elt_size=8, cache_size=-1)])
def test_bad_creation_arguments(domain, kw):
    with pytest.raises(InvalidArgument):
        Mempool(domain=domain, **kw)
    assert domain.pools == []


@pytest.mark.parametrize("n,exc", [(-1, InvalidArgument), (1.0, InvalidArgument),
                                   (True, InvalidArgument), (33, PoolExhausted),
                                   (2 ** 40, PoolExhausted)])
def test_bad_counts(domain, n, exc):
    """A negative or non-integer count is a bad argument; more than the pool holds is
    exhaustion (DPDK: -ENOENT), refused before anything is allocated."""
    p = Mempool(32, 8, domain=domain)
    snap = pool_snapshot(p)
    with pytest.raises(exc):
        p.get_bulk(n)
    assert_same(snap, pool_snapshot(p))


def test_kernel_rejects_counts_outside_the_array(domain):
    p = Mempool(32, 8, cache_size=8, domain=domain)
    out = np.empty(4, np.int32)
    assert MK.mempool_get_bulk(domain.state, p.id, 0, out, 5) == -22
    assert MK.mempool_get_bulk(domain.state, p.id, 0, out, -1) == -22
    assert MK.mempool_put_bulk(domain.state, p.id, 0, out, 5) == -22
    assert p.avail_count == 32


def test_close_refuses_while_objects_are_out(domain):
    p = Mempool(16, 8, cache_size=4, domain=domain)
    a = p.get_bulk(3, lcore=0)
    with pytest.raises(Busy):
        p.close()
    p.put_bulk(a, lcore=0)
    pid = p.id
    p.close()
    assert p.closed and domain.pools == []
    with pytest.raises(InvalidHandle):
        domain.pool_of(int(a[0]))
    q = Mempool(16, 8, domain=domain)
    assert q.id == pid, "pool ids are reused"


def test_audit_detects_corruption(domain):
    p = Mempool(64, 8, cache_size=16, domain=domain)
    a = p.get_bulk(8, lcore=0)
    p.put_bulk(a[:4], lcore=0)
    assert p.audit() == 60
    cache = p.domain.cache_objs_view()[p.id, 0]
    n = p.cache_count(0)
    saved = cache[n - 1]
    cache[n - 1] = cache[0]          # the same object twice in the cache
    with pytest.raises(PktbufError, match="audit"):
        p.audit()
    cache[n - 1] = saved
    p.domain.state.mb[int(a[5])]["state"] = 0   # a handed-out object marked free
    with pytest.raises(PktbufError, match="audit"):
        p.audit()
