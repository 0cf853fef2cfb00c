"""Run-grouped pktmbuf_free_bulk against DPDK's staged algorithm (the reference).

On arrays without NULL or still-referenced entries both make the same bulk puts, so two
domains built identically end in identical states, object for object.  On any input both free
exactly the same mbufs: same pool counts, same set of free objects, same reference counts.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pktbuf import Domain, PktmbufPool

from .snap import pool_snapshot


def build(n_pools=2, n=512, cache=64):
    d = Domain(max_objects=1 << 14, max_ring_slots=1 << 15)
    pools = [PktmbufPool(n, cache, 256, domain=d) for _ in range(n_pools)]
    return d, pools


def free_set(pool):
    st = pool.domain.state.mb[pool.obj_base:pool.obj_base + pool.n]
    return set(np.nonzero(st["state"] == 0)[0].tolist())


@pytest.mark.parametrize("layout", ["flat", "grouped", "alternating", "flat_long"])
def test_identical_state_on_clean_arrays(layout):
    states = []
    for staged in (True, False):
        d, (p0, p1) = build()
        a0 = p0.alloc_bulk(200, lcore=0)
        a1 = p1.alloc_bulk(200, lcore=0)
        if layout == "flat":
            arr = a0[:150]
        elif layout == "flat_long":
            arr = np.concatenate([a0, p0.alloc_bulk(250, lcore=0)])
        elif layout == "grouped":
            arr = np.concatenate([a0[:100], a1[:100]])
        else:
            arr = np.ravel(np.column_stack([a0[:100], a1[:100]]))
        p0.free_bulk(arr, lcore=0, staged=staged)
        snaps = [pool_snapshot(p) for p in (p0, p1)]
        for s in snaps:
            s["desc"]["buf_addr"] = 0      # the two domains' regions sit at other addresses
        states.append(snaps)
    for s_staged, s_run in zip(*states):
        for k in s_staged:
            assert np.array_equal(s_staged[k], s_run[k]), k


@st.composite
def mixed_case(draw):
    """A recipe for an array mixing NULLs, two pools, shared mbufs, clones and chains."""
    return draw(st.lists(st.tuples(
        st.sampled_from(["p0", "p1", "null", "shared", "clone", "chain"]),
        st.integers(2, 4)), min_size=0, max_size=60))


def realise(recipe, pools, rng_seed):
    p0, p1 = pools
    arr, keep = [], []
    for kind, k in recipe:
        if kind == "null":
            arr.append(-1)
        elif kind in ("p0", "p1"):
            arr.append(int((p0 if kind == "p0" else p1).alloc_bulk(1, lcore=0)[0]))
        elif kind == "shared":
            m = p0.alloc(lcore=0)
            m.refcnt_update(1)                  # the array frees one of two references
            arr.append(m.handle)
            keep.append(m.handle)
        elif kind == "clone":
            m = p1.alloc(lcore=0)
            m.append(10)
            c = m.clone(p0, lcore=0)
            arr.append(c.handle)                 # free the clone; keep the original
            keep.append(m.handle)
        else:
            head = p0.alloc(lcore=0)
            for _ in range(k - 1):
                head.chain(p1.alloc(lcore=0))
            arr.append(head.handle)
    return np.array(arr, np.int32), keep


@given(mixed_case())
def test_same_mbufs_freed_on_any_input(recipe):
    results = []
    for staged in (True, False):
        d, pools = build(n=256, cache=32)
        arr, keep = realise(recipe, pools, 0)
        pools[0].free_bulk(arr, lcore=0, staged=staged)
        refc = d.state.mb["refcnt"][:1024].copy()
        results.append(([p.avail_count for p in pools], [free_set(p) for p in pools],
                        refc, keep))
        for p in pools:
            assert p.audit() == p.avail_count
        pools[0].free_bulk(np.array(keep, np.int32), lcore=0)
        assert [p.avail_count for p in pools] == [256, 256]
    (c1, f1, r1, _), (c2, f2, r2, _) = results
    assert c1 == c2 and f1 == f2 and np.array_equal(r1, r2)


def test_exact_counts_nulls_shared_and_long_chain():
    d, (p0, p1) = build(n=256, cache=32)
    a = p0.alloc_bulk(8, lcore=0)
    shared = p0.alloc(lcore=0)
    shared.refcnt_update(1)
    arr = np.array([-1, a[0], a[1], -1, shared.handle, a[2], -1, -1], np.int32)
    p0.free_bulk(arr, lcore=0)
    assert p0.avail_count == 256 - 5 - 1 and shared.refcnt == 1
    # a 128-segment chain across both pools, from the middle of an array
    head = p0.alloc(lcore=0)
    for i in range(127):
        head.chain((p1 if i % 2 else p0).alloc(lcore=0))
    arr = np.array([a[3], head.handle, a[4], -1, shared.handle, a[5]], np.int32)
    p0.free_bulk(arr, lcore=0)
    assert p0.avail_count == 256 - 2 and p1.avail_count == 256
    p0.free_bulk(a[6:], lcore=0)
    assert p0.avail_count == 256 and p0.audit() == 256 and p1.audit() == 256


def test_caller_array_is_not_modified():
    d, (p0, p1) = build()
    arr = np.concatenate([p0.alloc_bulk(40, lcore=0), [-1], p1.alloc_bulk(40, lcore=0)]).astype(np.int32)
    copy = arr.copy()
    p0.free_bulk(arr, lcore=0)
    assert np.array_equal(arr, copy)
