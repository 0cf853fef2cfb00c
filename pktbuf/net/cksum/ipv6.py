"""UDP/TCP-over-IPv6 checksums (DPDK ``lib/net/rte_ip.h``: ``rte_ipv6_phdr_cksum``,
``rte_ipv6_udptcp_cksum`` and their ``_verify`` and ``_mbuf`` forms).

As in DPDK, the L4 length is the IPv6 ``payload_len`` and the protocol the header's first
next-header value: with extension headers in between, the sum covers them and uses the wrong
protocol, so DPDK's functions (and these) are only right for a plain IPv6 header.  Values in
DPDK's byte order; the conventions of :mod:`.ipv4` apply.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_RANGE
from ..hdr.ipv4 import IPPROTO_UDP
from ..hdr.ipv6 import IPV6_SRC, ipv6_hdr_ptr, ipv6_payload_len, ipv6_proto
from ..hdr.mem import stack_u8
from .ipv4 import CKSUM_BAD, TX_TCP_SEG
from .raw import bswap16, fold, raw_cksum_mbuf, raw_sum


@kernel(inline="always")
def ipv6_phdr_sum(p, ol_flags):
    """``rte_ipv6_phdr_cksum``: folded, non-inverted sum of source, destination, 32-bit L4
    length (``payload_len``, or 0 with ``TX_TCP_SEG``) and next header."""
    s = raw_sum(p + IPV6_SRC, 32)
    s += np.uint64(ipv6_proto(p) << 8)
    if not (ol_flags & TX_TCP_SEG):
        s += np.uint64(bswap16(ipv6_payload_len(p)))
    return fold(s)


@kernel(inline="always")
def _l4_sum(p, l4):
    s = fold(raw_sum(l4, ipv6_payload_len(p))) + ipv6_phdr_sum(p, 0)
    return ((s >> 16) + s) & 0xFFFF


@kernel(inline="always")
def _finish(s, proto):
    c = (~s) & 0xFFFF
    if c == 0 and proto == IPPROTO_UDP:
        return np.int64(0xFFFF)
    return c


@kernel
def ipv6_udptcp_cksum(p, l4):
    """``rte_ipv6_udptcp_cksum``: the UDP/TCP checksum for the IPv6 header at ``p`` and the
    L4 header at ``l4`` (checksum field 0; ``payload_len`` bytes readable)."""
    return _finish(_l4_sum(p, l4), ipv6_proto(p))


@kernel
def ipv6_udptcp_cksum_verify(p, l4):
    """``rte_ipv6_udptcp_cksum_verify``: 0 if right, else ``CKSUM_BAD``."""
    return 0 if _l4_sum(p, l4) == 0xFFFF else CKSUM_BAD


@kernel(inline="always")
def _mbuf_l4_sum(dom, h, l3_off, l4_off, dpdk_bug, buf):
    p = ipv6_hdr_ptr(dom, h, l3_off, buf)
    if p < 0:
        return p, np.int64(0)
    if l4_off < 0 or l4_off > np.int64(dom.mb[h].pkt_len):
        return np.int64(E_RANGE), np.int64(0)
    r = raw_cksum_mbuf(dom, h, l4_off, ipv6_payload_len(p), dpdk_bug)
    if r < 0:
        return r, np.int64(0)
    s = r + ipv6_phdr_sum(p, 0)
    return ((s >> 16) + s) & 0xFFFF, ipv6_proto(p)


@kernel
def ipv6_udptcp_cksum_mbuf(dom, h, l3_off, l4_off, dpdk_bug):
    """``rte_ipv6_udptcp_cksum_mbuf``: the L4 checksum of packet ``h`` (IPv6 header at
    ``l3_off``, L4 at ``l4_off``) across segments, or a negative code."""
    buf = stack_u8(64)
    s, proto = _mbuf_l4_sum(dom, h, l3_off, l4_off, dpdk_bug, buf)
    if s < 0:
        return s
    return _finish(s, proto)


@kernel
def ipv6_udptcp_cksum_mbuf_verify(dom, h, l3_off, l4_off, dpdk_bug):
    """``rte_ipv6_udptcp_cksum_mbuf_verify``: 0, ``CKSUM_BAD``, or another negative code."""
    buf = stack_u8(64)
    s, _ = _mbuf_l4_sum(dom, h, l3_off, l4_off, dpdk_bug, buf)
    if s < 0:
        return s
    return 0 if s == 0xFFFF else CKSUM_BAD
