"""Header accessors and builders against struct-built headers, in one segment and straddling
segments, and cut-off headers answered with a negative code (never read past the data)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pktbuf.errors import E_INVAL, E_NOENT, E_RANGE
from pktbuf.net.hdr import arp as A
from pktbuf.net.hdr import ether as E
from pktbuf.net.hdr import gre as G
from pktbuf.net.hdr import icmp as I
from pktbuf.net.hdr import ipv4 as V4
from pktbuf.net.hdr import ipv6 as V6
from pktbuf.net.hdr import ipv6_ext as X
from pktbuf.net.hdr import l4 as L
from pktbuf.net.hdr import naive as H
from pktbuf.net.hdr.access import hdr_read, pktmbuf_write

from .frames import D6, MAC1, MAC2, S6
from .pktnet import packet, pool  # noqa: F401  (fixture)


def scratch():
    return np.zeros(64, np.uint8)


def splits(n):
    return [None] + [[c, n - c] for c in range(1, n)] + [[1, 0, n - 1]]


def test_ether_vlan_qinq_fields(pool):
    f = H.ether(MAC1, MAC2, 0x88A8) + H.vlan(0x2005, 0x8100) + H.vlan(0xE00A, 0x86DD)
    st_ = pool.domain.state
    for sp in splits(len(f)):
        m = packet(pool, f, sp)
        b = scratch()
        p = E.ether_hdr_ptr(st_, m.handle, 0, b)
        assert p > 0 and E.ether_type(p) == 0x88A8
        assert np.array_equal(np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * 6)
                                                    .from_address(p)), np.frombuffer(MAC1, np.uint8))
        v = E.vlan_hdr_ptr(st_, m.handle, 18, b)
        assert E.vlan_tci(v) == 0xE00A and E.vlan_id(E.vlan_tci(v)) == 0x00A
        assert E.vlan_proto(v) == 0x86DD
        assert E.ether_l3_off(st_, m.handle, 0, b) == (0x86DD, 22)
        assert E.vlan_hdr_ptr(st_, m.handle, 19, b) == E_RANGE      # past pkt_len
        m.free()


def test_ipv4_fields_and_options(pool):
    opts = bytes([1, 7, 7, 4, 1, 2, 0, 0])                      # NOP, RR(len 7), ..., EOL
    hdr = H.ipv4(0x10, 28 + 8, 0x1234, 0x2000 | 5, 33, 17, 0x0A000001, 0xC0A80001, opts)
    f = b"\xee" * 3 + hdr + H.udp(1, 2, 8)
    st_ = pool.domain.state
    want = H.ipv4_fields(hdr)
    for sp in splits(len(f)):
        m = packet(pool, f, sp, junk=b"\x4f" * 4)
        b = scratch()
        p = V4.ipv4_hdr_ptr(st_, m.handle, 3, b)
        assert p > 0
        got = dict(version=V4.ipv4_version(p), ihl=V4.ipv4_ihl(p), tos=V4.ipv4_tos(p),
                   total_length=V4.ipv4_total_length(p), packet_id=V4.ipv4_packet_id(p),
                   fragment_offset=V4.ipv4_fragment_offset(p), ttl=V4.ipv4_ttl(p),
                   proto=V4.ipv4_proto(p), cksum=V4.ipv4_cksum_field(p), src=V4.ipv4_src(p),
                   dst=V4.ipv4_dst(p))
        assert got == want and V4.ipv4_hdr_len(p) == 28 and V4.ipv4_is_fragment(p)
        assert V4.ipv4_opt_find(p, 7) == 21 and V4.ipv4_opt_find(p, 2) == E_NOENT
        m.free()
    bad = bytearray(hdr)
    bad[0] = 0x44
    m = packet(pool, bytes(bad))
    assert V4.ipv4_hdr_ptr(st_, m.handle, 0, scratch()) == E_INVAL
    m.free()
    m = packet(pool, hdr[:26])                                  # options cut off
    assert V4.ipv4_hdr_ptr(st_, m.handle, 0, scratch()) == E_RANGE
    m.free()


def test_ipv6_and_extension_headers(pool):
    chain = H.ipv6_ext(43, 8) + H.ipv6_ext(44, 16, routing=True) + H.ipv6_frag(17, 0x5a8, True, 77)
    hdr = H.ipv6(0xAB, 0x12345, len(chain) + 8, 0, 9, S6, D6)
    f = hdr + chain + H.udp(5, 6, 8)
    st_ = pool.domain.state
    for sp in splits(len(f))[::3]:
        m = packet(pool, f, sp)
        b = scratch()
        p = V6.ipv6_hdr_ptr(st_, m.handle, 0, b)
        assert (V6.ipv6_version(p), V6.ipv6_traffic_class(p), V6.ipv6_flow_label(p),
                V6.ipv6_payload_len(p), V6.ipv6_proto(p), V6.ipv6_hop_limits(p)) == \
            (6, 0xAB, 0x12345, len(chain) + 8, 0, 9)
        assert bytes((np.ctypeslib.ctypes.c_uint8 * 16).from_address(V6.ipv6_src(p))) == S6
        assert X.ipv6_skip_ext(st_, m.handle, 40, 0, b) == (17, 40 + len(chain), 1)
        fp = hdr_read(st_, m.handle, 64, 8, b)
        assert (X.ipv6_frag_offset(fp), X.ipv6_frag_more(fp), X.ipv6_frag_id(fp)) == (0x5a8, True, 77)
        assert X.ipv6_ext_len(hdr_read(st_, m.handle, 48, 2, b), 43) == 16
        m.free()
    m = packet(pool, f[:41])
    assert X.ipv6_skip_ext(st_, m.handle, 40, 0, scratch())[0] == -1
    m.free()


def test_l4_icmp_gre_arp_fields(pool):
    st_ = pool.domain.state
    t = H.tcp(80, 443, 0xDEADBEEF, 7, 32, 0x12, 1000)
    m = packet(pool, t, [13, len(t) - 13])
    p = L.tcp_hdr_ptr(st_, m.handle, 0, scratch())
    assert (L.l4_src_port(p), L.l4_dst_port(p), L.tcp_seq(p), L.tcp_ack(p), L.tcp_hdr_len(p),
            L.tcp_flags(p), L.tcp_window(p)) == (80, 443, 0xDEADBEEF, 7, 32, 0x12, 1000)
    m.free()
    u = packet(pool, H.udp(9, 10, 99)[:7])
    assert L.udp_hdr_ptr(st_, u.handle, 0, scratch()) == E_RANGE
    u.free()
    i = packet(pool, H.icmp_echo(8, 0, 0x77, 3))
    p = I.icmp_hdr_ptr(st_, i.handle, 0, scratch())
    assert (I.icmp_type(p), I.icmp_code(p), I.icmp_ident(p), I.icmp_seq(p)) == (8, 0, 0x77, 3)
    i.free()
    assert [G.gre_hdr_len(x << 12) for x in range(16)] == \
        [4, 8, 8, 12, 0, 0, 0, 0, 8, 12, 12, 16, 0, 0, 0, 0]
    a = packet(pool, H.arp(2, MAC1, 0x0A000001, MAC2, 0x0A000002))
    p = A.arp_hdr_ptr(st_, a.handle, 0, scratch())
    assert (A.arp_hrd(p), A.arp_pro(p), A.arp_op(p), A.arp_sip(p), A.arp_tip(p)) == \
        (1, 0x0800, 2, 0x0A000001, 0x0A000002)
    a.free()


@given(st.integers(0, 60), st.data())
def test_builders_write_what_struct_writes_across_segments(pool, pad, data):
    st_ = pool.domain.state
    mac1, mac2 = np.frombuffer(MAC1, np.uint8), np.frombuffer(MAC2, np.uint8)
    s6, d6 = np.frombuffer(S6, np.uint8), np.frombuffer(D6, np.uint8)
    opts = np.frombuffer(bytes([1, 1, 1, 0]), np.uint8)
    pieces = [
        (H.ether(MAC1, MAC2, 0x8100), lambda h, o: E.ether_hdr_write(st_, h, o, mac1, mac2, 0x8100)),
        (H.vlan(0x0123, 0x0800), lambda h, o: E.vlan_hdr_write(st_, h, o, 0x0123, 0x0800)),
        (H.ipv4(0, 60, 5, 0x4000, 64, 6, 1, 2, bytes([1, 1, 1, 0])),
         lambda h, o: V4.ipv4_hdr_write_opts(st_, h, o, 0, 60, 5, 0x4000, 64, 6, 1, 2, opts, 4)),
        (H.ipv4(1, 28, 9, 0, 3, 17, 5, 6),
         lambda h, o: V4.ipv4_hdr_write(st_, h, o, 1, 28, 9, 0, 3, 17, 5, 6)),
        (H.ipv6(3, 7, 16, 0, 64, S6, D6),
         lambda h, o: V6.ipv6_hdr_write(st_, h, o, 3, 7, 16, 0, 64, s6, d6)),
        (H.ipv6_ext(44, 16), lambda h, o: X.ipv6_ext_hdr_write(st_, h, o, 0, 44, 16)),
        (H.ipv6_frag(17, 8, True, 5), lambda h, o: X.ipv6_frag_hdr_write(st_, h, o, 17, 8, True, 5)),
        (H.udp(1, 2, 8), lambda h, o: L.udp_hdr_write(st_, h, o, 1, 2, 8)),
        (H.tcp(3, 4, 5, 6, 24, 2, 9), lambda h, o: L.tcp_hdr_write(st_, h, o, 3, 4, 5, 6, 24, 2, 9)),
        (H.icmp_echo(128, 0, 1, 2), lambda h, o: I.icmp_echo_write(st_, h, o, 128, 0, 1, 2)),
        (H.gre(0x6558, key=3), lambda h, o: G.gre_hdr_write(st_, h, o, 0x6558, 3, True, 0, False)),
        (H.arp(1, MAC1, 7, MAC2, 8), lambda h, o: A.arp_hdr_write(st_, h, o, 1, mac1, 7, mac2, 8)),
    ]
    want, fn = data.draw(st.sampled_from(pieces))
    total = pad + len(want) + 3
    cut = data.draw(st.integers(0, total))
    m = packet(pool, b"\x55" * total, [cut, total - cut])
    rc = fn(m.handle, pad)
    assert rc >= 0
    assert m.read(0, total).tobytes() == b"\x55" * pad + want + b"\x55" * 3
    assert fn(m.handle, total - len(want) + 1) == E_RANGE            # does not fit: nothing
    assert m.read(0, total).tobytes() == b"\x55" * pad + want + b"\x55" * 3
    m.free()


def test_write_rejects_bad_arguments(pool):
    st_ = pool.domain.state
    m = packet(pool, bytes(80))
    assert L.tcp_hdr_write(st_, m.handle, 0, 1, 2, 3, 4, 22, 0, 0) == E_INVAL
    assert X.ipv6_ext_hdr_write(st_, m.handle, 0, 44, 17, 16) == E_INVAL
    assert X.ipv6_frag_hdr_write(st_, m.handle, 0, 17, 5, False, 0) == E_INVAL
    src = np.zeros(4, np.uint8)
    assert pktmbuf_write(st_, m.handle, 78, 4, src.ctypes.data, 4) == E_RANGE
    assert pktmbuf_write(st_, m.handle, 0, 5, src.ctypes.data, 4) == E_RANGE
    assert pktmbuf_write(st_, m.handle, 76, 4, src.ctypes.data, 4) == 0
    m.free()
