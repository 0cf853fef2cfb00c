"""IPv4 header and UDP/TCP-over-IPv4 checksums (DPDK ``lib/net/rte_ip.h``: ``rte_ipv4_cksum``,
``rte_ipv4_phdr_cksum``, ``rte_ipv4_udptcp_cksum`` and their ``_verify`` and ``_mbuf`` forms).

Values are in DPDK's byte order (see :mod:`.raw`): store them with
:func:`~pktbuf.net.hdr.mem.store_le16` (or :func:`~.incr.cksum_store_mbuf`).  The address
forms trust their caller as DPDK's do (the header and ``total_length - IHL * 4`` bytes of L4
data are readable); the ``_mbuf`` forms read the IPv4 header through
:func:`~pktbuf.net.hdr.ipv4.ipv4_hdr_ptr` and the data through
:func:`~.raw.raw_cksum_mbuf`, never past the packet, and return a negative code where DPDK
returns a dummy checksum (``E_RANGE`` for an L4 offset or length beyond the packet, the header
reader's codes for an unreadable header).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_RANGE
from ..hdr.ipv4 import (IPPROTO_UDP, IPV4_SRC, ipv4_hdr_len, ipv4_hdr_ptr, ipv4_proto,
                        ipv4_total_length)
from ..hdr.mem import load_le32, load_le64, stack_u8
from .raw import bswap16, fold, raw_cksum_mbuf, raw_sum

TX_TCP_SEG = 1 << 50             # RTE_MBUF_F_TX_TCP_SEG: the pseudo-header length is 0
_M32 = np.uint64(0xFFFFFFFF)
CKSUM_BAD = -1                   # what the _verify forms return for a wrong checksum (DPDK)


@kernel(inline="always")
def ipv4_cksum(p):
    """``rte_ipv4_cksum``: the header checksum of the IPv4 header at ``p`` (``IHL * 4``
    bytes; its checksum field must be 0 -- over a header whose checksum is right it gives 0)."""
    n = ipv4_hdr_len(p)
    if n == 20:              # no options, the usual case: three loads, no loop
        a = load_le64(p)
        b = load_le64(p + 8)
        s = ((a & _M32) + (a >> np.uint64(32)) + (b & _M32) + (b >> np.uint64(32))
             + np.uint64(load_le32(p + 16)))
        return (~fold(s)) & 0xFFFF
    return (~fold(raw_sum(p, n))) & 0xFFFF


@kernel(inline="always")
def ipv4_cksum_verify(p):
    """0 if the header checksum of the IPv4 header at ``p`` is right, else ``CKSUM_BAD``
    (not in DPDK 22.11: ``rte_ipv4_cksum(p) == 0`` is its test)."""
    return 0 if fold(raw_sum(p, ipv4_hdr_len(p))) == 0xFFFF else CKSUM_BAD


@kernel(inline="always")
def ipv4_phdr_sum(p, ol_flags):
    """``rte_ipv4_phdr_cksum``: the folded, non-inverted sum of the pseudo-header (source,
    destination, zero, protocol, L4 length = ``total_length - IHL * 4``, or 0 with
    :data:`TX_TCP_SEG` in ``ol_flags``)."""
    s = raw_sum(p + IPV4_SRC, 8)
    s += np.uint64(ipv4_proto(p) << 8)                   # bytes {0, proto} as a host word
    if not (ol_flags & TX_TCP_SEG):
        s += np.uint64(bswap16((ipv4_total_length(p) - ipv4_hdr_len(p)) & 0xFFFF))
    return fold(s)


@kernel(inline="always")
def _l4_sum(p, l4):
    """DPDK's ``__rte_ipv4_udptcp_cksum``: 0 if total_length < IHL * 4."""
    hl = ipv4_hdr_len(p)
    tl = ipv4_total_length(p)
    if tl < hl:
        return np.int64(0)
    s = fold(raw_sum(l4, tl - hl)) + ipv4_phdr_sum(p, 0)
    return ((s >> 16) + s) & 0xFFFF


@kernel(inline="always")
def _finish(s, proto):
    c = (~s) & 0xFFFF
    if c == 0 and proto == IPPROTO_UDP:
        return np.int64(0xFFFF)          # RFC 768: a computed zero goes out as all ones
    return c


@kernel
def ipv4_udptcp_cksum(p, l4):
    """``rte_ipv4_udptcp_cksum``: the UDP or TCP checksum of the datagram whose IPv4 header is
    at ``p`` and L4 header at ``l4`` (its checksum field must be 0).  UDP's 0 becomes 0xFFFF;
    ``total_length < IHL * 4`` gives 0xFFFF, as in DPDK."""
    return _finish(_l4_sum(p, l4), ipv4_proto(p))


@kernel
def ipv4_udptcp_cksum_verify(p, l4):
    """``rte_ipv4_udptcp_cksum_verify``: 0 if the L4 checksum is right, else ``CKSUM_BAD``.
    A UDP datagram sent without a checksum (field 0) is ``CKSUM_BAD`` too, as in DPDK."""
    return 0 if _l4_sum(p, l4) == 0xFFFF else CKSUM_BAD


@kernel(inline="always")
def _mbuf_l4_sum(dom, h, l3_off, l4_off, dpdk_bug, buf):
    """``(sum, proto)`` or ``(negative code, 0)``."""
    p = ipv4_hdr_ptr(dom, h, l3_off, buf)
    if p < 0:
        return p, np.int64(0)
    if l4_off < 0 or l4_off > np.int64(dom.mb[h].pkt_len):
        return np.int64(E_RANGE), np.int64(0)
    n = ipv4_total_length(p) - ipv4_hdr_len(p)
    r = raw_cksum_mbuf(dom, h, l4_off, n, dpdk_bug)
    if r < 0:
        return r, np.int64(0)
    s = r + ipv4_phdr_sum(p, 0)
    return ((s >> 16) + s) & 0xFFFF, ipv4_proto(p)


@kernel
def ipv4_udptcp_cksum_mbuf(dom, h, l3_off, l4_off, dpdk_bug):
    """``rte_ipv4_udptcp_cksum_mbuf``: the L4 checksum of packet ``h`` (IPv4 header at
    ``l3_off``, L4 header at ``l4_off``, length from the IP header), across segments, or a
    negative code (module docstring).  ``dpdk_bug``: see :func:`~.raw.raw_cksum_mbuf`."""
    buf = stack_u8(64)
    s, proto = _mbuf_l4_sum(dom, h, l3_off, l4_off, dpdk_bug, buf)
    if s < 0:
        return s
    return _finish(s, proto)


@kernel
def ipv4_udptcp_cksum_mbuf_verify(dom, h, l3_off, l4_off, dpdk_bug):
    """``rte_ipv4_udptcp_cksum_mbuf_verify``: 0 (right), ``CKSUM_BAD`` (wrong), or another
    negative code when the headers or data cannot be read."""
    buf = stack_u8(64)
    s, _ = _mbuf_l4_sum(dom, h, l3_off, l4_off, dpdk_bug, buf)
    if s < 0:
        return s
    return 0 if s == 0xFFFF else CKSUM_BAD


@kernel
def ipv4_cksum_mbuf(dom, h, l3_off):
    """The header checksum (as :func:`ipv4_cksum`) of the IPv4 header at ``l3_off`` of packet
    ``h``, read across segments; or the reader's negative code."""
    buf = stack_u8(64)
    p = ipv4_hdr_ptr(dom, h, l3_off, buf)
    if p < 0:
        return p
    return ipv4_cksum(p)


