"""The hash input taken from real frames (built byte by byte), and the bulk hash of mbufs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pktbuf
from pktbuf import Mbuf, Rss
from pktbuf.kernels import rss_tuple
from pktbuf.net.rss import naive
from pktbuf.net.rss.thash import DEFAULT_RSS_KEY
from pktbuf.net.rss.tuple import RX_RSS_HASH

from .vectors import V4, V6, addr, eth, ipv4, ipv6, l4, v4_frame, v6_frame

S4, D4 = addr("66.9.149.187"), addr("161.142.100.80")
S6, D6 = addr("3ffe:2501:200:1fff::7"), addr("3ffe:2501:200:3::1")
RSS = Rss()
RSS_L3 = Rss(l4=False)


def ports(sp, dp):
    return sp.to_bytes(2, "big") + dp.to_bytes(2, "big")


@pytest.mark.parametrize("src, sport, dst, dport, h3, h4", V4)
@pytest.mark.parametrize("proto", [6, 17])
def test_ipv4_vectors_from_frames(src, sport, dst, dport, h3, h4, proto):
    f = v4_frame(addr(src), addr(dst), sport, dport, proto)
    assert RSS.hash_frame(f) == h4
    assert RSS_L3.hash_frame(f) == h3


@pytest.mark.parametrize("src, sport, dst, dport, h3, h4", V6)
def test_ipv6_vectors_from_frames(src, sport, dst, dport, h3, h4):
    f = v6_frame(addr(src), addr(dst), sport, dport, 6)
    assert RSS.hash_frame(f) == h4
    assert RSS_L3.hash_frame(f) == h3


CASES = [
    # (name, frame, input with ports, input without)
    ("udp", v4_frame(S4, D4, 2794, 1766), S4 + D4 + ports(2794, 1766), S4 + D4),
    ("vlan", v4_frame(S4, D4, 2794, 1766, vlan=7), S4 + D4 + ports(2794, 1766), S4 + D4),
    ("qinq-tpid", v4_frame(S4, D4, 1, 2, tpid=0x88A8, vlan=3), S4 + D4 + ports(1, 2), S4 + D4),
    ("options", v4_frame(S4, D4, 80, 443, 6, options=bytes([1, 1, 1, 0]) * 3),
     S4 + D4 + ports(80, 443), S4 + D4),
    ("icmp", eth(0x0800) + ipv4(S4, D4, 1, bytes(16)), S4 + D4, S4 + D4),
    ("sctp", eth(0x0800) + ipv4(S4, D4, 132, l4(5, 6)), S4 + D4, S4 + D4),
    ("first-fragment", v4_frame(S4, D4, 5, 6, frag=0x2000), S4 + D4, S4 + D4),
    ("later-fragment", v4_frame(S4, D4, 5, 6, frag=0x0010), S4 + D4, S4 + D4),
    ("df-not-fragment", v4_frame(S4, D4, 5, 6, frag=0x4000), S4 + D4 + ports(5, 6), S4 + D4),
    ("ipv6-udp", v6_frame(S6, D6, 9, 10), S6 + D6 + ports(9, 10), S6 + D6),
    ("ipv6-vlan-tcp", v6_frame(S6, D6, 9, 10, 6, vlan=100), S6 + D6 + ports(9, 10), S6 + D6),
    ("ipv6-ext-header", eth(0x86DD) + ipv6(S6, D6, 0, bytes(8) + l4(9, 10)), S6 + D6, S6 + D6),
    ("ipv6-fragment", eth(0x86DD) + ipv6(S6, D6, 44, bytes(8) + l4(9, 10)), S6 + D6, S6 + D6),
    ("arp", eth(0x0806) + bytes(28), b"", b""),
    ("vlan-arp", eth(0x0806, vlan=5) + bytes(28), b"", b""),
    ("two-tags", eth(0x8100, vlan=5) + ipv4(S4, D4, 17, l4(1, 2)), b"", b""),
    ("bad-version", eth(0x0800) + bytes([0x65]) + ipv4(S4, D4, 17, l4(1, 2))[1:], b"", b""),
    ("ihl-too-small", eth(0x0800) + bytes([0x44]) + ipv4(S4, D4, 17, l4(1, 2))[1:], b"", b""),
    ("v6-in-v4-type", eth(0x0800) + ipv6(S6, D6, 17, l4(1, 2)), b"", b""),
]


@pytest.mark.parametrize("name, frame, want4, want3", CASES, ids=[c[0] for c in CASES])
def test_tuple_of_frame(name, frame, want4, want3):
    assert RSS.tuple(frame) == want4
    assert RSS_L3.tuple(frame) == want3
    for r, want in ((RSS, want4), (RSS_L3, want3)):
        h = r.hash_frame(frame)
        assert h == (naive.toeplitz(DEFAULT_RSS_KEY, want) if want else None)


FRAMES = [c[1] for c in CASES if c[2]]


@given(st.sampled_from(FRAMES), st.data())
def test_truncated_frames_read_nothing_past_n(frame, data):
    """Cut anywhere: the input is what the first n bytes hold (ports or addresses cut off
    fall back or stop hashing), and bytes past n never change it."""
    n = data.draw(st.integers(0, len(frame)))
    junk = data.draw(st.binary(min_size=64, max_size=64))
    buf = np.frombuffer(frame[:n] + junk, np.uint8).copy()
    out = np.zeros(36, np.uint8)
    k = rss_tuple(buf, n, True, out)
    assert k in (0, 8, 12, 32, 36)
    exact = np.frombuffer(frame[:n], np.uint8).copy()
    out2 = np.zeros(36, np.uint8)
    assert rss_tuple(exact, n, True, out2) == k and out[:k].tobytes() == out2[:k].tobytes()
    full = RSS.tuple(frame)
    if k:
        assert out[:k].tobytes() == full[:k]     # a prefix form of the whole frame's input
        assert RSS.hash_frame(frame[:n]) == naive.toeplitz(DEFAULT_RSS_KEY, out[:k].tobytes())
    else:
        assert RSS.hash_frame(frame[:n]) is None


def test_truncation_points():
    f = v4_frame(S4, D4, 2794, 1766)          # 14 + 20 + 8
    assert RSS.tuple(f[:33]) == b""           # IPv4 header cut: not hashed
    assert RSS.tuple(f[:34]) == S4 + D4       # header whole, ports missing: 2-tuple
    assert RSS.tuple(f[:37]) == S4 + D4
    assert RSS.tuple(f[:38]) == S4 + D4 + ports(2794, 1766)
    g = v6_frame(S6, D6, 9, 10)
    assert RSS.tuple(g[:53]) == b"" and RSS.tuple(g[:54]) == S6 + D6
    assert RSS.tuple(g[:58]) == S6 + D6 + ports(9, 10)
    assert RSS.tuple(b"") == b"" and RSS.tuple(f[:13]) == b""
    assert RSS.tuple(eth(0x0800, vlan=1)[:17]) == b""


# ---- mbufs --------------------------------------------------------------------------------

@pytest.fixture
def pool(domain):
    p = pktbuf.PktmbufPool(256, 0, domain=domain)
    yield p
    p.close(force=True)


def _mbufs(pool, frames, junk=b""):
    hs = pool.alloc_bulk(len(frames))
    for h, f in zip(hs, frames):
        m = Mbuf(pool.domain, h)
        if f:
            m.append_bytes(f + junk)
            m.trim(len(junk))         # bytes past data_len stay in the buffer
    return hs


def test_hash_bulk_sets_hash_and_flag(pool):
    frames = [c[1] for c in CASES]
    hs = _mbufs(pool, frames, junk=b"\xff" * 64)
    mb = pool.domain.state.mb
    mb["ol_flags"][hs[-1]] |= RX_RSS_HASH      # a stale flag on a frame that is not hashed
    mb["hash"][hs[-1]] = 77
    got = RSS.hash_bulk(pool, hs)
    want = [RSS.hash_frame(f) for f in frames]
    assert got == sum(w is not None for w in want)
    for h, w in zip(hs, want):
        assert mb["hash"][h] == (w or 0)
        assert bool(mb["ol_flags"][h] & RX_RSS_HASH) == (w is not None)
    pool.free_bulk(hs)


def test_hash_bulk_reads_data_len_only(pool):
    f = v4_frame(S4, D4, 2794, 1766)
    hs = _mbufs(pool, [f[:36]], junk=f[36:])            # the ports are past data_len
    assert RSS.hash_bulk(pool, hs) == 1
    assert pool.domain.state.mb["hash"][hs[0]] == 0x323e8fc2          # IPv4-only vector
    pool.free_bulk(hs)


def test_hash_bulk_skips_null_and_rejects_bad_handles(pool):
    f = v4_frame(S4, D4, 2794, 1766)
    hs = _mbufs(pool, [f, f])
    a = np.array([hs[0], -1, hs[1]], np.int32)
    assert RSS.hash_bulk(pool, a) == 2
    assert list(RSS.queues(pool, a)) == [0, -1, 0]        # 0x51ccc178 & 127 = 120 -> 120 % 1
    pool.free_bulk(hs)
    with pytest.raises(pktbuf.DoubleFree):
        RSS.hash_bulk(pool, hs)
    with pytest.raises(pktbuf.InvalidHandle):
        RSS.hash_bulk(pool.domain, [10 ** 8])
    with pytest.raises(pktbuf.InvalidArgument):
        RSS.hash_bulk(object(), [0])
