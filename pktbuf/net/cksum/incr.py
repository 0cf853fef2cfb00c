"""Incremental checksum updates (RFC 1624, eqn. 3: ``HC' = ~(~HC + ~m + m')``), and storing a
checksum into an mbuf.

One's-complement sums do not depend on byte order as long as every operand is taken in the
same one: pass the checksum and the old/new field values all as wire (big-endian) numbers,
or all in DPDK's memory order.  Eqn. 3 (not RFC 1141's ``HC + m - m'``) is used because it
never produces the checksum 0xFFFF where a full recomputation gives 0x0000: an update equals
recomputing :func:`~.ipv4.ipv4_cksum` from scratch (for any header that is not all zeros).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_INVAL
from ..hdr.access import pktmbuf_write
from ..hdr.ipv4 import IPV4_CKSUM, IPV4_TTL
from ..hdr.mem import load_be16, stack_u8, store_be16, store_le16


@kernel(inline="always")
def _fold32(s):
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return s


@kernel(inline="always")
def cksum_update16(cksum, old, new):
    """The checksum ``cksum`` after a 16-bit field changed from ``old`` to ``new``."""
    s = ((~np.int64(cksum)) & 0xFFFF) + ((~np.int64(old)) & 0xFFFF) + (np.int64(new) & 0xFFFF)
    return (~_fold32(s)) & 0xFFFF


@kernel(inline="always")
def cksum_update32(cksum, old, new):
    """The checksum after a 32-bit field (an IPv4 address: NAT, a pseudo-header address of
    UDP/TCP) changed from ``old`` to ``new`` (same byte order as ``cksum``)."""
    o = np.int64(old)
    w = np.int64(new)
    s = (((~np.int64(cksum)) & 0xFFFF) + ((~o) & 0xFFFF) + ((~(o >> 16)) & 0xFFFF)
         + (w & 0xFFFF) + ((w >> 16) & 0xFFFF))
    return (~_fold32(s)) & 0xFFFF


@kernel
def ipv4_ttl_dec_cksum(p):
    """Decrement the TTL of the IPv4 header at ``p`` and update its checksum in place
    (RFC 1624).  Returns the new TTL, or ``E_INVAL`` (nothing changed) if the TTL is 0."""
    word = load_be16(p + IPV4_TTL)              # TTL and protocol: one 16-bit word
    if (word >> 8) == 0:
        return E_INVAL
    new = word - 0x100
    store_be16(p + IPV4_CKSUM, cksum_update16(load_be16(p + IPV4_CKSUM), word, new))
    store_be16(p + IPV4_TTL, new)
    return new >> 8


@kernel
def cksum_store_mbuf(dom, h, off, cksum):
    """Write a DPDK-order checksum (what :mod:`.raw`, :mod:`.ipv4` and :mod:`.ipv6` return)
    at offset ``off`` of packet ``h``, across segments: 0 or a negative code."""
    b = stack_u8(2)
    a = b.ctypes.data
    store_le16(a, cksum)
    return pktmbuf_write(dom, h, off, 2, a, 2)
