"""The RSS input of a frame, and the hash of a burst of mbufs as a NIC delivers it.

:func:`rss_parse` reads an Ethernet frame -- one optional 802.1Q / 802.1ad tag, then IPv4
(header length from IHL, options skipped) or IPv6 (fixed header only: extension headers are
not walked) -- and says which input the hash takes:

======================  =====  ===========================================================
kind                    bytes  when
======================  =====  ===========================================================
``KIND_V4_L4``          12     IPv4, TCP or UDP, not a fragment, ports inside the data
``KIND_V4``             8      other IPv4: other protocols, any fragment (first or not, so
                               that every fragment of a datagram goes one way), ports cut off
``KIND_V6_L4``          36     IPv6 whose next header is TCP or UDP, ports inside the data
``KIND_V6``             32     other IPv6 (extension headers, fragments, other protocols)
``KIND_NONE``           0      not IP, or the IP header is cut off: not hashed
======================  =====  ===========================================================

With ``l4`` false the port kinds fall back to their address-only forms (DPDK's ``RTE_ETH_RSS_IP``
alone, testpmd's default).  The input is, in network byte order, source address, destination
address, then source and destination port.  Nothing past ``n`` bytes of the frame is read.

:func:`rss_hash_bulk` hashes a burst of mbufs (their first segment) and stores the hash in each
mbuf's ``hash`` (DPDK's ``hash.rss``) with :data:`RX_RSS_HASH` set in ``ol_flags``, as an Rx
queue of a NIC with RSS does; a frame of ``KIND_NONE`` gets hash 0 and no flag.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_INVAL
from ...buf.mbuf.data import pktmbuf_mtod
from ...buf.mbuf.layout import NULL
from ...rawmem import addr_u8
from .thash import thash_lut_at

RX_RSS_HASH = 1 << 1            # RTE_MBUF_F_RX_RSS_HASH: mbuf.hash holds the RSS hash

KIND_NONE, KIND_V4, KIND_V4_L4, KIND_V6, KIND_V6_L4 = 0, 1, 2, 3, 4
KIND_LEN = (0, 8, 12, 32, 36)    # input bytes per kind

ETH_HLEN = 14
ETHER_IPV4, ETHER_IPV6 = 0x0800, 0x86DD
ETHER_VLAN, ETHER_QINQ = 0x8100, 0x88A8
PROTO_TCP, PROTO_UDP = 6, 17


@kernel(inline="always")
def _be16(p, off):
    return (np.int64(p[off]) << 8) | np.int64(p[off + 1])


@kernel
def rss_parse(p, n, l4):
    """``(kind, addr_off, port_off)`` of the frame ``p[:n]``: the kind of input (table in the
    module docstring), the offset of the source address (the destination follows it) and of
    the source port (the destination port follows it; -1 when the kind has no ports)."""
    if n > p.size:
        n = p.size
    if n < ETH_HLEN:
        return KIND_NONE, -1, -1
    l3 = ETH_HLEN
    et = _be16(p, 12)
    if et == ETHER_VLAN or et == ETHER_QINQ:
        if n < ETH_HLEN + 4:
            return KIND_NONE, -1, -1
        et = _be16(p, 16)
        l3 += 4
    if et == ETHER_IPV4:
        if n < l3 + 20 or (p[l3] >> 4) != 4:
            return KIND_NONE, -1, -1
        ihl = 4 * np.int64(p[l3] & 0x0F)
        if ihl < 20:
            return KIND_NONE, -1, -1
        proto = p[l3 + 9]
        frag = _be16(p, l3 + 6) & 0x3FFF             # MF flag and fragment offset
        lo = l3 + ihl
        if (l4 and frag == 0 and (proto == PROTO_TCP or proto == PROTO_UDP) and lo + 4 <= n):
            return KIND_V4_L4, l3 + 12, lo
        return KIND_V4, l3 + 12, -1
    if et == ETHER_IPV6:
        if n < l3 + 40 or (p[l3] >> 4) != 6:
            return KIND_NONE, -1, -1
        nh = p[l3 + 6]
        lo = l3 + 40
        if l4 and (nh == PROTO_TCP or nh == PROTO_UDP) and lo + 4 <= n:
            return KIND_V6_L4, l3 + 8, lo
        return KIND_V6, l3 + 8, -1
    return KIND_NONE, -1, -1


@kernel
def rss_tuple(p, n, l4, out):
    """Copy the RSS input of frame ``p[:n]`` into ``out`` (uint8, 36 bytes or more); returns
    its length (0: not hashed), or ``E_INVAL`` when ``out`` is too small."""
    if out.size < 36:
        return E_INVAL
    kind, a, ports = rss_parse(p, n, l4)
    alen = 8 if kind <= KIND_V4_L4 else 32
    if kind == KIND_NONE:
        return 0
    for i in range(alen):
        out[i] = p[a + i]
    if ports >= 0:
        for i in range(4):
            out[alen + i] = p[ports + i]
        return alen + 4
    return alen


@kernel(inline="always")
def rss_hash_frame(table, p, n, l4):
    """The RSS hash of frame ``p[:n]`` (``table`` from
    :func:`~pktbuf.net.rss.thash.thash_table_init`, 36 rows), or -1 when it is not hashed."""
    kind, a, ports = rss_parse(p, n, l4)
    if kind == KIND_NONE:
        return np.int64(-1)
    alen = 8 if kind <= KIND_V4_L4 else 32
    h = thash_lut_at(table, np.int64(0), 0, p, a, alen)
    if ports >= 0:
        h = thash_lut_at(table, h, alen, p, ports, 4)
    return h


@kernel
def rss_hash_bulk(dom, mbufs, n, table, l4):
    """Hash the first segment of ``mbufs[:n]``: each gets its hash in ``hash`` and
    :data:`RX_RSS_HASH` in ``ol_flags``; a frame that is not hashed gets hash 0 and the flag
    cleared.  NULL handles are skipped.  Returns how many were hashed, or ``E_INVAL`` (nothing
    done) when ``n`` exceeds the array or the table has fewer than 36 rows or is not 256 wide."""
    if n < 0 or n > mbufs.size or table.shape[0] < 36 or table.shape[1] != 256:
        return E_INVAL
    done = 0
    for k in range(n):
        h = mbufs[k]
        if h == NULL:
            continue
        m = dom.mb[h]
        dl = np.int64(m.data_len)
        p = addr_u8(pktmbuf_mtod(dom, h), dl)
        v = rss_hash_frame(table, p, dl, l4)
        if v < 0:
            m.hash = 0
            m.ol_flags &= ~np.uint64(RX_RSS_HASH)
        else:
            m.hash = v
            m.ol_flags |= np.uint64(RX_RSS_HASH)
            done += 1
    return done
