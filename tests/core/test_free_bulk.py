"""Run-grouped pktmbuf_free_bulk against DPDK's staged algorithm (the reference).

On arrays without NULL or still-referenced entries both make the same bulk puts, so two
domains built identically end in identical states, object for object.  On any input both free
exactly the same mbufs: same pool counts, same set of free objects, same reference counts.
"""
import numpy as np
import pytest
from hypothesis import example, given
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
        close_pools(pools)
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


# -- pools alternating: runs of one, freed through a cursor per pool (free._free_alternating) --

def full_state(pool):
    """pool_snapshot plus the pool's statistics rows (every lcore and the shared row)."""
    s = pool_snapshot(pool)
    s["desc"]["buf_addr"] = 0          # the two domains' regions sit at other addresses
    s["stats"] = pool.domain.stats_view()[pool.id].copy()
    return s


def build3(cache, n=512):
    d = Domain(max_objects=1 << 14, max_ring_slots=1 << 15)
    return d, [PktmbufPool(n, cache, 256, domain=d) for _ in range(3)]


def close_pools(pools):
    """Close the pools of one example (their memory and file descriptors go now, not at some
    later garbage collection: hypothesis runs hundreds of examples in one process)."""
    for p in pools:
        p.close(force=True)


@st.composite
def pool_order(draw):
    """Which pool each array entry is from: blocks of pools alternating (p, q, p, q, ...),
    runs of one pool, or any order."""
    order = []
    for kind, p, q, k in draw(st.lists(st.tuples(
            st.sampled_from(["alt", "run", "any"]), st.integers(0, 2), st.integers(1, 2),
            st.integers(1, 60)), max_size=6)):
        if kind == "alt":
            order += [p if j % 2 == 0 else (p + q) % 3 for j in range(k)]
        elif kind == "run":
            order += [p] * k
        else:
            order += draw(st.lists(st.integers(0, 2), min_size=k, max_size=k))
    return order[:300]


@given(order=pool_order(),
       cache=st.sampled_from([0, 2, 3, 8, 32, 64]),
       warm=st.lists(st.integers(0, 40), min_size=3, max_size=3),
       lcore=st.sampled_from([0, 5, -1]))
@example(order=[0, 1] * 120, cache=8, warm=[0, 5, 0], lcore=0)       # flushes inside a stretch
@example(order=[0, 1] * 40 + [2] + [1, 0] * 40 + [0, 0, 1, 1] * 10, cache=3, warm=[3, 1, 2],
         lcore=5)
@example(order=[0, 2] * 100, cache=0, warm=[0, 0, 0], lcore=0)       # no cache: the ring
def test_identical_state_any_pool_order(order, cache, warm, lcore):
    """Clean arrays (direct single segments, each freed by the call) in any order of three
    pools -- alternating stretches, runs of several, a third pool breaking a stretch -- with
    caches that fill and flush inside a stretch: the run-grouped free leaves every cache, ring,
    descriptor and statistics counter exactly as DPDK's staged free."""
    states = []
    for staged in (True, False):
        d, pools = build3(cache)
        held = [list(p.alloc_bulk(250, lcore=0)) for p in pools]
        for p, h, w in zip(pools, held, warm):       # caches of different lengths to start
            p.free_bulk(np.array([h.pop() for _ in range(w)], np.int32), lcore=0)
        arr = np.array([held[k].pop() for k in order], np.int32)
        pools[0].free_bulk(arr, lcore=lcore, staged=staged)
        states.append([full_state(p) for p in pools])
        for p in pools:
            assert p.audit() == p.avail_count
        close_pools(pools)
    for s_staged, s_run in zip(*states):
        for k in s_staged:
            assert np.array_equal(s_staged[k], s_run[k]), k


def _alternating_mixed(pools, kinds):
    """An A, B, A, B array where some entries are something else: NULL, an mbuf with a second
    reference, a clone (indirect), a 2-segment chain.  Returns (array, handles kept)."""
    p0, p1 = pools
    arr, keep = [], []
    for i, kind in enumerate(kinds):
        p, q = (p0, p1) if i % 2 == 0 else (p1, p0)
        if kind == "plain":
            arr.append(int(p.alloc_bulk(1, lcore=0)[0]))
        elif kind == "null":
            arr.append(-1)
        elif kind == "shared":
            m = p.alloc(lcore=0)
            m.refcnt_update(1)
            arr.append(m.handle)
            keep.append(m.handle)
        elif kind == "clone":
            m = q.alloc(lcore=0)
            m.append(10)
            arr.append(m.clone(p, lcore=0).handle)
            keep.append(m.handle)
        else:
            head = p.alloc(lcore=0)
            head.chain(q.alloc(lcore=0))
            arr.append(head.handle)
    return np.array(arr, np.int32), keep


