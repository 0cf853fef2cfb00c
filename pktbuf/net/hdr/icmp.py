"""ICMP (RFC 792) and ICMPv6 (RFC 4443) headers (DPDK ``lib/net/rte_icmp.h``): type, code,
checksum, and for echo messages identifier and sequence number."""
from __future__ import annotations

from ..._jit import kernel
from .access import hdr_read, pktmbuf_write
from .mem import load_be16, stack_u8, store_be16

ICMP_HDR_LEN = 8                 # with the echo identifier and sequence number
ICMP6_HDR_LEN = 4
ICMP_ECHO_REPLY, ICMP_DEST_UNREACH, ICMP_ECHO_REQUEST, ICMP_TIME_EXCEEDED = 0, 3, 8, 11
ICMP6_DEST_UNREACH, ICMP6_PACKET_TOO_BIG, ICMP6_TIME_EXCEEDED = 1, 2, 3
ICMP6_ECHO_REQUEST, ICMP6_ECHO_REPLY = 128, 129
ICMP6_ROUTER_SOLICIT, ICMP6_ROUTER_ADVERT = 133, 134
ICMP6_NEIGH_SOLICIT, ICMP6_NEIGH_ADVERT = 135, 136
ICMP_TYPE, ICMP_CODE, ICMP_CKSUM, ICMP_IDENT, ICMP_SEQ = 0, 1, 2, 4, 6


@kernel(inline="always")
def icmp_hdr_ptr(dom, h, off, buf):
    """Address of the 8-byte ICMP echo-style header at ``off``, or ``E_RANGE``/``E_FAULT``."""
    return hdr_read(dom, h, off, ICMP_HDR_LEN, buf)


@kernel(inline="always")
def icmp6_hdr_ptr(dom, h, off, buf):
    """Address of the 4-byte ICMPv6 header at ``off``, or ``E_RANGE``/``E_FAULT``."""
    return hdr_read(dom, h, off, ICMP6_HDR_LEN, buf)


@kernel(inline="always")
def icmp_type(p):
    return load_be16(p) >> 8


@kernel(inline="always")
def icmp_code(p):
    return load_be16(p) & 0xFF


@kernel(inline="always")
def icmp_cksum_field(p):
    return load_be16(p + ICMP_CKSUM)


@kernel(inline="always")
def icmp_ident(p):
    return load_be16(p + ICMP_IDENT)


@kernel(inline="always")
def icmp_seq(p):
    return load_be16(p + ICMP_SEQ)


@kernel
def icmp_echo_write(dom, h, off, kind, code, ident, seq):
    """Write an 8-byte ICMP (or ICMPv6) echo header with a zero checksum at ``off``; ``kind``
    is the type (8 / 0, or 128 / 129 for ICMPv6).  Returns 0 or a negative code."""
    b = stack_u8(8)
    a = b.ctypes.data
    b[ICMP_TYPE] = kind
    b[ICMP_CODE] = code
    store_be16(a + ICMP_CKSUM, 0)
    store_be16(a + ICMP_IDENT, ident)
    store_be16(a + ICMP_SEQ, seq)
    return pktmbuf_write(dom, h, off, ICMP_HDR_LEN, a, ICMP_HDR_LEN)
