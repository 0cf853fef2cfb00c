"""The GRE header (RFC 2784, RFC 2890; DPDK ``lib/net/rte_gre.h``): flags, version, protocol,
then the optional checksum, key and sequence words the flags announce.

:func:`gre_hdr_len` sizes a header from its top four flag bits as ``rte_net_get_ptype`` does
(lib/net/rte_net.c): 4 bytes plus 4 for each of C, K, S; a header with the R (routing) bit --
RFC 1701's source routing -- has no length it knows, and gets 0.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .access import hdr_read, pktmbuf_write
from .mem import load_be16, stack_u8, store_be16, store_be32

GRE_HDR_LEN = 4
GRE_C, GRE_R, GRE_K, GRE_S = 0x8000, 0x4000, 0x2000, 0x1000


@kernel(inline="always")
def gre_hdr_ptr(dom, h, off, buf):
    """Address of the 4 fixed bytes of the GRE header at ``off``, or a negative code."""
    return hdr_read(dom, h, off, GRE_HDR_LEN, buf)


@kernel(inline="always")
def gre_flags(p):
    return load_be16(p)


@kernel(inline="always")
def gre_proto(p):
    return load_be16(p + 2)


@kernel(inline="always")
def gre_hdr_len(flags):
    """Header bytes for the flags word ``flags``: 4, 8, 12 or 16; 0 when R is set."""
    top = (flags >> 12) & 0xF
    if top & 0x4:
        return np.int64(0)
    return np.int64(4 + 4 * ((top & 1) + ((top >> 1) & 1) + ((top >> 3) & 1)))


@kernel
def gre_hdr_write(dom, h, off, proto, key, has_key, seq, has_seq):
    """Write a GRE header (version 0, no checksum) with an optional key and sequence number at
    ``off``.  Returns the header length (4, 8 or 12) or a negative code from the write."""
    b = stack_u8(12)
    a = b.ctypes.data
    flags = (GRE_K if has_key else 0) | (GRE_S if has_seq else 0)
    store_be16(a, flags)
    store_be16(a + 2, proto)
    n = 4
    if has_key:
        store_be32(a + n, key)
        n += 4
    if has_seq:
        store_be32(a + n, seq)
        n += 4
    rc = pktmbuf_write(dom, h, off, n, a, 12)
    return rc if rc < 0 else np.int64(n)
