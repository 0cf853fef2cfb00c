"""Frames for the net tests: hand-built ones with names, and a random generator that stacks
layers the parser knows (and some it does not), then may cut the frame anywhere.

Built with :mod:`pktbuf.net.hdr.naive` (struct, network order), independent of the kernels.
"""
from __future__ import annotations

import random

from pktbuf.net.cksum import naive as ck
from pktbuf.net.hdr import naive as H

MAC1, MAC2 = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
A1, A2 = 0x0A000001, 0x0A000002
S6 = bytes.fromhex("20010db8000000000000000000000001")
D6 = bytes.fromhex("20010db8000000000000000000000002")


def eth(etype, vlan=None, qinq=None):
    if qinq is not None:
        return H.ether(MAC1, MAC2, 0x88A8) + H.vlan(qinq, 0x8100) + H.vlan(vlan or 0, etype)
    if vlan is not None:
        return H.ether(MAC1, MAC2, 0x8100) + H.vlan(vlan, etype)
    return H.ether(MAC1, MAC2, etype)


def udp(payload=b"abcd", sport=1234, dport=53):
    return H.udp(sport, dport, 8 + len(payload)) + payload


def tcp(payload=b"", hdr_len=20, flags=0x18):
    return H.tcp(1000, 80, 1, 2, hdr_len, flags, 65535) + payload


def ipv4(proto, l4, opts=b"", frag=0, ttl=64, cksum=True, src=A1, dst=A2):
    hdr = bytearray(H.ipv4(0, 20 + len(opts) + len(l4), 7, frag, ttl, proto, src, dst, opts))
    if cksum:
        hdr[10:12] = ck.ipv4_cksum(bytes(hdr)).to_bytes(2, "little")
    return bytes(hdr) + l4


def ipv6(proto, payload, exts=()):
    """``exts``: (kind, bytes) pairs; each header's next-header byte is fixed up here."""
    chain = b""
    kinds = [k for k, _ in exts] + [proto]
    for i, (_, b) in enumerate(exts):
        chain += bytes([kinds[i + 1]]) + b[1:]
    return H.ipv6(0, 0, len(chain) + len(payload), kinds[0], 64, S6, D6) + chain + payload


def with_l4_cksum(ip: bytes) -> bytes:
    """Fill the UDP/TCP checksum of an IPv4 or plain IPv6 packet (naive model)."""
    b = bytearray(ip)
    if b[0] >> 4 == 4:
        ihl = (b[0] & 15) * 4
        proto, pseudo, l4 = b[9], ck.ipv4_pseudo(bytes(b)), bytes(b[ihl:])
        base = ihl
    else:
        proto, pseudo, l4, base = b[6], ck.ipv6_pseudo(bytes(b)), bytes(b[40:]), 40
    off = 6 if proto == 17 else 16
    v = ck.l4_cksum(pseudo, l4, off, proto == 17)
    b[base + off:base + off + 2] = v.to_bytes(2, "little")
    return bytes(b)


HOP = (0, H.ipv6_ext(0, 8))
DST = (60, H.ipv6_ext(0, 16))
RTG = (43, H.ipv6_ext(0, 24, routing=True))
FRAG = (44, H.ipv6_frag(0, 0, True, 99))
AH = (51, bytes([0, 4]) + bytes(22))          # 24 bytes: (4 + 2) * 4

