"""Headers built and read with :mod:`struct`, byte by byte in network order: the tests'
reference for the accessors and builders of :mod:`pktbuf.net.hdr`."""
from __future__ import annotations

import struct


def ether(dst: bytes, src: bytes, etype: int) -> bytes:
    return bytes(dst) + bytes(src) + struct.pack("!H", etype)


def vlan(tci: int, etype: int) -> bytes:
    return struct.pack("!HH", tci, etype)


def arp(op: int, sha: bytes, sip: int, tha: bytes, tip: int) -> bytes:
    return struct.pack("!HHBBH6sI6sI", 1, 0x0800, 6, 4, op, bytes(sha), sip, bytes(tha), tip)


def ipv4(tos, total_length, packet_id, fragment_offset, ttl, proto, src, dst,
         opts: bytes = b"") -> bytes:
    ihl = 5 + len(opts) // 4
    return struct.pack("!BBHHHBBHII", 0x40 | ihl, tos, total_length, packet_id,
                       fragment_offset, ttl, proto, 0, src, dst) + bytes(opts)


def ipv4_fields(b: bytes) -> dict:
    v, tos, tl, pid, fo, ttl, proto, ck, src, dst = struct.unpack("!BBHHHBBHII", b[:20])
    return dict(version=v >> 4, ihl=v & 15, tos=tos, total_length=tl, packet_id=pid,
                fragment_offset=fo, ttl=ttl, proto=proto, cksum=ck, src=src, dst=dst)


def ipv6(tc, flow, payload_len, proto, hops, src: bytes, dst: bytes) -> bytes:
    return struct.pack("!IHBB", (6 << 28) | (tc << 20) | flow, payload_len, proto, hops) \
        + bytes(src) + bytes(dst)


def ipv6_ext(next_hdr: int, length: int, routing: bool = False) -> bytes:
    """An empty options header (PadN filled) or, with ``routing``, a zero routing header."""
    b = bytearray(length)
    b[0], b[1] = next_hdr, length // 8 - 1
    if not routing:
        b[2], b[3] = 1, 4
        for u in range(8, length, 8):
            b[u], b[u + 1] = 1, 6
    return bytes(b)


def ipv6_frag(next_hdr: int, offset: int, more: bool, ident: int) -> bytes:
    return struct.pack("!BBHI", next_hdr, 0, offset | int(more), ident)


def udp(sport, dport, length) -> bytes:
    return struct.pack("!HHHH", sport, dport, length, 0)


def tcp(sport, dport, seq, ack, hdr_len, flags, window) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, (hdr_len // 4) << 4, flags,
                       window, 0, 0) + b"\x01" * (hdr_len - 20)


def icmp_echo(kind, code, ident, seq) -> bytes:
    return struct.pack("!BBHHH", kind, code, 0, ident, seq)


def gre(proto, key=None, seq=None) -> bytes:
    flags = (0x2000 if key is not None else 0) | (0x1000 if seq is not None else 0)
    out = struct.pack("!HH", flags, proto)
    if key is not None:
        out += struct.pack("!I", key)
    if seq is not None:
        out += struct.pack("!I", seq)
    return out
