"""The IPv6 fixed header (RFC 8200; DPDK ``lib/net/rte_ip.h``).

Extension headers are :mod:`.ipv6_ext`.  Addresses are 16 bytes: accessors return their
address (``ipv6_src(p)``), builders take uint8 arrays.
"""
from __future__ import annotations

from ..._jit import kernel
from ...errors import E_INVAL
from .access import hdr_read, pktmbuf_write
from .mem import load_be16, load_be32, stack_u8, store_be16, store_be32

IPV6_HDR_LEN = 40
IPV6_ADDR_LEN = 16
IPV6_VTC_FLOW, IPV6_PAYLOAD_LEN, IPV6_PROTO, IPV6_HOP_LIMITS = 0, 4, 6, 7
IPV6_SRC, IPV6_DST = 8, 24


@kernel(inline="always")
def ipv6_hdr_ptr(dom, h, off, buf):
    """Address of the 40-byte IPv6 header at ``off``, or ``E_RANGE``/``E_FAULT`` (the version
    is not checked: ``ipv6_version`` does that)."""
    return hdr_read(dom, h, off, IPV6_HDR_LEN, buf)


@kernel(inline="always")
def ipv6_version(p):
    return (load_be32(p) >> 28) & 0xF


@kernel(inline="always")
def ipv6_traffic_class(p):
    return (load_be32(p) >> 20) & 0xFF


@kernel(inline="always")
def ipv6_flow_label(p):
    return load_be32(p) & 0xFFFFF


@kernel(inline="always")
def ipv6_payload_len(p):
    return load_be16(p + IPV6_PAYLOAD_LEN)


@kernel(inline="always")
def ipv6_proto(p):
    """The first next-header value (DPDK's ``proto``)."""
    return load_be16(p + IPV6_PROTO) >> 8


@kernel(inline="always")
def ipv6_hop_limits(p):
    return load_be16(p + IPV6_PROTO) & 0xFF


@kernel(inline="always")
def ipv6_src(p):
    return p + IPV6_SRC


@kernel(inline="always")
def ipv6_dst(p):
    return p + IPV6_DST


@kernel
def ipv6_hdr_write(dom, h, off, traffic_class, flow_label, payload_len, proto, hop_limits,
                   src, dst):
    """Write an IPv6 header at ``off`` (``src``/``dst``: uint8 arrays of 16 or more).  Returns
    0, ``E_INVAL`` for a short address array, or a negative code from the write."""
    if src.size < IPV6_ADDR_LEN or dst.size < IPV6_ADDR_LEN:
        return E_INVAL
    b = stack_u8(40)
    a = b.ctypes.data
    store_be32(a, (6 << 28) | ((traffic_class & 0xFF) << 20) | (flow_label & 0xFFFFF))
    store_be16(a + IPV6_PAYLOAD_LEN, payload_len)
    b[IPV6_PROTO] = proto
    b[IPV6_HOP_LIMITS] = hop_limits
    for i in range(IPV6_ADDR_LEN):
        b[IPV6_SRC + i] = src[i]
        b[IPV6_DST + i] = dst[i]
    return pktmbuf_write(dom, h, off, IPV6_HDR_LEN, a, IPV6_HDR_LEN)


