"""examples/nat44.py against the model in naive.py: inside frames out, then outside frames
(replies to the mappings made, and strangers) in; per-frame verdicts, translated bytes
byte-exact, checksums recomputed by dpkt for the frames that came in with good ones (and the
one's-complement error of a bad one carried over, as an update must), counters and drop
reasons, every mbuf back in the pool."""
from __future__ import annotations

import struct

import dpkt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .frames import (
    DST4,
    PORTS,
    SRC4,
    all_back,
    ether,
    example,
    ipv4_packet,
    make_ports,
    run,
    splits,
)
from .naive import NatModel, l3_of

POOL, RANGE = "203.0.113.6/31", (1024, 1027)       # 8 public endpoints: the pool runs out

nat44 = example("nat44")


@pytest.fixture(scope="module")
def wire():
    pool, ports = make_ports()
    yield pool, ports
    ports.close()


@st.composite
def nat_frame(draw, ip=None):
    """A frame for the NAT: mostly IPv4 TCP/UDP/ICMP, some other protocols, VLAN tags,
    fragments, bad checksums, ARP, IPv6; cut off only inside its headers (a frame cut in its
    payload would be translated, but its L4 checksum could not be recomputed to check)."""
    kind = draw(st.sampled_from(["ipv4"] * 8 + ["arp", "ipv6"]))
    vlan = draw(st.sampled_from([0, 0, 0, 1]))
    if kind != "ipv4":
        return ether(0x0806 if kind == "arp" else 0x86DD, bytes(40), vlan), False
    b, hdrs = ip if ip is not None else draw(ipv4_packet(protos=(6, 17, 17, 1, 47)))
    f = bytearray(ether(0x0800, b, vlan))
    l3 = 14 + 4 * vlan
    bad = draw(st.sampled_from([None] * 6 + ["ip", "l4"]))
    if bad:                                   # a wrong checksum (not just another 0/0xFFFF)
        at = l3 + 10 if bad == "ip" else l3 + (f[l3] & 15) * 4 + {6: 16, 17: 6, 1: 2}.get(
            f[l3 + 9], 2)
        f[at] ^= draw(st.integers(1, 0x7F))
    if draw(st.integers(0, 11)) == 0:
        f = f[:draw(st.integers(1, l3 + hdrs - 1))]
    return bytes(f), bad is not None


def reply(draw, model):
    """An outside frame for one of the model's public endpoints (or a near miss)."""
    (proto, addr, port), _ = draw(st.sampled_from(sorted(model.out2in.items())))
    port ^= draw(st.sampled_from([0, 0, 0, 1]))
    remote = draw(st.sampled_from(DST4))
    if proto == 6:
        l4 = dpkt.tcp.TCP(sport=draw(st.sampled_from(PORTS)), dport=port, data=b"reply")
    elif proto == 17:
        l4 = dpkt.udp.UDP(sport=draw(st.sampled_from(PORTS)), dport=port, ulen=13,
                            data=b"reply")
    else:
        l4 = dpkt.icmp.ICMP(type=draw(st.sampled_from([0, 0, 8])),
                            data=dpkt.icmp.ICMP.Echo(id=port, seq=1, data=b"pong"))
    b = bytes(dpkt.ip.IP(src=remote, dst=addr, p=proto, data=l4))
    return draw(nat_frame(ip=(b, 20 + (20 if proto == 6 else 8))))


def check_with_dpkt(frames_in, bad, model, frames_out, inside):
    """Each good translated frame: its IP and L4 checksums are what dpkt computes."""
    outs = iter(frames_out)
    for f, b in zip(frames_in, bad):
        if isinstance(NatModel.translate(model, f, inside), str):
            continue
        g = next(outs)
        if b:
            continue
        l3 = l3_of(g)[1]
        ip = dpkt.ip.IP(g[l3:])
        ip.sum = 0
        if ip.p == 17 and ip.data.sum == 0:   # no UDP checksum: it stays so (dpkt would add
            assert bytes(ip)[:ip.hl * 4] == g[l3:l3 + ip.hl * 4]             # one)
            continue
        ip.data.sum = 0
        assert bytes(ip) == g[l3:]


