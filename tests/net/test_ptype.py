"""rte_net_get_ptype's semantics: the kernel against the plain-Python model and against DPDK
22.11 itself (same frames, same segmentation), on hand-built and random frames."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.buf.mbuf.offload import tx_offload_unpack
from pktbuf.net.ptype import api, naive
from pktbuf.net.ptype import values as V
from pktbuf.net.ptype.mbuf import net_get_ptype, net_get_ptype_bulk
from pktbuf.net.ptype.parse import net_get_ptype_lens

from .frames import NAMED, random_frame, random_split
from .pktnet import oracle, packet, pool  # noqa: F401  (fixtures)

ALL = V.PTYPE_ALL_MASK
LAYER_MASKS = [ALL, 0, V.PTYPE_L2_MASK, V.PTYPE_L2_MASK | V.PTYPE_L3_MASK,
               V.PTYPE_L2_MASK | V.PTYPE_L3_MASK | V.PTYPE_L4_MASK,
               0x0000FFFF, 0x000FFFFF, 0x00FFFFFF, V.PTYPE_L3_MASK | V.PTYPE_L4_MASK]


def kernel_ptype(pool, frame, layers=ALL, split=None, junk=b"\xa5" * 8):
    m = packet(pool, frame, split, junk)
    hl = np.full(7, -1, np.int32)
    pt = int(net_get_ptype_lens(pool.domain.state, m.handle, layers, hl))
    m.free()
    return pt, [int(x) for x in hl]


def model(frame, layers=ALL):
    pt, lens = naive.get_ptype(frame, layers)
    return pt, [lens.get(k, -1) for k in V.HL_NAMES]


# DPDK's verified examples (ptype; l2, l3, l4 / tunnel, inner lengths)
KNOWN = {
    "eth-ipv4-udp": (0x211, {"l2_len": 14, "l3_len": 20, "l4_len": 8}),
    "vlan-ipv6-tcp": (0x146, {"l2_len": 18, "l3_len": 40, "l4_len": 20}),
    "qinq-ipv4-udp": (0x217, {"l2_len": 22}),
    "ipv4-options-tcp": (0x131, {"l3_len": 24}),
    "gre-ipv4-udp": (0x02102011, {"tunnel_len": 4, "inner_l3_len": 20, "inner_l4_len": 8}),
    "nvgre-eth-ipv4-tcp": (0x01114011, {"tunnel_len": 8, "inner_l2_len": 14}),
    "ipip-udp": (0x02101011, {}),
    "ip6-in-ip4-tcp": (0x01301011, {}),
    "ipv4-icmp": (0x11, {"l4_len": 0, "tunnel_len": 0}),
    "arp": (0x01, {"l2_len": 14}),
    "mpls": (0x01, {"l2_len": 14}),
    "ipv4-bad-vihl": (0x201, {"l3_len": 20}),
    "ipv4-df": (0x211, {}),
    "ipv4-frag-first": (0x311, {"l4_len": 0}),
    "ipv6-hop-dst-udp": (0x2c1, {"l3_len": 64}),
    "ipv6-frag-udp": (0x3c1, {"l3_len": 48}),
    "ipv6-ah-tcp": (0xc1, {"l3_len": 40}),
    "short-tcp": (0x11, {}),
    "ipip-short-tcp": (0x00100000, {}),
    "vxlan-port-is-udp": (0x211, {}),
    "gre-routing": (0x11, {"tunnel_len": 0}),
    "runt": (0, {}),
    "vlan-cut": (0x06, {"l2_len": 14}),
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_types_and_lengths(pool, name):
    want_pt, want = KNOWN[name]
    pt, hl = kernel_ptype(pool, NAMED[name])
    assert pt == want_pt, (hex(pt), api.ptype_name(pt))
    got = dict(zip(V.HL_NAMES, hl))
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("layers", LAYER_MASKS, ids=hex)
def test_named_frames_match_model_for_every_mask(pool, layers):
    for name, f in NAMED.items():
        assert kernel_ptype(pool, f, layers) == model(f, layers), name


def test_named_frames_straddling_every_boundary(pool):
    """Every frame cut in two at every offset (and with an empty segment in between) parses
    as the whole frame: headers that straddle segments are gathered."""
    for name in ("qinq-ipv6-udp", "nvgre-vlan-ipv6", "ipv6-hop-frag", "gre-key-ipv6-tcp",
                 "eth-ipv4-tcp-opts"):
        f = NAMED[name]
        want = model(f)
        for cut in range(len(f) + 1):
            assert kernel_ptype(pool, f, split=[cut, len(f) - cut]) == want, (name, cut)
            assert kernel_ptype(pool, f, split=[cut, 0, len(f) - cut]) == want, (name, cut)


@given(st.randoms(use_true_random=False), st.sampled_from(LAYER_MASKS))
@settings(max_examples=300)
def test_random_frames_match_model(pool, rnd, layers):
    f = random_frame(rnd)
    split = random_split(rnd, len(f))
    assert kernel_ptype(pool, f, layers, split) == model(f, layers)


def test_truncations_match_model_and_never_read_past_data(pool):
    """Every prefix of every frame; the junk after each segment's data_len would change the
    answer if it were read."""
    for name, f in NAMED.items():
        for n in range(len(f) + 1):
            g = f[:n]
            want = model(g)
            assert kernel_ptype(pool, g, junk=b"\x08\x00" * 40) == want, (name, n)
            assert kernel_ptype(pool, g, junk=b"\x86\xdd" * 40) == want, (name, n)


def test_lying_lengths_are_not_followed_past_the_packet(pool):
    """An IHL of 15 over a 20-byte header, a TCP data offset of 15 on a short segment, an
    IPv6 extension length of 255: lengths are reported as read, data past pkt_len is not."""
    from .frames import eth, ipv4, ipv6, tcp
    b = bytearray(eth(0x0800) + ipv4(6, tcp()))
    b[14] = 0x4F
    for f in (bytes(b), NAMED["eth-ipv4-tcp"][:-10],
              eth(0x86DD) + ipv6(0, b"\x11\xff" + bytes(6))):
        assert kernel_ptype(pool, f) == model(f)


# ---- against DPDK ----------------------------------------------------------------------------

def test_named_frames_match_dpdk(pool, oracle):
    for name, f in NAMED.items():
        for layers in LAYER_MASKS:
            assert kernel_ptype(pool, f, layers) == oracle.ptype(f, layers), (name, hex(layers))


def test_random_frames_match_dpdk(pool, oracle):
    rng = random.Random(20221111)
    for i in range(1500):
        f = random_frame(rng)
        split = random_split(rng, len(f))
        layers = rng.choice(LAYER_MASKS)
        got = kernel_ptype(pool, f, layers, split)
        assert got == oracle.ptype(f, layers, split), (i, f.hex(), split, hex(layers))
        assert got == model(f, layers), (i, f.hex())


def test_names_match_dpdk(oracle):
    rng = random.Random(5)
    values = [0, 0x211, 0x0FFFFFFF, 0xF0000000, 0x01114011] + [rng.randrange(1 << 32)
                                                             for _ in range(200)]
    for pt in values:
        assert api.ptype_name(pt) == oracle.name(pt), hex(pt)


# ---- the mbuf forms and the facade -----------------------------------------------------------

def mbuf_ptype(pool, frame, layers=ALL, split=None, junk=b""):
    """net_get_ptype on a packet (one segment: the inline first-segment parser; split: the
    out-of-line one): the stored type and the tx_offload lengths."""
    m = packet(pool, frame, split, junk)
    pt = int(net_get_ptype(pool.domain.state, m.handle, layers))
    got = (pt, int(m.packet_type), tx_offload_unpack(m.tx_offload))
    m.free()
    return got


def mbuf_model(frame, layers=ALL):
    """What net_get_ptype must store, from the model: mbuf.py's packing of the lengths."""
    pt, lens = naive.get_ptype(frame, layers)
    g = lambda k: lens.get(k, 0)   # noqa: E731
    if pt & V.PTYPE_TUNNEL_MASK:
        f = dict(l2_len=g("tunnel_len") + g("inner_l2_len"), l3_len=g("inner_l3_len"),
                 l4_len=g("inner_l4_len"), outer_l3_len=g("l3_len"), outer_l2_len=g("l2_len"))
    else:
        f = dict(l2_len=g("l2_len"), l3_len=g("l3_len"), l4_len=g("l4_len"), outer_l3_len=0,
                 outer_l2_len=0)
    widths = dict(l2_len=0x7F, l3_len=0x1FF, l4_len=0xFF, outer_l3_len=0x1FF, outer_l2_len=0x7F)
    return pt, pt, {**{k: v & widths[k] for k, v in f.items()}, "tso_segsz": 0}


