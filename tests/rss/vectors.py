"""Published RSS verification vectors (Intel 82599 datasheet section 7.1.2.8.3, the table DPDK's
app/test/test_thash.c and Microsoft's "Verifying the RSS Hash Calculation" carry), and frame
builders for the tuple tests."""
from __future__ import annotations

import ipaddress
import struct

# (src, sport, dst, dport, hash of addresses only, hash with ports), default key
V4 = [
    ("66.9.149.187", 2794, "161.142.100.80", 1766, 0x323e8fc2, 0x51ccc178),
    ("199.92.111.2", 14230, "65.69.140.83", 4739, 0xd718262a, 0xc626b0ea),
    ("24.19.198.95", 12898, "12.22.207.184", 38024, 0xd2d0a5de, 0x5c2b394a),
    ("38.27.205.30", 48228, "209.142.163.6", 2217, 0x82989176, 0xafc7327f),
    ("153.39.163.191", 44251, "202.188.127.2", 1303, 0x5d1809c5, 0x10e828a2),
]
V6 = [
    ("3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x2cc18cd5, 0x40207d3d),
    ("3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739, 0x0f0c461c, 0xdde51bbf),
    ("3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, "fe80::200:f8ff:fe21:67cf", 38024,
     0x4b61e985, 0x02d1feef),
]
# the symmetric key (6d5a x 20), the V4 flows with ports, either direction
V4_SYMMETRIC = [0x9fcc9fcc, 0x60d760d7, 0x3a3e3a3e, 0xd26ed26e, 0xf23ef23e]


def addr(s: str) -> bytes:
    return ipaddress.ip_address(s).packed


def eth(ethertype: int, vlan: int | None = None, tpid: int = 0x8100) -> bytes:
    hdr = bytes.fromhex("020000000002 020000000001")
    if vlan is not None:
        hdr += struct.pack("!HH", tpid, vlan)
    return hdr + struct.pack("!H", ethertype)


def ipv4(src: bytes, dst: bytes, proto: int, payload: bytes, options: bytes = b"",
         frag: int = 0) -> bytes:
    assert len(options) % 4 == 0
    ihl = 5 + len(options) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(options) + len(payload), 1,
                      frag, 64, proto, 0, src, dst)
    return hdr + options + payload


def ipv6(src: bytes, dst: bytes, nh: int, payload: bytes) -> bytes:
    return struct.pack("!IHBB16s16s", 6 << 28, len(payload), nh, 64, src, dst) + payload


def l4(sport: int, dport: int, proto: int = 17) -> bytes:
    if proto == 6:
        return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, 0x02, 1024, 0, 0)
    return struct.pack("!HHHH", sport, dport, 8, 0)


def v4_frame(src, dst, sport, dport, proto=17, vlan=None, options=b"", frag=0, tpid=0x8100):
    return eth(0x0800, vlan, tpid) + ipv4(src, dst, proto, l4(sport, dport, proto), options, frag)


def v6_frame(src, dst, sport, dport, nh=17, vlan=None):
    return eth(0x86DD, vlan) + ipv6(src, dst, nh, l4(sport, dport, nh if nh in (6, 17) else 17))
