"""pktbuf's hashes bit for bit against DPDK's rte_softrss / rte_softrss_be, computed by a C
program built against the installed DPDK headers (conftest.py), over Hypothesis-made keys and
tuples and through DPDK's own tuple structs."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pktbuf.net.rss.thash import DEFAULT_RSS_KEY, SYMMETRIC_RSS_KEY, key_array, new_table
from pktbuf.net.rss.thash import softrss, thash_lut, thash_table_init

from .vectors import V4, V6, addr

keys = st.one_of(st.just(DEFAULT_RSS_KEY), st.just(SYMMETRIC_RSS_KEY),
                 st.binary(min_size=40, max_size=40))
port = st.integers(0, 0xFFFF)


def pk(key: bytes, data: bytes) -> int:
    t = new_table()
    assert thash_table_init(key_array(key), t) == 0
    a = np.frombuffer(data, np.uint8) if data else np.zeros(1, np.uint8)
    return int(thash_lut(t, a, len(data)))


@given(keys, st.lists(st.integers(1, 9).flatmap(
    lambda n: st.binary(min_size=4 * n, max_size=4 * n)), min_size=1, max_size=20))
def test_raw_tuples_match_dpdk(dpdk_thash, key, tuples):
    got = dpdk_thash.raw(key, tuples)
    for t, (c, c_be) in zip(tuples, got):
        assert c == c_be
        assert pk(key, t) == c
        w = np.frombuffer(t, ">u4").astype(np.uint32) if t else np.zeros(1, np.uint32)
        assert softrss(w, len(t) // 4, key_array(key)) == c


@given(keys, st.lists(st.tuples(st.binary(min_size=4, max_size=4),
                                st.binary(min_size=4, max_size=4), port, port),
                      min_size=1, max_size=20))
def test_ipv4_tuple_struct_matches_dpdk(dpdk_thash, key, flows):
    # rte_ipv4_tuple: addresses in host order, then dport and sport in that struct order
    got = dpdk_thash.v4(key, [(s, d, sp, dp) for s, d, sp, dp in flows])
    for (s, d, sp, dp), (c3, c4) in zip(flows, got):
        assert pk(key, s + d) == c3
        assert pk(key, s + d + sp.to_bytes(2, "big") + dp.to_bytes(2, "big")) == c4


@given(keys, st.lists(st.tuples(st.binary(min_size=16, max_size=16),
                                st.binary(min_size=16, max_size=16), port, port),
                      min_size=1, max_size=20))
def test_ipv6_tuple_struct_matches_dpdk(dpdk_thash, key, flows):
    got = dpdk_thash.v6(key, flows)
    for (s, d, sp, dp), (c3, c4) in zip(flows, got):
        assert pk(key, s + d) == c3
        assert pk(key, s + d + sp.to_bytes(2, "big") + dp.to_bytes(2, "big")) == c4


def test_published_vectors_through_dpdk(dpdk_thash):
    v4 = dpdk_thash.v4(DEFAULT_RSS_KEY, [(addr(s), addr(d), sp, dp) for s, sp, d, dp, *_ in V4])
    v6 = dpdk_thash.v6(DEFAULT_RSS_KEY, [(addr(s), addr(d), sp, dp) for s, sp, d, dp, *_ in V6])
    assert v4 == [(h3, h4) for *_, h3, h4 in V4]
    assert v6 == [(h3, h4) for *_, h3, h4 in V6]
