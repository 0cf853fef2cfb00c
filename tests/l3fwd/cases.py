"""The captures the l3fwd tests feed to both l3fwds: every kind of frame of docs/l3fwd.md's
summary table, on two ports.

Each frame is listed with the lookup modes in which its fate is *deterministic* in DPDK:
short frames whose fate depends on bytes past their end (the mbuf's stale data room) are left
out of the modes that read those bytes.
"""
from __future__ import annotations

from .frames import MAC_A, ether, ipv4, ipv6, tcp, udp, v6

ALL = ("lpm", "em", "fib")


def _v4_frames(x: int, y: int):
    """Frames arriving on a port whose default routes are 198.18.x.0/24 (x = the port)."""
    hit = f"198.18.{y}.7"           # to the other port
    own = f"198.18.{x}.9"           # back to this one
    out = []

    def add(fr, modes=ALL):
        out.append((fr, modes))

    for ttl in (0, 1, 2, 64, 255):
        add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), ttl=ttl))
    add(ether(0x0800) + ipv4("10.0.0.1", own, payload=udp()))
    add(ether(0x0800) + ipv4("10.0.0.1", "10.9.9.9", payload=udp()))          # miss
    add(ether(0x0800) + ipv4("10.0.0.1", "198.18.200.1", payload=udp()))      # miss
    add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), good_cksum=False, cksum=0x1234))
    add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), cksum=0x00FF))   # carry into b25
    add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), cksum=0xFFFF))   # wraps to 0
    add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), cksum=0xFF00))
    for vihl in (0x65, 0x44, 0x40, 0x35, 0x46, 0x4F, 0x00, 0xFF):
        opts = bytes(((vihl & 0xF) - 5) * 4) if 0x45 < vihl <= 0x4F else b""
        add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), vihl=vihl, opts=opts))
    for tl in (0, 19, 20, 0x0100, 0x1300, 0xFFFF):
        add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), tot_len=tl))
    add(ether(0x0800) + ipv4("10.0.0.1", hit, proto=6, payload=tcp()))
    add(ether(0x0800) + ipv4("10.0.0.1", hit, proto=1, payload=bytes(8)))     # ICMP
    add(ether(0x0800) + ipv4("10.0.0.1", hit, proto=132, payload=bytes(12)))  # SCTP
    add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), frag=0x2000))    # MF
    add(ether(0x0800) + ipv4("10.0.0.1", hit, payload=b"\x00\x09\x00\x09" + bytes(8),
                             frag=0x0010, proto=17))                           # later fragment
    # EM flows of the default table: from 198.18.Z.1 to 198.18.Z.0, UDP 9 -> 9
    for z in (x, y, 5):
        add(ether(0x0800) + ipv4(f"198.18.{z}.1", f"198.18.{z}.0", payload=udp(9, 9)))
        add(ether(0x0800) + ipv4(f"198.18.{z}.1", f"198.18.{z}.0", payload=udp(9, 9), ttl=1))
        add(ether(0x0800) + ipv4(f"198.18.{z}.1", f"198.18.{z}.0", payload=udp(9, 10)))
        add(ether(0x0800) + ipv4(f"198.18.{z}.1", f"198.18.{z}.0", proto=6,
                                 payload=b"\x00\x09\x00\x09" + bytes(16)))
        add(ether(0x0800) + ipv4(f"198.18.{z}.1", f"198.18.{z}.0", payload=udp(9, 9),
                                 opts=bytes(4), vihl=0x46))
    # VLAN / QinQ / ARP / LLDP / MPLS / PPPoE / IPv6-in-0x0800
    inner = ipv4("10.0.0.1", hit, payload=udp())
    add(ether(0x8100) + b"\x00\x05\x08\x00" + inner)
    add(ether(0x88A8) + b"\x00\x05\x81\x00\x00\x06\x08\x00" + inner)
    add(ether(0x0806) + bytes.fromhex("0001080006040001") + MAC_A + bytes(4) + bytes(10))
    add(ether(0x88CC) + bytes(40))
    add(ether(0x8847) + bytes(4) + inner)
    add(ether(0x8864) + bytes(8) + inner)
    add(ether(0x0800) + ipv6(v6(y, 1), v6(y, 2), payload=udp()))
    # short IPv4 frames whose fate does not depend on what follows them
    add((ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), vihl=0x65))[:18])   # dropped
    add((ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), vihl=0x65))[:30])
    add((ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp(), tot_len=5))[:20])
    add((ether(0x0800) + ipv4("10.0.0.1", hit, payload=udp()))[:34], ("lpm", "fib"))
    add((ether(0x0800) + ipv4("10.0.0.1", hit, proto=1, payload=bytes(8)))[:34])  # EM: no key
    add((ether(0x0806) + bytes(28))[:20], ("lpm", "em"))
    add((ether(0x0806) + bytes(28))[:14], ("lpm", "em"))
    return out


def _v6_frames(x: int, y: int):
    out = []

    def add(fr, modes=ALL):
        out.append((fr, modes))

    for hl in (0, 1, 2, 64):
        add(ether(0x86DD) + ipv6(v6(7, 1), v6(y, 5), payload=udp(), hlim=hl))
    add(ether(0x86DD) + ipv6(v6(7, 1), v6(x, 5), payload=udp()))
    add(ether(0x86DD) + ipv6(v6(7, 1), bytes.fromhex("20010db8" + "00" * 11 + "01"),
                             payload=udp()))                                  # miss
    add(ether(0x86DD) + ipv6(v6(7, 1), v6(y, 5), nh=6, payload=tcp()))
    add(ether(0x86DD) + ipv6(v6(7, 1), v6(y, 5), nh=58, payload=bytes(8)))    # ICMPv6
    add(ether(0x86DD) + ipv6(v6(7, 1), v6(y, 5), nh=0, payload=bytes(8) + udp()))  # ext hdr
    for z in (x, y, 9):                                     # EM IPv6 default flows
        add(ether(0x86DD) + ipv6(v6(z, 1), v6(z, 0), payload=udp(9, 9)))
        add(ether(0x86DD) + ipv6(v6(z, 1), v6(z, 0), payload=udp(9, 9), hlim=1))
        add(ether(0x86DD) + ipv6(v6(z, 1), v6(z, 0), payload=udp(10, 9)))
    add(ether(0x86DD) + ipv4("10.0.0.1", "198.18.1.1", payload=bytes(40)))    # v4 in 0x86DD
    add((ether(0x86DD) + ipv6(v6(7, 1), v6(y, 5), nh=58, payload=bytes(8)))[:54],
        ("lpm", "fib", "em"))        # EM: ICMPv6 is never looked up; LPM: dst inside
    return out


def frames_for(port: int, other: int, mode: str) -> list[bytes]:
    fr = _v4_frames(port, other) + _v6_frames(port, other)
    return [f for f, modes in fr if mode in modes]
