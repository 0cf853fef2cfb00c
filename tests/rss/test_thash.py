"""The hash kernels against the published vectors, the bit-by-bit model and each other."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pktbuf.errors import E_INVAL
from pktbuf.net.rss import naive
from pktbuf.net.rss.thash import (DEFAULT_RSS_KEY, SYMMETRIC_RSS_KEY, convert_rss_key, key_array,
                                  new_table, softrss, softrss_be, thash_bulk, thash_lut,
                                  thash_table_init)

from .vectors import V4, V4_SYMMETRIC, V6, addr

keys = st.binary(min_size=40, max_size=40)
inputs = st.binary(min_size=0, max_size=36)


def table(key: bytes) -> np.ndarray:
    t = new_table()
    assert thash_table_init(key_array(key), t) == 0
    return t


DEFAULT = table(DEFAULT_RSS_KEY)


def lut(t, data: bytes) -> int:
    a = np.frombuffer(data, np.uint8) if data else np.zeros(1, np.uint8)
    return int(thash_lut(t, a, len(data)))


def words(data: bytes) -> np.ndarray:
    """Network-order bytes as host-order words, as DPDK's tuples hold them."""
    return np.frombuffer(data, ">u4").astype(np.uint32) if data else np.zeros(1, np.uint32)


def be(key: bytes) -> np.ndarray:
    out = np.zeros(len(key) // 4, np.uint32)
    assert convert_rss_key(key_array(key), out) == out.size
    return out


def flows(vectors):
    for src, sport, dst, dport, h3, h4 in vectors:
        s, d = addr(src), addr(dst)
        yield s + d, s + d + sport.to_bytes(2, "big") + dport.to_bytes(2, "big"), h3, h4


@pytest.mark.parametrize("l3, l4_, h3, h4", list(flows(V4 + V6)))
def test_published_vectors(l3, l4_, h3, h4):
    k = key_array(DEFAULT_RSS_KEY)
    for data, want in ((l3, h3), (l4_, h4)):
        assert naive.toeplitz(DEFAULT_RSS_KEY, data) == want
        assert lut(DEFAULT, data) == want
        assert softrss(words(data), len(data) // 4, k) == want
        assert softrss_be(words(data), len(data) // 4, be(DEFAULT_RSS_KEY)) == want


@pytest.mark.parametrize("vec, want", list(zip(V4, V4_SYMMETRIC)))
def test_symmetric_key_vectors(vec, want):
    src, sport, dst, dport = vec[:4]
    sym = table(SYMMETRIC_RSS_KEY)
    fwd = naive.ipv4_tuple(addr(src), addr(dst), sport, dport)
    rev = naive.ipv4_tuple(addr(dst), addr(src), dport, sport)
    assert lut(sym, fwd) == lut(sym, rev) == naive.toeplitz(SYMMETRIC_RSS_KEY, fwd) == want
    # and the default key tells the two directions apart
    assert lut(DEFAULT, fwd) != lut(DEFAULT, rev)


def test_table_intermediate_values():
    # key windows W(i) and one table entry, from the definition
    k = int.from_bytes(DEFAULT_RSS_KEY, "big")
    w = [(k >> (288 - i)) & 0xFFFFFFFF for i in range(4)]
    assert w == [0x6d5a56da, 0xdab4adb4, 0xb5695b68, 0x6ad2b6d1]
    assert DEFAULT[0, 0x80] == w[0] and DEFAULT[0, 0x40] == w[1]
    assert DEFAULT[0, 0x42] == 0x8c211b3d
    # the running XOR over vector 1's input
    data = bytes.fromhex("420995bba18e64500aea06e6")
    run = [lut(DEFAULT, data[:i + 1]) for i in range(12)]
    assert run == [0x8c211b3d, 0x0221abc5, 0x547ca2a0, 0x0e48b9de, 0x13f8ed35, 0x5a72d317,
                   0xa4b778a1, 0x323e8fc2, 0x7d859346, 0xf362a55e, 0x1b9a39cc, 0x51ccc178]


@given(keys, inputs)
def test_lut_matches_naive(key, data):
    assert lut(table(key), data) == naive.toeplitz(key, data)


@given(keys, st.integers(0, 9).flatmap(lambda n: st.binary(min_size=4 * n, max_size=4 * n)))
def test_softrss_forms_match_naive(key, data):
    want = naive.toeplitz(key, data)
    n = len(data) // 4
    assert softrss(words(data), n, key_array(key)) == want
    assert softrss_be(words(data), n, be(key)) == want


@given(keys, st.integers(1, 36).flatmap(
    lambda n: st.tuples(st.binary(min_size=n, max_size=n), st.binary(min_size=n, max_size=n))))
def test_linear_over_gf2(key, ab):
    a, b = ab
    t = table(key)
    x = bytes(i ^ j for i, j in zip(a, b))
    assert lut(t, x) == lut(t, a) ^ lut(t, b)
    assert lut(t, bytes(len(a))) == 0


@given(st.lists(st.binary(min_size=12, max_size=12), min_size=1, max_size=40))
def test_bulk_matches_single(rows):
    tup = np.frombuffer(b"".join(rows), np.uint8).reshape(len(rows), 12).copy()
    out = np.zeros(len(rows) + 1, np.uint32)
    assert thash_bulk(DEFAULT, tup, 12, out, len(rows)) == len(rows)
    assert [int(v) for v in out[:-1]] == [naive.toeplitz(DEFAULT_RSS_KEY, r) for r in rows]
    assert out[-1] == 0


def test_kernels_refuse_bad_sizes():
    k = key_array(DEFAULT_RSS_KEY)
    assert thash_table_init(k[:39], new_table()) == E_INVAL          # 36 rows need 40 bytes
    assert thash_table_init(k, np.zeros((4, 255), np.uint32)) == E_INVAL
    assert thash_table_init(k[:16], new_table(12)) == 0              # IPv4 + ports: 16 bytes
    data = np.zeros(40, np.uint8)
    assert thash_lut(DEFAULT, data, 37) == E_INVAL
    assert thash_lut(DEFAULT, data[:8], 12) == E_INVAL
    assert thash_lut(DEFAULT, data, -1) == E_INVAL
    w = np.zeros(9, np.uint32)
    assert softrss(w, 9, k[:36]) == E_INVAL                          # needs 4 * (9 + 1) bytes
    assert softrss(w, 10, k) == E_INVAL
    assert softrss_be(w, 9, be(DEFAULT_RSS_KEY)[:9]) == E_INVAL
    tup = np.zeros((4, 12), np.uint8)
    out = np.zeros(4, np.uint32)
    assert thash_bulk(DEFAULT, tup, 12, out, 5) == E_INVAL
    assert thash_bulk(DEFAULT, tup, 13, out, 4) == E_INVAL
    assert thash_bulk(DEFAULT, tup, 12, out[:3], 4) == E_INVAL


def test_symmetric_key_halves_repeat():
    sym = table(SYMMETRIC_RSS_KEY)
    rng = np.random.default_rng(5)
    for _ in range(50):
        h = lut(sym, rng.bytes(12))
        assert h >> 16 == h & 0xFFFF