@pytest.mark.parametrize("layers", LAYER_MASKS)
def test_mbuf_form_matches_model_one_segment_and_split(pool, layers):
    for name, f in NAMED.items():
        want = mbuf_model(f, layers)
        assert mbuf_ptype(pool, f, layers) == want, name
        assert mbuf_ptype(pool, f, layers, split=[7, len(f) - 7]) == want, name


def test_mbuf_form_truncations_never_read_past_data(pool):
    """Every prefix of every frame in one segment (the inline parser's bounds), junk after
    data_len that would change the answer if it were read."""
    for name, f in NAMED.items():
        for n in range(len(f) + 1):
            g = f[:n]
            want = mbuf_model(g)
            assert mbuf_ptype(pool, g, junk=b"\x08\x00" * 40) == want, (name, n)
            assert mbuf_ptype(pool, g, junk=b"\x86\xdd" * 40) == want, (name, n)


def test_net_get_ptype_stores_type_and_lengths(pool):
    st_ = pool.domain.state
    m = packet(pool, NAMED["vlan-ipv6-tcp"])
    m.set_tx_offload(tso_segsz=1400, outer_l2_len=9)
    assert net_get_ptype(st_, m.handle, ALL) == 0x146
    assert m.packet_type == 0x146
    assert tx_offload_unpack(m.tx_offload) == dict(l2_len=18, l3_len=40, l4_len=20,
                                                   tso_segsz=1400, outer_l3_len=0,
                                                   outer_l2_len=0)
    m.free()
    g = packet(pool, NAMED["nvgre-eth-ipv4-tcp"])          # tunnel: DPDK's offload convention
    assert net_get_ptype(st_, g.handle, ALL) == 0x01114011
    assert tx_offload_unpack(g.tx_offload) == dict(l2_len=8 + 14, l3_len=20, l4_len=20,
                                                   tso_segsz=0, outer_l3_len=20,
                                                   outer_l2_len=14)
    assert net_get_ptype(st_, g.handle, V.PTYPE_L2_MASK) == 1     # unreached layers: 0
    assert tx_offload_unpack(g.tx_offload)["l3_len"] == 0
    g.free()