@pytest.mark.parametrize("kinds", [
    ["plain"] * 9 + ["shared"] + ["plain"] * 9,
    ["plain"] * 6 + ["clone"] + ["plain"] * 6 + ["clone"] + ["plain"] * 3,
    ["plain"] * 7 + ["null"] + ["plain"] * 7 + ["null", "null"] + ["plain"] * 4,
    ["plain"] * 10 + ["chain"] + ["plain"] * 10,
    ["shared", "plain", "plain", "shared", "plain", "clone", "plain", "plain", "plain",
     "null", "plain", "plain", "chain", "plain"],
])
def test_alternating_with_shared_indirect_null_and_chains(kinds):
    """Alternating stretches broken by an mbuf that is not a plain last reference: both
    algorithms free exactly the same mbufs, refcnts agree, every pool audits, and the held
    references free the rest."""
    results = []
    for staged in (True, False):
        d, pools = build(n=256, cache=8)
        arr, keep = _alternating_mixed(pools, kinds)
        copy = arr.copy()
        pools[0].free_bulk(arr, lcore=0, staged=staged)
        assert np.array_equal(arr, copy)
        results.append(([p.avail_count for p in pools], [free_set(p) for p in pools],
                         d.state.mb["refcnt"][:1024].copy()))
        for p in pools:
            assert p.audit() == p.avail_count
        pools[0].free_bulk(np.array(keep, np.int32), lcore=0)
        assert [p.avail_count for p in pools] == [256, 256]
    (c1, f1, r1), (c2, f2, r2) = results
    assert c1 == c2 and f1 == f2 and np.array_equal(r1, r2)


def test_alternating_counts_every_put():
    """A, B, A, B of 2 x 40 through caches of 8: every mbuf is one put of one object in the
    counters (the cursor's deferred hits plus the flushes' own), and the flushes reached the
    ring."""
    d, (p0, p1) = build(n=256, cache=8)
    a = p0.alloc_bulk(40, lcore=0)
    b = p1.alloc_bulk(40, lcore=0)
    before = [p.stats() for p in (p0, p1)]
    p0.free_bulk(np.ravel(np.column_stack([a, b])), lcore=0)
    for p, s0 in zip((p0, p1), before):
        s = p.stats()
        assert s["put_bulk"] - s0["put_bulk"] == 40
        assert s["put_objs"] - s0["put_objs"] == 40
        assert s["put_common_pool_objs"] - s0["put_common_pool_objs"] > 0
        assert p.avail_count == 256 and p.audit() == 256


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3)), min_size=1, max_size=60),
       st.sampled_from([0, 16, 64]))
def test_identical_state_from_the_first_chain(packets, cache):
    """From its first chained packet the run-grouped free walks segments with DPDK's
    algorithm (its own loop, _free_chains): on an array that starts with a chain, of chains
    and single segments of either pool, some shared, both frees make the same puts -- caches,
    rings and descriptors end identical, and every reference held elsewhere survives."""
    states = []
    for staged in (True, False):
        d, pools = build(cache=cache)
        arr, keep = [], []
        for k, (nseg, kind) in enumerate([(max(2, packets[0][0]), 0)] + packets):
            head = pools[kind & 1].alloc(lcore=0)
            for s in range(1, nseg):
                head.chain(pools[(kind + s) & 1].alloc(lcore=0))
            if kind == 3 and k > 0:
                head.refcnt_update(1)        # held elsewhere too: survives this free
                keep.append(head)
            arr.append(int(head))
        pools[0].free_bulk(np.array(arr, np.int32), lcore=0, staged=staged)
        for h in keep:
            assert h.refcnt == 1
        snaps = [pool_snapshot(p) for p in pools]
        for s in snaps:
            s["desc"]["buf_addr"] = 0
        states.append(snaps)
        for h in keep:
            h.free()
    for s_staged, s_run in zip(*states):
        for k in s_staged:
            assert np.array_equal(s_staged[k], s_run[k]), k
