"""IPv6 extension headers: hop-by-hop options, routing, fragment, destination options, AH
(RFC 8200, RFC 4302), and DPDK's walk over them (``rte_net_skip_ip6_ext``, lib/net/rte_net.c).

Every extension header starts with (next header, length); the length counts 8-byte units
beyond the first for hop-by-hop / routing / destination options, is fixed at 8 bytes for the
fragment header, and counts 4-byte units minus 2 for AH.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel, never_inline
from ...errors import E_INVAL, E_RANGE
from .access import hdr_read, pktmbuf_write
from .mem import load_be16, load_be32, stack_u8, store_be16, store_be32

IPPROTO_HOPOPTS, IPPROTO_ROUTING, IPPROTO_FRAGMENT = 0, 43, 44
IPPROTO_ESP, IPPROTO_AH, IPPROTO_NONE, IPPROTO_DSTOPTS = 50, 51, 59, 60
IPV6_FRAG_HDR_LEN = 8
IPV6_FRAG_MF = 0x0001            # in the 16-bit offset/flags word
IPV6_FRAG_OFFSET_MASK = 0xFFF8
MAX_EXT_HDRS = 5                 # rte_net_skip_ip6_ext gives up after this many


@kernel(inline="always")
def ipv6_ext_next(p):
    """The next-header byte of the extension header at ``p``."""
    return load_be16(p) >> 8


@kernel(inline="always")
def ipv6_ext_len(p, proto):
    """Bytes of the extension header of type ``proto`` at ``p``; -1 if ``proto`` is not an
    extension header with a length byte (ESP is opaque; 59 ends the chain)."""
    ln = load_be16(p) & 0xFF
    if proto == IPPROTO_HOPOPTS or proto == IPPROTO_ROUTING or proto == IPPROTO_DSTOPTS:
        return (ln + 1) * 8
    if proto == IPPROTO_FRAGMENT:
        return np.int64(IPV6_FRAG_HDR_LEN)
    if proto == IPPROTO_AH:
        return (ln + 2) * 4
    return np.int64(-1)


@kernel(inline="always")
def ipv6_frag_offset(p):
    """Fragment offset in bytes of the fragment header at ``p``."""
    return load_be16(p + 2) & IPV6_FRAG_OFFSET_MASK


@kernel(inline="always")
def ipv6_frag_more(p):
    return (load_be16(p + 2) & IPV6_FRAG_MF) != 0


@kernel(inline="always")
def ipv6_frag_id(p):
    return load_be32(p + 4)


@never_inline
@kernel
def ipv6_skip_ext(dom, h, off, proto, buf):
    """``rte_net_skip_ip6_ext``: skip the extension headers from ``off`` (where a header of
    type ``proto`` starts).  Returns ``(next, off, frag)``:

    * hop-by-hop, routing and destination options are skipped by their length; a fragment
      header by 8 bytes, and the walk stops there (``frag`` = 1, ``next`` = its next header);
    * 59 (no next header) gives ``next`` = 0; any other value (an upper layer, and ESP / AH,
      which DPDK does not skip) is returned as it is;
    * ``next`` = -1 when a header's first two bytes are past the packet, or after 5 headers
      (``off`` is then where the walk stopped).
    """
    frag = 0
    for _ in range(MAX_EXT_HDRS):
        if proto == IPPROTO_HOPOPTS or proto == IPPROTO_ROUTING or proto == IPPROTO_DSTOPTS:
            p = hdr_read(dom, h, off, 2, buf)
            if p < 0:
                return np.int64(-1), off, frag
            off += ((load_be16(p) & 0xFF) + 1) * 8
            proto = load_be16(p) >> 8
        elif proto == IPPROTO_FRAGMENT:
            p = hdr_read(dom, h, off, 2, buf)
            if p < 0:
                return np.int64(-1), off, frag
            off += IPV6_FRAG_HDR_LEN
            return load_be16(p) >> 8, off, 1
        elif proto == IPPROTO_NONE:
            return np.int64(0), off, frag
        else:
            return np.int64(proto), off, frag
    return np.int64(-1), off, frag


@kernel
def ipv6_ext_hdr_write(dom, h, off, kind, next_hdr, length):
    """Write an empty hop-by-hop / routing / destination-options header of ``length`` bytes
    (a multiple of 8, 8 .. 2048) at ``off``: next header, length byte, then PadN options
    filling it (a routing header gets type 0 / segments left 0 and zero bytes instead).
    Returns 0, ``E_INVAL`` (bad kind or length), ``E_RANGE`` (does not fit; nothing written) or
    a negative code from the write."""
    if length < 8 or length > 2048 or length % 8:
        return E_INVAL
    if not (kind == IPPROTO_HOPOPTS or kind == IPPROTO_ROUTING or kind == IPPROTO_DSTOPTS):
        return E_INVAL
    if off < 0 or off + length > np.int64(dom.mb[h].pkt_len):
        return E_RANGE                   # all or nothing: it is written 8 bytes at a time
    b = stack_u8(8)
    a = b.ctypes.data
    done = 0
    while done < length:
        for i in range(8):
            b[i] = 0
        if done == 0:
            b[0] = next_hdr
            b[1] = length // 8 - 1
            if kind != IPPROTO_ROUTING:
                b[2] = 1                 # PadN over the remaining 6 bytes of this unit
                b[3] = 4
        elif kind != IPPROTO_ROUTING:
            b[0] = 1                     # PadN over the whole unit
            b[1] = 6
        rc = pktmbuf_write(dom, h, off + done, 8, a, 8)
        if rc < 0:
            return rc
        done += 8
    return 0


@kernel
def ipv6_frag_hdr_write(dom, h, off, next_hdr, frag_offset, more, ident):
    """Write an 8-byte fragment header at ``off`` (``frag_offset`` in bytes, a multiple of 8;
    ``more`` the M flag).  Returns 0, ``E_INVAL`` or a negative code from the write."""
    if frag_offset < 0 or frag_offset > 0xFFF8 or frag_offset % 8:
        return E_INVAL
    b = stack_u8(8)
    a = b.ctypes.data
    b[0] = next_hdr
    b[1] = 0
    store_be16(a + 2, frag_offset | (IPV6_FRAG_MF if more else 0))
    store_be32(a + 4, ident)
    return pktmbuf_write(dom, h, off, IPV6_FRAG_HDR_LEN, a, IPV6_FRAG_HDR_LEN)


