"""The return path (``return_burst`` / ``returned``: workers hand packets back to the
distributing side, a pipeline's way to its Tx stage), against the naive model."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf import Distributor
from pktbuf.net.distrib import naive
from pktbuf.errors import InvalidArgument


@pytest.fixture
def pool(domain):
    p = pktbuf.PktmbufPool(4096, 0, domain=domain)
    yield p
    p.close(force=True)


@settings(max_examples=60, deadline=None)
@given(workers=st.integers(1, 6), ring_size=st.sampled_from([2, 4, 16]),
       steps=st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.integers(0, 20)),
                      min_size=1, max_size=30))
def test_return_path_matches_model(domain, workers, ring_size, steps):
    """Each step either returns up to ``k`` fresh packets from worker ``w`` (a full return
    ring takes what fits) or collects up to ``k``: same packets, same order, same next
    ring as the model; every packet back in the pool at the end."""
    p = pktbuf.PktmbufPool(4096, 0, domain=domain)
    dist = Distributor(p, workers, ring_size=ring_size)
    queues = [[] for _ in range(workers)]
    start = 0
    try:
        for is_return, w, k in steps:
            w %= workers
            if is_return:
                hs = p.alloc_bulk(k).copy() if k else \
                    np.zeros(0, np.int32)
                took = dist.return_burst(w, hs)
                room = ring_size - 1 - len(queues[w])
                assert took == min(k, room)
                queues[w] += list(map(int, hs[:took]))
                if took < k:
                    p.free_bulk(hs[took:])
            else:
                got = list(map(int, dist.returned(k)))
                want, start = naive.returned(queues, start, k)
                assert got == want
                p.free_bulk(np.array(got, np.int32))
        s = dist.stats()
        assert [x["returned"] - x["collected"] for x in s] == [len(q) for q in queues]
        assert dist.drain() == sum(len(q) for q in queues)
        assert p.audit() == p.n
    finally:
        dist.close()
        p.close(force=True)


def test_returns_count_as_done(pool):
    dist = Distributor(pool, 2, ring_size=64)
    hs = pool.alloc_bulk(10).copy()
    assert dist.return_burst(1, hs) == 10
    s = dist.stats()[1]
    assert (s["returned"], s["done"], s["collected"]) == (10, 10, 0)
    got = dist.returned(64)
    assert sorted(got) == sorted(hs)
    assert dist.stats()[1]["collected"] == 10
    pool.free_bulk(got)
    dist.close()
    assert pool.audit() == pool.n


def test_return_refuses_bad_input_and_changes_nothing(pool):
    dist = Distributor(pool, 2, ring_size=64)
    hs = pool.alloc_bulk(4).copy()
    before = [dict(x) for x in dist.stats()]
    for bad in ([hs[0], -1], [hs[0], 1 << 30], "x"):
        with pytest.raises((InvalidArgument, pktbuf.PktbufError)):
            dist.return_burst(0, bad)
    with pytest.raises(InvalidArgument):
        dist.return_burst(2, hs)
    with pytest.raises(InvalidArgument):
        dist.returned(-1)
    assert dist.stats() == before
    pool.free_bulk(hs)
    dist.close()
    assert pool.audit() == pool.n
