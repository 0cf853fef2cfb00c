"""Frames for the l3fwd tests, built by hand (network order, independent of the kernels),
and a minimal pcap reader/writer (nanosecond pcap, as DPDK's net_pcap writes)."""
from __future__ import annotations

import struct

MAC_A, MAC_B = bytes.fromhex("0a0000000001"), bytes.fromhex("0a0000000002")


def csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ether(etype: int, dst=MAC_A, src=MAC_B) -> bytes:
    return dst + src + etype.to_bytes(2, "big")


def ipv4(src: str, dst: str, proto=17, payload=b"", ttl=64, vihl=0x45, opts=b"",
         tot_len=None, good_cksum=True, cksum=None, frag=0) -> bytes:
    s = bytes(int(x) for x in src.split("."))
    d = bytes(int(x) for x in dst.split("."))
    tl = 20 + len(opts) + len(payload) if tot_len is None else tot_len
    h = bytearray(struct.pack("!BBHHHBBH4s4s", vihl, 0, tl, 1, frag, ttl, proto, 0, s, d) + opts)
    if cksum is not None:
        h[10:12] = cksum.to_bytes(2, "big")
    elif good_cksum:
        h[10:12] = csum(bytes(h)).to_bytes(2, "big")
    return bytes(h) + payload


def ipv6(src: bytes, dst: bytes, nh=17, payload=b"", hlim=64) -> bytes:
    return struct.pack("!IHBB", 0x60000000, len(payload), nh, hlim) + src + dst + payload


def udp(sport=9, dport=9, data=b"hello") -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data


def tcp(sport=1000, dport=80) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, 0x02, 65535, 0, 0)


def v6(prefix_x: int, last: int = 0) -> bytes:
    return bytes((0x20, 0x01, 0x02, 0x00, 0, 0, 0, prefix_x)) + bytes(7) + bytes((last,))


def write_pcap(path, frames) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1, i, len(fr), len(fr)) + fr)


def read_pcap(path) -> tuple[bytes, list[bytes]]:
    """(the 24-byte file header, the frames' bytes)."""
    data = open(path, "rb").read()
    hdr, off, out = data[:24], 24, []
    while off + 16 <= len(data):
        incl = struct.unpack_from("<I", data, off + 8)[0]
        out.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return hdr, out