NAMED = {
    "eth-ipv4-udp": eth(0x0800) + with_l4_cksum(ipv4(17, udp())),
    "eth-ipv4-tcp": eth(0x0800) + with_l4_cksum(ipv4(6, tcp(b"hello"))),
    "eth-ipv4-tcp-opts": eth(0x0800) + with_l4_cksum(ipv4(6, tcp(b"x", hdr_len=32))),
    "ipv4-options-tcp": eth(0x0800) + ipv4(6, tcp(), opts=bytes([1, 1, 1, 0])),
    "ipv4-options-40": eth(0x0800) + ipv4(17, udp(), opts=bytes([7, 39]) + bytes(38)),
    "ipv4-icmp": eth(0x0800) + ipv4(1, H.icmp_echo(8, 0, 1, 1) + b"ping"),
    "ipv4-sctp": eth(0x0800) + ipv4(132, bytes(12) + b"data"),
    "ipv4-frag-first": eth(0x0800) + ipv4(17, udp(), frag=0x2000),
    "ipv4-frag-later": eth(0x0800) + ipv4(17, b"tail", frag=0x0004),
    "ipv4-df": eth(0x0800) + ipv4(17, udp(), frag=0x4000),
    "ipv4-igmp": eth(0x0800) + ipv4(2, bytes(8)),
    "vlan-ipv4-udp": eth(0x0800, vlan=100) + ipv4(17, udp()),
    "vlan-ipv6-tcp": eth(0x86DD, vlan=7) + ipv6(6, tcp()),
    "qinq-ipv4-udp": eth(0x0800, vlan=5, qinq=9) + ipv4(17, udp()),
    "qinq-ipv6-udp": eth(0x86DD, vlan=5, qinq=9) + ipv6(17, udp()),
    "ipv6-udp": eth(0x86DD) + with_l4_cksum(ipv6(17, udp())),
    "ipv6-tcp": eth(0x86DD) + with_l4_cksum(ipv6(6, tcp(b"six"))),
    "ipv6-icmpv6": eth(0x86DD) + ipv6(58, H.icmp_echo(128, 0, 3, 4)),
    "ipv6-hop-dst-udp": eth(0x86DD) + ipv6(17, udp(), [HOP, DST]),
    "ipv6-rtg-tcp": eth(0x86DD) + ipv6(6, tcp(), [RTG]),
    "ipv6-frag-udp": eth(0x86DD) + ipv6(17, udp(), [FRAG]),
    "ipv6-hop-frag": eth(0x86DD) + ipv6(17, udp(), [HOP, FRAG]),
    "ipv6-ah-tcp": eth(0x86DD) + ipv6(6, tcp(), [AH]),
    "ipv6-esp": eth(0x86DD) + ipv6(50, bytes(16)),
    "ipv6-nonext": eth(0x86DD) + ipv6(59, b""),
    "ipv6-hop-none": eth(0x86DD) + ipv6(59, b"", [HOP]),
    "ipv6-six-ext": eth(0x86DD) + ipv6(17, udp(), [HOP, DST, DST, DST, DST, DST]),
    "arp": eth(0x0806) + H.arp(1, MAC1, A1, bytes(6), A2),
    "vlan-arp": eth(0x0806, vlan=3) + H.arp(2, MAC1, A1, MAC2, A2),
    "lldp": eth(0x88CC) + bytes(30),
    "mpls": eth(0x8847) + bytes.fromhex("000101ff") + ipv4(17, udp()),
    "gre-ipv4-udp": eth(0x0800) + ipv4(47, H.gre(0x0800) + ipv4(17, udp())),
    "gre-key-ipv6-tcp": eth(0x0800) + ipv4(47, H.gre(0x86DD, key=5) + ipv6(6, tcp())),
    "gre-key-seq-ipv4": eth(0x0800) + ipv4(47, H.gre(0x0800, key=1, seq=2) + ipv4(6, tcp())),
    "gre-routing": eth(0x0800) + ipv4(47, bytes.fromhex("40000800") + ipv4(17, udp())),
    "nvgre-eth-ipv4-tcp": eth(0x0800) + ipv4(47, H.gre(0x6558, key=0x100) + eth(0x0800)
                                             + ipv4(6, tcp())),
    "nvgre-vlan-ipv6": eth(0x0800) + ipv4(47, H.gre(0x6558) + eth(0x86DD, vlan=2)
                                          + ipv6(17, udp(), [HOP])),
    "ipip-udp": eth(0x0800) + ipv4(4, ipv4(17, udp())),
    "ipip-frag": eth(0x0800) + ipv4(4, ipv4(17, udp(), frag=0x2000)),
    "ip6-in-ip4-tcp": eth(0x0800) + ipv4(41, ipv6(6, tcp())),
    "ip4-in-ip6-udp": eth(0x86DD) + ipv6(4, ipv4(17, udp())),
    "vxlan-port-is-udp": eth(0x0800) + ipv4(17, udp(bytes(8) + eth(0x0800), dport=4789)),
    "ipv4-bad-vihl": eth(0x0800) + bytes([0x55]) + ipv4(17, udp())[1:],
    "ipv4-ihl-3": eth(0x0800) + bytes([0x43]) + ipv4(17, udp())[1:],
    "short-tcp": eth(0x0800) + ipv4(6, b"\x00\x50"),
    "ipip-short-tcp": eth(0x0800) + ipv4(4, ipv4(6, b"\x00\x50")),
    "ethertype-0x2f00": eth(0x2F00) + bytes(4) + ipv4(17, udp()),
    "teb-ethertype": eth(0x6558) + eth(0x0800) + ipv4(17, udp()),
    "ipv4-proto-8": eth(0x0800) + ipv4(8, ipv4(17, udp())),
    "runt": eth(0x0800)[:10],
    "eth-only": eth(0x0800),
    "vlan-cut": eth(0x0800, vlan=1)[:16],
}