@given(data=st.data(), inside=st.lists(nat_frame(), min_size=1, max_size=30))
def test_nat44_matches_model(wire, data, inside):
    pool, ports = wire
    stg = nat44.stage(0, POOL, RANGE, entries=64)
    model = NatModel(POOL, RANGE, 64)
    frames = [f for f, _ in inside]
    out, r = run(stg, frames, data.draw(splits(len(frames))), pool, ports, 0, 1)
    expect = model.run(frames, True)
    assert out == expect
    assert r.counters() == model.c
    assert r.drop_counts() == model.drops
    check_with_dpkt(frames, [b for _, b in inside], _frozen(model), out, True)
    assert nat44.mappings(stg) == sorted(
        (k[0], _a(k[1]), k[2], _a(v[0]), v[1]) for k, v in model.in2out.items())
    # and back: replies to the mappings, strangers, junk
    back = []
    for _ in range(data.draw(st.integers(1, 30))):
        if model.out2in and data.draw(st.integers(0, 3)):
            back.append(data.draw(st.composite(lambda d: reply(d, model))()))
        else:
            back.append(data.draw(nat_frame()))
    model.c = dict.fromkeys(model.c, 0)
    model.drops = dict.fromkeys(model.drops, 0)
    frames = [f for f, _ in back]
    out, r = run(stg, frames, data.draw(splits(len(frames))), pool, ports, 1, 0)
    assert out == model.run(frames, False)
    assert r.counters() == model.c
    assert r.drop_counts() == model.drops
    check_with_dpkt(frames, [b for _, b in back], _frozen(model), out, False)
    assert all_back(pool)


def _a(b):
    import ipaddress
    return ipaddress.IPv4Address(b)


def _frozen(model):
    """A copy of the model that translates with its current mappings and makes no more."""
    m = NatModel(POOL, RANGE, 64)
    m.in2out, m.out2in, m.next, m.capacity = dict(model.in2out), dict(model.out2in), \
        model.next, model.next
    return m


def test_round_trip_restores_the_frame(wire):
    """Out and back: the inside host gets exactly what a reply to its own frame would be."""
    pool, ports = wire
    stg = nat44.stage()
    ip = dpkt.ip.IP(src=SRC4[0], dst=DST4[2], p=6,
                    data=dpkt.tcp.TCP(sport=5555, dport=80, flags=dpkt.tcp.TH_SYN))
    out, r = run(stg, [ether(0x0800, bytes(ip))], [[]], pool, ports, 0, 1)
    assert r.counters() == {"out": 1, "in": 0, "new_mappings": 1}
    g = dpkt.ip.IP(out[0][14:])
    assert (g.src, g.data.sport) == (bytes([203, 0, 113, 4]), 1024)
    rep = dpkt.ip.IP(src=g.dst, dst=g.src, p=6,
                     data=dpkt.tcp.TCP(sport=80, dport=1024, flags=dpkt.tcp.TH_SYN))
    back, r = run(stg, [ether(0x0800, bytes(rep))], [[]], pool, ports, 1, 0)
    want = dpkt.ip.IP(src=g.dst, dst=SRC4[0], p=6,
                      data=dpkt.tcp.TCP(sport=80, dport=5555, flags=dpkt.tcp.TH_SYN))
    assert back == [ether(0x0800, bytes(want))]
    assert all_back(pool)


def test_udp_checksum_that_becomes_zero_is_sent_as_ffff(wire):
    """RFC 768: a computed UDP checksum of 0 goes out as 0xFFFF -- a payload word chosen so
    that the translated datagram sums to 0xFFFF."""
    from .naive import ones_sum
    pool, ports = wire
    pub, src, dst = bytes([203, 0, 113, 4]), SRC4[0], DST4[2]
    base = ones_sum(pub + dst + struct.pack("!HHHHHHH", 17, 10, 1024, 53, 10, 0, 0))
    word = ~base & 0xFFFF                     # base + ~base = 0xFFFF: the sum of -0
    ip = dpkt.ip.IP(src=src, dst=dst, p=17,
                    data=dpkt.udp.UDP(sport=4000, dport=53, ulen=10,
                                      data=struct.pack("!H", word)))
    f = ether(0x0800, bytes(ip))
    out, _ = run(nat44.stage(), [f], [[]], pool, ports, 0, 1)
    assert out == NatModel("203.0.113.4/30", (1024, 65535), 1 << 16).run([f], True)
    assert out[0][40:42] == b"\xff\xff" and out[0][26:30] == pub
    assert all_back(pool)
