"""The Internet checksum by its definition (RFC 1071), in plain Python: the tests' reference.

Everything here works in **wire order**: the data as big-endian 16-bit words, an odd last
byte padded with a zero, the sum folded with end-around carries.  DPDK's functions return the
same value byte-swapped (they add host words on a little-endian machine): :func:`to_dpdk` /
:func:`to_wire` convert.
"""
from __future__ import annotations


def to_wire(v: int) -> int:
    """A DPDK-order checksum as the big-endian number on the wire (tshark's value)."""
    return ((v & 0xFF) << 8) | ((v >> 8) & 0xFF)


to_dpdk = to_wire     # the same swap, the other way


def words(data: bytes) -> list[int]:
    b = bytes(data) + (b"\0" if len(data) % 2 else b"")
    return [(b[i] << 8) | b[i + 1] for i in range(0, len(b), 2)]


def ones_sum(data: bytes) -> int:
    """The folded, non-inverted one's-complement sum (0 only for all-zero data)."""
    s = sum(words(data))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def raw_cksum(data: bytes) -> int:
    """DPDK's ``rte_raw_cksum`` value (DPDK order)."""
    return to_dpdk(ones_sum(data))


def ipv4_cksum(hdr: bytes) -> int:
    """The IPv4 header checksum (DPDK order) of ``hdr`` with its checksum field zeroed."""
    h = bytearray(hdr[: (hdr[0] & 15) * 4])
    h[10:12] = b"\0\0"
    return to_dpdk(~ones_sum(bytes(h)) & 0xFFFF)


def ipv4_pseudo(hdr: bytes, l4_len: int | None = None) -> bytes:
    ihl = (hdr[0] & 15) * 4
    n = ((hdr[2] << 8) | hdr[3]) - ihl if l4_len is None else l4_len
    return bytes(hdr[12:20]) + bytes([0, hdr[9]]) + (n & 0xFFFF).to_bytes(2, "big")


def ipv6_pseudo(hdr: bytes) -> bytes:
    return bytes(hdr[8:40]) + ((hdr[4] << 8) | hdr[5]).to_bytes(4, "big") + bytes([0, 0, 0, hdr[6]])


def l4_cksum(pseudo: bytes, l4: bytes, cksum_off: int, udp: bool) -> int:
    """The UDP/TCP checksum (DPDK order) of ``l4`` (its checksum field at ``cksum_off`` zeroed)
    under ``pseudo``; UDP's 0 is sent as 0xFFFF."""
    d = bytearray(l4)
    d[cksum_off:cksum_off + 2] = b"\0\0"
    c = ~ones_sum(pseudo + bytes(d)) & 0xFFFF
    if c == 0 and udp:
        c = 0xFFFF
    return to_dpdk(c)


def l4_ok(pseudo: bytes, l4: bytes) -> bool:
    """The stored checksum is right (the sum over everything is 0xFFFF)."""
    return ones_sum(pseudo + bytes(l4)) == 0xFFFF


def raw_cksum_segments_dpdk(segs: list[bytes]) -> int:
    """DPDK 22.11's ``rte_raw_cksum_mbuf`` over a range split into ``segs``, bug included: a
    part starting at an odd offset has its 32-bit word sum cut to 16 bits, then swapped."""
    if len(segs) == 1:
        return raw_cksum(segs[0])
    total = 0
    done = 0
    for s in segs:
        part = 0
        for i in range(0, len(s) - 1, 2):
            part += s[i] | (s[i + 1] << 8)         # host (little-endian) words
        if len(s) % 2:
            part += s[-1]
        part &= 0xFFFFFFFF
        if done & 1:
            part = to_wire(part & 0xFFFF)
        total = (total + part) & 0xFFFFFFFF
        done += len(s)
    for _ in range(2):
        total = (total & 0xFFFF) + (total >> 16)
    return total