# ---- random frames --------------------------------------------------------------------------

def _l4(rng: random.Random, proto: int, depth: int) -> bytes:
    if proto == 17:
        return udp(rng.randbytes(rng.randrange(0, 12)))
    if proto == 6:
        hl = rng.choice([20, 20, 24, 40, 60])
        t = bytearray(tcp(rng.randbytes(rng.randrange(0, 8)), hdr_len=hl))
        if rng.random() < 0.1:
            t[12] = rng.randrange(256)            # a lying data offset
        return bytes(t)
    if proto in (47, 4, 41) and depth == 0:
        if proto == 47:
            inner_et = rng.choice([0x0800, 0x86DD, 0x6558, 0x0806, 0x8100])
            g = H.gre(inner_et, key=rng.choice([None, 7]), seq=rng.choice([None, 9]))
            if rng.random() < 0.15:
                g = bytes([rng.randrange(256)]) + g[1:]     # random C/R/K/S bits
            if inner_et == 0x6558:
                return g + l2(rng, depth + 1)
            if inner_et == 0x8100:
                return g + H.vlan(1, 0x0800) + l3(rng, 0x0800, depth + 1)
            return g + l3(rng, inner_et, depth + 1)
        return l3(rng, 0x0800 if proto == 4 else 0x86DD, depth + 1)
    return rng.randbytes(rng.randrange(0, 16))


def l3(rng: random.Random, et: int, depth: int = 0) -> bytes:
    protos = [17, 6, 132, 1, 58, 47, 4, 41, 2, rng.randrange(256)]
    if et == 0x0800:
        proto = rng.choice(protos)
        opts = rng.choice([b"", b"", bytes([1, 1, 1, 0]), bytes([7, 7]) + bytes(6)])
        frag = rng.choice([0, 0, 0, 0x4000, 0x2000, 0x0010, rng.randrange(65536)])
        b = bytearray(ipv4(proto, _l4(rng, proto, depth), opts=opts, frag=frag))
        if rng.random() < 0.1:
            b[0] = rng.choice([0x45, 0x4F, 0x44, 0x55, rng.randrange(256)])
        return bytes(b)
    if et == 0x86DD:
        proto = rng.choice(protos + [59])
        pool = [HOP, DST, RTG, FRAG, AH, (50, bytes(8)), (59, b""), (rng.choice([0, 43, 60]),
                bytes([0, rng.randrange(4)]) + rng.randbytes(6))]
        exts = [rng.choice(pool) for _ in range(rng.choice([0, 0, 1, 2, 3, 6]))]
        return ipv6(proto, _l4(rng, proto, depth), exts)
    if et == 0x0806:
        return H.arp(1, MAC1, A1, bytes(6), A2)
    return rng.randbytes(rng.randrange(0, 40))


def l2(rng: random.Random, depth: int = 0) -> bytes:
    et = rng.choice([0x0800, 0x0800, 0x86DD, 0x86DD, 0x0806, 0x8847, 0x88CC, 0x6558,
                     rng.randrange(65536)])
    tag = rng.choice([None, None, "vlan", "qinq"])
    if tag == "vlan":
        head = eth(et, vlan=rng.randrange(4096))
    elif tag == "qinq":
        head = eth(et, vlan=rng.randrange(4096), qinq=rng.randrange(4096))
    else:
        head = eth(et)
    if et == 0x6558 and depth == 0:
        return head + l2(rng, depth + 1)
    return head + l3(rng, et, depth)


def random_frame(rng: random.Random) -> bytes:
    """A frame of random layers, cut short one time in four (maybe to nothing)."""
    f = l2(rng)
    if rng.random() < 0.25:
        f = f[:rng.randrange(0, len(f) + 1)]
    return f


def random_split(rng: random.Random, n: int) -> list[int]:
    """Segment lengths summing to ``n`` (zero-length segments included), or [n]."""
    if n == 0 or rng.random() < 0.3:
        return [n]
    cuts = sorted(rng.randrange(0, n + 1) for _ in range(rng.randrange(1, 5)))
    out, prev = [], 0
    for c in cuts + [n]:
        out.append(c - prev)
        prev = c
    return out