def test_bulk_and_facade(pool):
    frames = [NAMED[k] for k in ("eth-ipv4-udp", "ipv6-tcp", "arp", "gre-ipv4-udp")]
    ms = [packet(pool, f, [5, len(f) - 5]) for f in frames]
    hs = np.array([ms[0].handle, -1] + [m.handle for m in ms[1:]], np.int32)
    st_ = pool.domain.state
    assert net_get_ptype_bulk(st_, hs, hs.size, ALL) == 4
    want = [model(f)[0] for f in frames]
    assert [int(st_.mb["packet_type"][m.handle]) for m in ms] == want
    assert net_get_ptype_bulk(st_, hs, hs.size + 1, ALL) == pktbuf.errors.E_INVAL
    assert list(api.get_ptype_bulk(pool, hs)) == [want[0], 0] + want[1:]
    assert api.get_ptype(ms[0]) == want[0]
    assert api.get_ptype((pool, ms[1].handle), layers=V.PTYPE_L2_MASK) == 1
    pt, lens = api.get_ptype_lens(ms[3])
    assert pt == 0x02102011 and lens["tunnel_len"] == 4 and lens["inner_l4_len"] == 8
    assert api.ptype_name(pt) == "L2_ETHER L3_IPV4 TUNNEL_GRE INNER_L3_IPV4 INNER_L4_UDP "
    assert api.ptype_name(0) == "UNKNOWN"
    with pytest.raises(pktbuf.InvalidArgument):
        api.get_ptype(ms[0], layers=-1)
    with pytest.raises(pktbuf.InvalidArgument):
        api.get_ptype("frame")
    with pytest.raises(pktbuf.InvalidArgument):
        api.ptype_name(1 << 32)
    h0 = ms[0].handle
    for m in ms:
        m.free()
    with pytest.raises(pktbuf.DoubleFree):
        api.get_ptype((pool, h0))
    with pytest.raises(pktbuf.DoubleFree):
        api.get_ptype_bulk(pool, [h0])
