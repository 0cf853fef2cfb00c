"""Ethernet, 802.1Q VLAN and 802.1ad QinQ headers (DPDK ``lib/net/rte_ether.h``).

Accessors take the address returned by :func:`ether_hdr_ptr` / :func:`vlan_hdr_ptr` (see
:mod:`.access`: the bytes are contiguous there even when the header straddles segments) and
return fields as numbers in host order.  Builders write into the packet at an offset, across
segments, and return 0 or the negative code of :func:`~pktbuf.net.hdr.access.pktmbuf_write`.
"""
from __future__ import annotations

from ..._jit import kernel
from ...errors import E_RANGE
from .access import hdr_read, pktmbuf_write
from .mem import load_be16, stack_u8, store_be16

ETHER_ADDR_LEN = 6
ETHER_HDR_LEN = 14
VLAN_HDR_LEN = 4                 # struct rte_vlan_hdr: tci, then the inner ethertype

ETHER_TYPE_IPV4 = 0x0800
ETHER_TYPE_ARP = 0x0806
ETHER_TYPE_TEB = 0x6558          # transparent Ethernet bridging (NVGRE's payload)
ETHER_TYPE_VLAN = 0x8100
ETHER_TYPE_IPV6 = 0x86DD
ETHER_TYPE_MPLS = 0x8847
ETHER_TYPE_MPLSM = 0x8848
ETHER_TYPE_QINQ = 0x88A8
ETHER_TYPE_LLDP = 0x88CC
ETHER_TYPE_1588 = 0x88F7
ETHER_TYPE_QINQ1 = 0x9100        # pre-standard QinQ TPIDs
ETHER_TYPE_QINQ2 = 0x9200

# field offsets in the Ethernet header and in a VLAN tag (after the TPID)
ETHER_DST, ETHER_SRC, ETHER_TYPE = 0, 6, 12
VLAN_TCI, VLAN_PROTO = 0, 2


@kernel(inline="always")
def ether_hdr_ptr(dom, h, off, buf):
    """Address of the 14-byte Ethernet header at ``off``, or ``E_RANGE``/``E_FAULT``."""
    return hdr_read(dom, h, off, ETHER_HDR_LEN, buf)


@kernel(inline="always")
def vlan_hdr_ptr(dom, h, off, buf):
    """Address of the 4-byte VLAN tag body (TCI, ethertype) at ``off``, or a negative code."""
    return hdr_read(dom, h, off, VLAN_HDR_LEN, buf)


@kernel(inline="always")
def ether_type(p):
    """The ethertype of the Ethernet header at ``p``."""
    return load_be16(p + ETHER_TYPE)


@kernel(inline="always")
def vlan_tci(p):
    """The TCI (PCP 3 bits, DEI 1, VLAN id 12) of the tag body at ``p``."""
    return load_be16(p + VLAN_TCI)


@kernel(inline="always")
def vlan_proto(p):
    """The ethertype that follows the tag body at ``p``."""
    return load_be16(p + VLAN_PROTO)


@kernel(inline="always")
def vlan_id(tci):
    return tci & 0x0FFF


@kernel
def ether_l3_off(dom, h, off, buf):
    """``(ethertype, l3 offset)`` of the frame whose Ethernet header is at ``off``, after up to
    two VLAN tags (0x8100, 0x88A8, 0x9100, 0x9200), or ``(code, -1)`` with a negative code
    when a header is cut off."""
    p = ether_hdr_ptr(dom, h, off, buf)
    if p < 0:
        return p, -1
    et = ether_type(p)
    o = off + ETHER_HDR_LEN
    for _ in range(2):
        if not (et == ETHER_TYPE_VLAN or et == ETHER_TYPE_QINQ or et == ETHER_TYPE_QINQ1
                or et == ETHER_TYPE_QINQ2):
            break
        v = vlan_hdr_ptr(dom, h, o, buf)
        if v < 0:
            return v, -1
        et = vlan_proto(v)
        o += VLAN_HDR_LEN
    return et, o


@kernel
def ether_hdr_write(dom, h, off, dst, src, etype):
    """Write an Ethernet header at ``off``: ``dst``, ``src`` (uint8 arrays of 6 or more),
    ``etype``.  Returns 0 or a negative code (``E_RANGE`` if the packet is too short, or an
    address array is shorter than 6)."""
    if dst.size < ETHER_ADDR_LEN or src.size < ETHER_ADDR_LEN:
        return E_RANGE
    b = stack_u8(14)
    for i in range(ETHER_ADDR_LEN):
        b[i] = dst[i]
        b[ETHER_ADDR_LEN + i] = src[i]
    a = b.ctypes.data
    store_be16(a + ETHER_TYPE, etype)
    return pktmbuf_write(dom, h, off, ETHER_HDR_LEN, a, ETHER_HDR_LEN)


@kernel
def vlan_hdr_write(dom, h, off, tci, etype):
    """Write a VLAN tag body (``tci``, then the inner ethertype ``etype``) at ``off``: the
    TPID is the ethertype field before it.  Returns 0 or a negative code."""
    b = stack_u8(4)
    a = b.ctypes.data
    store_be16(a + VLAN_TCI, tci)
    store_be16(a + VLAN_PROTO, etype)
    return pktmbuf_write(dom, h, off, VLAN_HDR_LEN, a, VLAN_HDR_LEN)
