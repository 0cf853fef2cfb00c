"""Checksums against the word-by-word model, DPDK's known answers, DPDK itself (chains with
odd boundaries, its bug behind ``dpdk_bug``) and RFC 1624 updates against recomputation."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pktbuf
from pktbuf.net.cksum import api, naive
from pktbuf.net.cksum.incr import cksum_store_mbuf, ipv4_ttl_dec_cksum
from pktbuf.net.cksum.ipv4 import (CKSUM_BAD, ipv4_cksum_mbuf, ipv4_udptcp_cksum_mbuf,
                                   ipv4_udptcp_cksum_mbuf_verify)
from pktbuf.net.cksum.ipv6 import ipv6_udptcp_cksum_mbuf, ipv6_udptcp_cksum_mbuf_verify
from pktbuf.net.cksum.raw import raw_cksum_mbuf

from .frames import NAMED, eth, ipv4, ipv6, tcp, udp, with_l4_cksum
from .pktnet import oracle, packet, pool  # noqa: F401  (fixtures)

PATTERN = bytes(0xFF - (j % 7) for j in range(600))


def test_dpdk_known_answers():
    assert api.raw_cksum(b"\x01\x02\x03") == 0x0204
    hdr = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert api.ipv4_cksum(hdr) == 0x61B8
    fixed = hdr[:10] + (0x61B8).to_bytes(2, "little") + hdr[12:]
    assert api.ipv4_cksum(fixed) == 0 and api.ipv4_cksum_verify(fixed)
    assert not api.ipv4_cksum_verify(hdr)
    u = ipv4(17, udp(b"abcd", 12345, 53), cksum=False)        # 10.0.0.1 -> 10.0.0.2, 32 bytes
    assert api.ipv4_udptcp_cksum(u) == 0x9EF6
    assert api.raw_cksum(PATTERN) == 0x7B7A
    assert api.to_wire(0x61B8) == 0xB861


@given(st.binary(max_size=300))
def test_raw_matches_model(data):
    assert api.raw_cksum(data) == naive.raw_cksum(data)


@given(st.binary(min_size=1, max_size=200), st.integers(0, 7))
def test_raw_at_unaligned_addresses(data, shift):
    buf = np.zeros(len(data) + 16, np.uint8)
    buf[shift:shift + len(data)] = np.frombuffer(data, np.uint8)
    from pktbuf.net.cksum.raw import raw_cksum
    assert raw_cksum(buf.ctypes.data + shift, len(data)) == naive.raw_cksum(data)


@given(st.randoms(use_true_random=False))
def test_l4_checksums_match_model(rnd):
    payload = rnd.randbytes(rnd.randrange(0, 80))
    for proto, l4 in ((17, udp(payload)), (6, tcp(payload, hdr_len=rnd.choice([20, 32])))):
        opts = rnd.choice([b"", bytes([1, 1, 1, 0])])
        for ip in (ipv4(proto, l4, opts=opts), ipv6(proto, l4)):
            v4 = ip[0] >> 4 == 4
            f = with_l4_cksum(ip)
            base = len(ip) - len(l4)
            want = int.from_bytes(f[base + (6 if proto == 17 else 16):][:2], "little")
            calc = api.ipv4_udptcp_cksum if v4 else api.ipv6_udptcp_cksum
            verify = api.ipv4_udptcp_cksum_verify if v4 else api.ipv6_udptcp_cksum_verify
            assert calc(ip) == want
            assert verify(f) and (verify(ip) == (want == 0xFFFF and proto == 6))


def test_udp_zero_is_sent_as_ffff_and_verify_rejects_none():
    # find a payload whose UDP checksum computes to zero: the last two bytes absorb the sum
    base = ipv4(17, udp(b"\0\0"), cksum=False)
    s = naive.ones_sum(naive.ipv4_pseudo(base) + base[20:])
    b = bytearray(base)
    b[-2:] = (0xFFFF - s).to_bytes(2, "big")          # the whole sum becomes 0xFFFF
    assert api.ipv4_udptcp_cksum(bytes(b)) == 0xFFFF
    # sent as 0xFFFF it verifies; left at 0 it verifies too (the sum is 0xFFFF either way)
    assert api.ipv4_udptcp_cksum_verify(bytes(b))
    assert not api.ipv4_udptcp_cksum_verify(ipv4(17, udp(b"abcd")))   # "none" (0): -1, as DPDK
    t = bytearray(ipv4(6, tcp(b"\0\0"), cksum=False))
    s = naive.ones_sum(naive.ipv4_pseudo(bytes(t)) + bytes(t[20:]))
    t[-2:] = (0xFFFF - s).to_bytes(2, "big")
    assert api.ipv4_udptcp_cksum(bytes(t)) == 0                 # TCP keeps its zero


def test_total_length_below_ihl_gives_ffff_as_dpdk():
    b = bytearray(ipv4(17, udp()))
    b[2:4] = (10).to_bytes(2, "big")
    assert api.ipv4_udptcp_cksum(bytes(b)) == 0xFFFF


@pytest.mark.parametrize("split, dpdk", [((600,), 0x7B7A), ((300, 300), 0x7B7A),
                                         ((301, 299), 0xE879), ((1, 599), 0x5479),
                                         ((599, 1), 0x7B7A)])
def test_chain_odd_boundaries_correct_and_dpdk_bug(pool, split, dpdk):
    m = packet(pool, PATTERN, split)
    st_ = pool.domain.state
    assert raw_cksum_mbuf(st_, m.handle, 0, 600, False) == 0x7B7A
    assert raw_cksum_mbuf(st_, m.handle, 0, 600, True) == dpdk
    assert api.raw_cksum_mbuf(m, 0, 600) == 0x7B7A
    assert api.raw_cksum_mbuf(m, 0, 600, dpdk_bug=True) == dpdk
    with pytest.raises(pktbuf.OutOfRange):
        api.raw_cksum_mbuf(m, 1, 600)
    m.free()


@given(st.randoms(use_true_random=False))
def test_chains_match_model(pool, rnd):
    from .frames import random_split
    data = rnd.randbytes(rnd.randrange(0, 400))
    split = random_split(rnd, len(data))
    m = packet(pool, data, split, junk=b"\xff" * 9)
    off = rnd.randrange(0, len(data) + 1)
    n = rnd.randrange(0, len(data) - off + 1)
    st_ = pool.domain.state
    assert raw_cksum_mbuf(st_, m.handle, off, n, False) == naive.raw_cksum(data[off:off + n])
    # DPDK's result, by the model of its loop, over the same cut
    parts, pos, start = [], 0, off
    for ln in split:
        lo, hi = max(pos, off), min(pos + ln, off + n)
        if hi > lo or (lo == hi and pos <= lo < pos + ln and parts):
            parts.append(data[lo:hi])
        pos += ln
    inside = [p for p in parts]
    want_bug = naive.raw_cksum_segments_dpdk(inside) if len(inside) > 1 else \
        naive.raw_cksum(data[off:off + n])
    assert raw_cksum_mbuf(st_, m.handle, off, n, True) == want_bug or n == 0
    assert raw_cksum_mbuf(st_, m.handle, off, len(data) + 1 - off, False) == pktbuf.errors.E_RANGE
    m.free()
    del start


def test_chains_match_dpdk(pool, oracle):
    rng = random.Random(7)
    from .frames import random_split
    for i in range(400):
        data = rng.randbytes(rng.randrange(1, 700))
        if rng.random() < 0.5:
            data = bytes(0xF0 | (b & 0x0F) for b in data)     # large partial sums: the bug bites
        split = random_split(rng, len(data))
        off = rng.randrange(0, len(data))
        n = rng.randrange(0, len(data) - off + 1)
        m = packet(pool, data, split)
        rc, want = oracle.rawck(data, off, n, split)
        assert rc == 0
        assert raw_cksum_mbuf(pool.domain.state, m.handle, off, n, True) == want, (i, split, off, n)
        assert raw_cksum_mbuf(pool.domain.state, m.handle, off, n, False) == \
            naive.raw_cksum(data[off:off + n])
        m.free()


@pytest.mark.parametrize("name", ["eth-ipv4-udp", "eth-ipv4-tcp", "eth-ipv4-tcp-opts",
                                  "ipv6-udp", "ipv6-tcp"])
def test_mbuf_forms_on_every_split(pool, name):
    f = NAMED[name]
    v4 = f[14] >> 4 == 4
    l4_off = 14 + ((f[14] & 15) * 4 if v4 else 40)
    proto = f[23] if v4 else f[20]
    ck_off = l4_off + (6 if proto == 17 else 16)
    want = int.from_bytes(f[ck_off:ck_off + 2], "little")
    zeroed = f[:ck_off] + b"\0\0" + f[ck_off + 2:]
    st_ = pool.domain.state
    calc = ipv4_udptcp_cksum_mbuf if v4 else ipv6_udptcp_cksum_mbuf
    verify = ipv4_udptcp_cksum_mbuf_verify if v4 else ipv6_udptcp_cksum_mbuf_verify
    for cut in range(0, len(f) + 1, 3):
        for bug in (False, True):
            m = packet(pool, zeroed, [cut, len(f) - cut])
            # DPDK's result differs only where a segment starts at an odd L4 offset
            exact = not bug or cut <= l4_off or cut >= len(f) or (cut - l4_off) % 2 == 0
            if exact:
                assert calc(st_, m.handle, 14, l4_off, bug) == want
                assert verify(st_, m.handle, 14, l4_off, bug) == CKSUM_BAD
            assert cksum_store_mbuf(st_, m.handle, ck_off, want) == 0
            if exact:
                assert verify(st_, m.handle, 14, l4_off, bug) == 0
            assert m.read(0, len(f)).tobytes() == f
            if v4:
                assert ipv4_cksum_mbuf(st_, m.handle, 14) == 0
            m.free()
    short = packet(pool, zeroed[:-3])                 # the IP length says more than there is
    assert calc(st_, short.handle, 14, l4_off, False) == pktbuf.errors.E_RANGE
    assert calc(st_, short.handle, 14, len(f) + 5, False) < 0
    short.free()


# ---- RFC 1624 ----------------------------------------------------------------------------

@given(st.binary(min_size=20, max_size=20), st.integers(1, 9), st.integers(0, 0xFFFF))
def test_update16_equals_recomputation(hdr, word, new):
    h = bytearray(hdr)
    h[0] = 0x45
    h[10:12] = b"\0\0"
    if not any(h):
        return
    c = api.ipv4_cksum(bytes(h))
    h[10:12] = c.to_bytes(2, "little")
    if word == 5:
        return                                    # the checksum word itself
    old = int.from_bytes(h[2 * word:2 * word + 2], "little")
    h[2 * word:2 * word + 2] = new.to_bytes(2, "little")
    upd = api.cksum_update16(c, old, new)        # all three in DPDK (memory) order
    z = bytearray(h)
    z[10:12] = b"\0\0"
    assert upd == api.ipv4_cksum(bytes(z))
    # and the same in wire order
    assert naive.to_wire(upd) == api.cksum_update16(naive.to_wire(c), naive.to_wire(old),
                                                    naive.to_wire(new))


@given(st.integers(0, 0xFFFFFFFF), st.integers(0, 0xFFFFFFFF), st.integers(1, 255))
def test_update32_address_rewrite_equals_recomputation(src, new_src, ttl):
    h = bytearray(ipv4(17, b"", ttl=ttl, src=src, cksum=True))
    c = int.from_bytes(h[10:12], "big")                     # wire order this time
    h[12:16] = new_src.to_bytes(4, "big")
    z = bytearray(h)
    z[10:12] = b"\0\0"
    assert api.cksum_update32(c, src, new_src) == naive.to_wire(api.ipv4_cksum(bytes(z)))


@given(st.binary(min_size=20, max_size=20), st.integers(1, 255))
def test_ttl_decrement_equals_recomputation(hdr, ttl):
    h = bytearray(hdr)
    h[0], h[8], h[10], h[11] = 0x45, ttl, 0, 0
    h[10:12] = api.ipv4_cksum(bytes(h)).to_bytes(2, "little")
    a = np.frombuffer(bytes(h), np.uint8).copy()
    assert ipv4_ttl_dec_cksum(a.ctypes.data) == ttl - 1
    assert a[8] == ttl - 1 and api.ipv4_cksum(a.tobytes()) == 0        # still right
    z = a.copy()
    z[10:12] = 0
    assert int.from_bytes(a[10:12].tobytes(), "little") == api.ipv4_cksum(z.tobytes())
    a[8] = 0
    before = a.tobytes()
    assert ipv4_ttl_dec_cksum(a.ctypes.data) == pktbuf.errors.E_INVAL and a.tobytes() == before


def test_facade_checks_arguments():
    with pytest.raises(pktbuf.InvalidArgument):
        api.raw_cksum("text")
    with pytest.raises(pktbuf.InvalidArgument):
        api.ipv4_cksum(bytes(19))
    with pytest.raises(pktbuf.InvalidArgument):
        api.ipv4_udptcp_cksum(ipv4(17, udp())[:-1])          # total_length beyond the bytes
    with pytest.raises(pktbuf.InvalidArgument):
        api.ipv6_udptcp_cksum(bytes(40))
    with pytest.raises(pktbuf.InvalidArgument):
        api.cksum_update16(1 << 16, 0, 0)
    assert api.raw_cksum(b"") == 0


def test_empty_range_at_the_end_of_a_chain(pool):
    """Found by hypothesis: off == pkt_len, length 0, with empty segments around."""
    st_ = pool.domain.state
    for split in ([0, 1], [1, 0], [0, 0, 1], [1]):
        m = packet(pool, b"\x07", split)
        assert raw_cksum_mbuf(st_, m.handle, 1, 0, False) == 0
        assert raw_cksum_mbuf(st_, m.handle, 1, 0, True) == 0
        assert raw_cksum_mbuf(st_, m.handle, 0, 1, False) == 0x0007
        m.free()
