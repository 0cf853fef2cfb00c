"""Frames for the example stages' tests (built with dpkt, so their checksums are computed by
someone else than the code under test), and the harness that runs a stage over them through
two net_ring loopback ports, each frame cut into segments where the test says."""
from __future__ import annotations

import importlib
import itertools
import os
import struct
import sys

import dpkt
from hypothesis import strategies as st

import pktbuf
from pktbuf.apps.stage.api import StageRunner

EX = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                  "examples")


def example(name):
    """The module ``examples/<name>.py``, imported by its name as the stage loop imports it."""
    if EX not in sys.path:
        sys.path.insert(0, EX)
    return importlib.import_module(name)


MAC = b"\x02\0\0\0\0\x01\x02\0\0\0\0\x02"
SRC4 = [bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), bytes([10, 66, 1, 1]), bytes([192, 0, 2, 9])]
DST4 = [bytes([192, 0, 2, 10]), bytes([192, 0, 2, 53]), bytes([198, 51, 100, 1]),
        bytes([10, 0, 0, 1])]
ADDR6 = [bytes.fromhex("20010db8" + "00" * 11 + f"{i:02x}") for i in (1, 2, 3)]
PORTS = [0, 22, 23, 53, 80, 81, 443, 1024, 5000, 65535]


@st.composite
def ipv4_packet(draw, protos=(6, 17, 1, 47, 132)):
    """``(ip bytes, l4 header length)``: an IPv4 packet with dpkt's checksums, maybe with
    options or fragment bits, a UDP checksum of 0 now and then."""
    proto = draw(st.sampled_from(protos))
    sport, dport = draw(st.sampled_from(PORTS)), draw(st.sampled_from(PORTS))
    payload = draw(st.binary(max_size=40))
    if proto == 6:
        l4, hl = dpkt.tcp.TCP(sport=sport, dport=dport, seq=draw(st.integers(0, 2**32 - 1)),
                              flags=dpkt.tcp.TH_ACK, data=payload), 20
    elif proto == 17:
        l4, hl = dpkt.udp.UDP(sport=sport, dport=dport, ulen=8 + len(payload), data=payload), 8
    elif proto == 1:
        echo = dpkt.icmp.ICMP.Echo(id=draw(st.sampled_from(PORTS)), seq=draw(st.integers(0, 9)),
                                   data=payload)
        l4, hl = dpkt.icmp.ICMP(type=draw(st.sampled_from([8, 8, 0, 3])), data=echo), 8
    else:
        l4, hl = struct.pack("!HH", sport, dport) + payload, 4
    opts = draw(st.sampled_from([b"", b"", b"", b"\x01" * 4, b"\x01" * 8]))
    ip = dpkt.ip.IP(src=draw(st.sampled_from(SRC4)), dst=draw(st.sampled_from(DST4)), p=proto,
                    id=draw(st.integers(0, 0xFFFF)), ttl=64, opts=opts, data=l4)
    ip.hl = 5 + len(opts) // 4
    frag = draw(st.sampled_from([None] * 8 + ["mf", "offset"]))
    if frag == "mf":
        ip.mf = 1
    elif frag == "offset":
        ip.offset = 8 * draw(st.integers(1, 100))
    b = bytearray(bytes(ip))
    if proto == 17 and draw(st.integers(0, 4)) == 0:       # "no checksum" (RFC 768)
        b[ip.hl * 4 + 6:ip.hl * 4 + 8] = b"\0\0"
    return bytes(b), ip.hl * 4 + hl


def ether(et, payload, vlan=0):
    tags = b"".join(struct.pack("!HH", 0x8100, 100 + i) for i in range(vlan))
    return MAC + tags + struct.pack("!H", et) + payload


@st.composite
def frame(draw, ipv6=True, cut=True):
    """A frame (bytes), maybe VLAN-tagged, IPv4, IPv6, ARP; maybe cut short anywhere."""
    kind = draw(st.sampled_from(["ipv4"] * 6 + (["ipv6"] * 2 if ipv6 else []) + ["arp"]))
    vlan = draw(st.sampled_from([0, 0, 0, 1, 2]))
    if kind == "ipv4":
        f = ether(0x0800, draw(ipv4_packet())[0], vlan)
    elif kind == "ipv6":
        nxt = draw(st.sampled_from([6, 17, 58, 44, 132]))
        body = struct.pack("!HH", draw(st.sampled_from(PORTS)), draw(st.sampled_from(PORTS))) \
            + draw(st.binary(max_size=30))
        ip6 = dpkt.ip6.IP6(src=draw(st.sampled_from(ADDR6)), dst=draw(st.sampled_from(ADDR6)),
                           nxt=nxt, hlim=64, plen=len(body), data=body)
        f = ether(0x86DD, bytes(ip6), vlan)
    else:
        f = ether(0x0806, bytes(28), vlan)
    if cut and draw(st.integers(0, 9)) == 0:
        f = f[:draw(st.integers(1, len(f)))]
    return f


def splits(n):
    """Where each of ``n`` frames is cut into segments (offsets; mostly none)."""
    return st.lists(st.lists(st.integers(1, 80), max_size=3).map(sorted), min_size=n,
                    max_size=n)


def run(stage, frames, cuts, pool, ports, rx=0, tx=1):
    """Frames in on loopback port ``rx`` (as segment chains), the stage's loop on ``rx ->
    tx`` until all are received; ``(frames out of tx, runner)``, every mbuf freed."""
    hs = []
    for f, c in zip(frames, cuts):
        edges = [0] + [x for x in dict.fromkeys(c) if 0 < x < len(f)] + [len(f)]
        segs = [pool.alloc().append_bytes(f[a:b]) for a, b in itertools.pairwise(edges)]
        for s in segs[1:]:
            segs[0].chain(s)
        hs.append(segs[0])
    assert ports[rx].tx_burst(hs) == len(hs)
    r = StageRunner(ports, stage, [(rx, 0, tx)], idle_backoff=False)
    while r.port_counts(rx)["rx"] < len(frames):
        r.run(0.005)
    out = []
    while len(got := ports[tx].rx_burst(64)):
        out += [pool.mbuf(int(h)).tobytes() for h in got]
        pool.free_bulk(got)
    return out, r


def all_back(pool):
    pool.cache_flush()
    pool.cache_flush(0)
    return pool.avail_count == pool.n


def make_ports():
    pool = pktbuf.PktmbufPool(2048, cache_size=32)
    ports = pktbuf.Ports(pool)
    for i in range(2):
        ports.open(f"net_ring{i}")
    return pool, ports
