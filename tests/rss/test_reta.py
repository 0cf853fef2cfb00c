"""The redirection table and the Rss facade's argument checks."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pktbuf import InvalidArgument, Rss
from pktbuf.errors import E_INVAL
from pktbuf.net.rss.reta import reta_init, reta_update
from pktbuf.net.rss.thash import DEFAULT_RSS_KEY, SYMMETRIC_RSS_KEY


def test_default_fill_is_round_robin_and_low_bits_index():
    r = Rss(queues=3, reta_size=64)
    assert list(r.reta_query()) == [i % 3 for i in range(64)]
    assert r.queue(0x51ccc178) == (0x51ccc178 & 63) % 3
    assert Rss(queues=4).queue(0x51ccc178) == 0          # entry 120 of 128
    assert r.queue(0xFFFFFFFF) == 63 % 3


@pytest.mark.parametrize("symmetric", [False, True])
def test_distribution_is_even(symmetric):
    rng = np.random.default_rng(11)
    r = Rss(symmetric=symmetric, queues=4)
    counts = np.zeros(4, int)
    for _ in range(4000):
        counts[r.queue(r.hash(rng.bytes(12)))] += 1
    # 1000 expected per queue; 5 sigma of a binomial(4000, 1/4) is ~137
    assert counts.min() > 850 and counts.max() < 1150, counts


def test_reta_update_masked_and_all_or_nothing():
    r = Rss(queues=4, reta_size=128)
    entries = np.full(128, 3)
    r.reta_update(entries, mask=[0, 1 << 63])            # entry 127 only
    q = r.reta_query()
    assert q[127] == 3 and list(q[:127]) == [i % 4 for i in range(127)]
    r.reta_update(np.zeros(128, int))
    assert not r.reta_query().any()
    before = r.reta_query()
    bad = np.zeros(128, int)
    bad[5] = 4                                            # no queue 4
    with pytest.raises(InvalidArgument):
        r.reta_update(bad)
    assert (r.reta_query() == before).all()
    r.reta_update(bad, mask=[~(1 << 5) & (2 ** 64 - 1), 2 ** 64 - 1])   # 5 unselected: fine
    small = Rss(queues=2, reta_size=8)
    small.reta_update([1] * 8)
    assert list(small.reta_query()) == [1] * 8
    for args in (([0] * 127,), ([0] * 128, [0]), ([0] * 128, [0, 0, 0]), ([-1] * 128,),
                 ([0] * 128, [0, 2 ** 64])):
        with pytest.raises(InvalidArgument):
            r.reta_update(*args)


def test_reta_kernels_refuse_bad_sizes():
    assert reta_init(np.zeros(100, np.uint16), 4) == E_INVAL
    assert reta_init(np.zeros(64, np.uint16), 0) == E_INVAL
    reta = np.zeros(64, np.uint16)
    assert reta_update(reta, np.zeros(2, np.uint64), np.zeros(64, np.uint16), 1) == E_INVAL
    assert reta_update(reta, np.ones(1, np.uint64), np.ones(64, np.uint16), 1) == E_INVAL
    assert reta_update(reta, np.ones(1, np.uint64), np.ones(64, np.uint16), 2) == 0
    assert reta[0] == 1 and not reta[1:].any()


@given(st.binary(min_size=4, max_size=4), st.binary(min_size=4, max_size=4),
       st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_symmetric_option_maps_both_directions_alike(s, d, sp, dp):
    sym = Rss(symmetric=True, queues=8)
    p = lambda a, b: a.to_bytes(2, "big") + b.to_bytes(2, "big")   # noqa: E731
    assert sym.hash(s + d + p(sp, dp)) == sym.hash(d + s + p(dp, sp))
    assert sym.hash(s + d) == sym.hash(d + s)


@given(st.binary(min_size=16, max_size=16), st.binary(min_size=16, max_size=16),
       st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_symmetric_option_ipv6(s, d, sp, dp):
    sym = Rss(symmetric=True)
    p = lambda a, b: a.to_bytes(2, "big") + b.to_bytes(2, "big")   # noqa: E731
    assert sym.hash(s + d + p(sp, dp)) == sym.hash(d + s + p(dp, sp))


def test_facade_arguments():
    assert Rss().key == DEFAULT_RSS_KEY and Rss(symmetric=True).key == SYMMETRIC_RSS_KEY
    assert Rss(key=SYMMETRIC_RSS_KEY).symmetric
    assert Rss(key=bytes(52)).key == bytes(52)               # i40e's key size
    assert Rss(key=np.zeros(40, np.uint8)).hash(b"\xff" * 12) == 0
    bad = [dict(key=bytes(39)), dict(key=bytes(42)), dict(key=bytes(256)), dict(key="x" * 40),
           dict(key=DEFAULT_RSS_KEY, symmetric=True), dict(reta_size=100), dict(reta_size=0),
           dict(reta_size=1 << 17), dict(queues=0), dict(queues=1 << 16), dict(queues=1.0),
           dict(symmetric=2), dict(l4="yes"), dict(key=np.zeros(40, np.int8))]
    for kw in bad:
        with pytest.raises(InvalidArgument):
            Rss(**kw)
    r = Rss()
    for v in (bytes(37), "abc", 5):
        with pytest.raises(InvalidArgument):
            r.hash(v)
    for h in (-1, 1 << 32, 1.5):
        with pytest.raises(InvalidArgument):
            r.queue(h)
    with pytest.raises(InvalidArgument):
        r.hash_frame("not bytes")
    assert r.hash(b"") == 0
    assert "default" in repr(r) and "symmetric" in repr(Rss(symmetric=True))
