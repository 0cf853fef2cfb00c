"""The IPv4 header, options included (RFC 791; DPDK ``lib/net/rte_ip.h``).

:func:`ipv4_hdr_ptr` returns the address of the whole header (``IHL * 4`` bytes, 20 to 60) or
a negative code; the accessors read fields from it in host order (addresses as numbers:
10.0.0.1 is ``0x0A000001``).  :func:`ipv4_opt_find` walks the options.  The builders write
the header with a zero checksum field, as DPDK's ``rte_ipv4_cksum`` expects before it
computes one (:mod:`pktbuf.net.cksum.ipv4`).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_INVAL, E_NOENT
from ...rawmem import load_u8
from .access import hdr_read, pktmbuf_write
from .mem import load_be16, load_be32, stack_u8, store_be16, store_be32

IPV4_HDR_LEN = 20                # without options
IPV4_HDR_MAX = 60                # IHL 15
IPV4_VERSION_IHL = 0x45          # version 4, no options
IPV4_HDR_DF_FLAG = 0x4000
IPV4_HDR_MF_FLAG = 0x2000
IPV4_HDR_OFFSET_MASK = 0x1FFF
IPV4_HDR_OFFSET_UNITS = 8
IPV4_OPT_EOL, IPV4_OPT_NOP = 0, 1

# field offsets
IPV4_VIHL, IPV4_TOS, IPV4_TOTAL_LENGTH, IPV4_PACKET_ID = 0, 1, 2, 4
IPV4_FRAGMENT_OFFSET, IPV4_TTL, IPV4_PROTO, IPV4_CKSUM = 6, 8, 9, 10
IPV4_SRC, IPV4_DST = 12, 16

IPPROTO_ICMP, IPPROTO_IGMP, IPPROTO_IPIP, IPPROTO_TCP = 1, 2, 4, 6
IPPROTO_UDP, IPPROTO_IPV6, IPPROTO_GRE, IPPROTO_ESP = 17, 41, 47, 50
IPPROTO_AH, IPPROTO_ICMPV6, IPPROTO_SCTP = 51, 58, 132


@kernel(inline="always")
def ipv4_version(p):
    return (load_be16(p) >> 12) & 0xF


@kernel(inline="always")
def ipv4_ihl(p):
    """The header length in 32-bit words."""
    return (load_be16(p) >> 8) & 0xF


@kernel(inline="always")
def ipv4_hdr_len(p):
    """``rte_ipv4_hdr_len``: IHL * 4 bytes (not checked against 20)."""
    return ((load_be16(p) >> 8) & 0xF) * 4


@kernel(inline="always")
def ipv4_tos(p):
    return load_be16(p) & 0xFF


@kernel(inline="always")
def ipv4_total_length(p):
    return load_be16(p + IPV4_TOTAL_LENGTH)


@kernel(inline="always")
def ipv4_packet_id(p):
    return load_be16(p + IPV4_PACKET_ID)


@kernel(inline="always")
def ipv4_fragment_offset(p):
    """The flags and fragment offset field as a whole (``fragment_offset`` in DPDK)."""
    return load_be16(p + IPV4_FRAGMENT_OFFSET)


@kernel(inline="always")
def ipv4_is_fragment(p):
    """More fragments set or a non-zero offset (DF alone is not a fragment)."""
    return (load_be16(p + IPV4_FRAGMENT_OFFSET) & (IPV4_HDR_MF_FLAG | IPV4_HDR_OFFSET_MASK)) != 0


@kernel(inline="always")
def ipv4_ttl(p):
    return load_be16(p + IPV4_TTL) >> 8


@kernel(inline="always")
def ipv4_proto(p):
    return load_be16(p + IPV4_TTL) & 0xFF


@kernel(inline="always")
def ipv4_cksum_field(p):
    """The checksum field read as a big-endian number (tshark's ``ip.checksum``)."""
    return load_be16(p + IPV4_CKSUM)


@kernel(inline="always")
def ipv4_src(p):
    return load_be32(p + IPV4_SRC)


@kernel(inline="always")
def ipv4_dst(p):
    return load_be32(p + IPV4_DST)


@kernel
def ipv4_hdr_ptr(dom, h, off, buf):
    """Address of the whole IPv4 header at ``off`` (``buf``: 60 bytes or more of scratch), or

    * ``E_RANGE`` (-34): the fixed header or the options are cut off by the end of the packet;
    * ``E_INVAL`` (-22): the version is not 4 or IHL is below 5;
    * ``E_FAULT`` (-14): the segments hold less than ``pkt_len``.
    """
    p = hdr_read(dom, h, off, IPV4_HDR_LEN, buf)
    if p < 0:
        return p
    if ipv4_version(p) != 4 or ipv4_ihl(p) < 5:
        return E_INVAL
    n = ipv4_hdr_len(p)
    if n == IPV4_HDR_LEN:
        return p
    return hdr_read(dom, h, off, n, buf)


@kernel
def ipv4_opt_find(p, kind):
    """Offset (from the header start) of the first option ``kind`` in the header at ``p``,
    ``E_NOENT`` (-2) if it has none, ``E_INVAL`` (-22) if the options are malformed (a length
    below 2 or running past the header).  EOL ends the list; NOP is one byte."""
    end = ipv4_hdr_len(p)
    o = IPV4_HDR_LEN
    while o < end:
        t = np.int64(load_u8(p + o))
        if t == kind:
            return o
        if t == IPV4_OPT_EOL:
            break
        if t == IPV4_OPT_NOP:
            o += 1
            continue
        if o + 1 >= end:
            return E_INVAL
        ln = np.int64(load_u8(p + o + 1))
        if ln < 2 or o + ln > end:
            return E_INVAL
        o += ln
    return E_NOENT


@kernel
def ipv4_hdr_write_opts(dom, h, off, tos, total_length, packet_id, fragment_offset, ttl,
                        proto, src, dst, opts, opt_len):
    """Write an IPv4 header with ``opts[:opt_len]`` as options (``opt_len`` a multiple of 4,
    at most 40; IHL follows) and a zero checksum at ``off``.  Returns 0, ``E_INVAL`` for a bad
    ``opt_len``, or a negative code from the write (``E_RANGE``: the packet is too short)."""
    if opt_len < 0 or opt_len > 40 or opt_len % 4 or opt_len > opts.size:
        return E_INVAL
    b = stack_u8(60)
    a = b.ctypes.data
    n = IPV4_HDR_LEN + opt_len
    b[0] = 0x40 | (n // 4)
    b[1] = tos
    store_be16(a + IPV4_TOTAL_LENGTH, total_length)
    store_be16(a + IPV4_PACKET_ID, packet_id)
    store_be16(a + IPV4_FRAGMENT_OFFSET, fragment_offset)
    b[IPV4_TTL] = ttl
    b[IPV4_PROTO] = proto
    store_be16(a + IPV4_CKSUM, 0)
    store_be32(a + IPV4_SRC, src)
    store_be32(a + IPV4_DST, dst)
    for i in range(opt_len):
        b[IPV4_HDR_LEN + i] = opts[i]
    return pktmbuf_write(dom, h, off, n, a, 60)


@kernel
def ipv4_hdr_write(dom, h, off, tos, total_length, packet_id, fragment_offset, ttl, proto,
                   src, dst):
    """Write a 20-byte IPv4 header (no options, zero checksum) at ``off``: 0 or a negative
    code (``E_RANGE``: the packet is too short)."""
    b = stack_u8(20)
    a = b.ctypes.data
    b[0] = IPV4_VERSION_IHL
    b[1] = tos
    store_be16(a + IPV4_TOTAL_LENGTH, total_length)
    store_be16(a + IPV4_PACKET_ID, packet_id)
    store_be16(a + IPV4_FRAGMENT_OFFSET, fragment_offset)
    b[IPV4_TTL] = ttl
    b[IPV4_PROTO] = proto
    store_be16(a + IPV4_CKSUM, 0)
    store_be32(a + IPV4_SRC, src)
    store_be32(a + IPV4_DST, dst)
    return pktmbuf_write(dom, h, off, IPV4_HDR_LEN, a, IPV4_HDR_LEN)


