"""ARP over Ethernet for IPv4 (RFC 826; DPDK ``lib/net/rte_arp.h``): the 28-byte packet.

Addresses: hardware ones are the address of their 6 bytes (``arp_sha(p)``), IPv4 ones are
numbers in host order (``arp_sip(p)``; 10.0.0.1 is ``0x0A000001``).
"""
from __future__ import annotations

from ..._jit import kernel
from ...errors import E_RANGE
from .access import hdr_read, pktmbuf_write
from .mem import load_be16, load_be32, stack_u8, store_be16, store_be32

ARP_HDR_LEN = 28
ARP_HRD_ETHER = 1
ARP_OP_REQUEST, ARP_OP_REPLY = 1, 2
ARP_OP_REVREQUEST, ARP_OP_REVREPLY = 3, 4
ARP_HRD, ARP_PRO, ARP_HLN, ARP_PLN, ARP_OP = 0, 2, 4, 5, 6
ARP_SHA, ARP_SIP, ARP_THA, ARP_TIP = 8, 14, 18, 24


@kernel(inline="always")
def arp_hdr_ptr(dom, h, off, buf):
    """Address of the 28-byte ARP packet at ``off``, or ``E_RANGE``/``E_FAULT``."""
    return hdr_read(dom, h, off, ARP_HDR_LEN, buf)


@kernel(inline="always")
def arp_hrd(p):
    return load_be16(p + ARP_HRD)


@kernel(inline="always")
def arp_pro(p):
    return load_be16(p + ARP_PRO)


@kernel(inline="always")
def arp_op(p):
    return load_be16(p + ARP_OP)


@kernel(inline="always")
def arp_sha(p):
    return p + ARP_SHA


@kernel(inline="always")
def arp_sip(p):
    return load_be32(p + ARP_SIP)


@kernel(inline="always")
def arp_tha(p):
    return p + ARP_THA


@kernel(inline="always")
def arp_tip(p):
    return load_be32(p + ARP_TIP)


@kernel
def arp_hdr_write(dom, h, off, op, sha, sip, tha, tip):
    """Write an Ethernet/IPv4 ARP packet (hardware type 1, protocol 0x0800, lengths 6 and 4)
    at ``off``; ``sha``/``tha`` uint8 arrays of 6 or more.  Returns 0 or a negative code."""
    if sha.size < 6 or tha.size < 6:
        return E_RANGE
    b = stack_u8(28)
    a = b.ctypes.data
    store_be16(a + ARP_HRD, ARP_HRD_ETHER)
    store_be16(a + ARP_PRO, 0x0800)
    b[ARP_HLN] = 6
    b[ARP_PLN] = 4
    store_be16(a + ARP_OP, op)
    for i in range(6):
        b[ARP_SHA + i] = sha[i]
        b[ARP_THA + i] = tha[i]
    store_be32(a + ARP_SIP, sip)
    store_be32(a + ARP_TIP, tip)
    return pktmbuf_write(dom, h, off, ARP_HDR_LEN, a, ARP_HDR_LEN)
