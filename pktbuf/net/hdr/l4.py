"""UDP (RFC 768), TCP (RFC 9293) and SCTP common headers (DPDK ``lib/net/rte_udp.h``,
``rte_tcp.h``, ``rte_sctp.h``).

The builders write a zero checksum field: compute it afterwards with
:mod:`pktbuf.net.cksum` (DPDK's ``rte_ipv4_udptcp_cksum`` wants the field zero).
"""
from __future__ import annotations

from ..._jit import kernel
from ...errors import E_INVAL
from .access import hdr_read, pktmbuf_write
from .mem import load_be16, load_be32, stack_u8, store_be16, store_be32

UDP_HDR_LEN = 8
TCP_HDR_LEN = 20                 # without options
TCP_HDR_MAX = 60
SCTP_HDR_LEN = 12
UDP_SRC_PORT, UDP_DST_PORT, UDP_LEN, UDP_CKSUM = 0, 2, 4, 6
TCP_SRC_PORT, TCP_DST_PORT, TCP_SEQ, TCP_ACK = 0, 2, 4, 8
TCP_DATA_OFF, TCP_FLAGS, TCP_WINDOW, TCP_CKSUM, TCP_URP = 12, 13, 14, 16, 18
TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK_FLAG, TCP_URG, TCP_ECE, TCP_CWR = (
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80)


@kernel(inline="always")
def udp_hdr_ptr(dom, h, off, buf):
    """Address of the 8-byte UDP header at ``off``, or ``E_RANGE``/``E_FAULT``."""
    return hdr_read(dom, h, off, UDP_HDR_LEN, buf)


@kernel(inline="always")
def tcp_hdr_ptr(dom, h, off, buf):
    """Address of the fixed 20 bytes of the TCP header at ``off`` (``tcp_hdr_len`` says how
    long it is with options), or ``E_RANGE``/``E_FAULT``."""
    return hdr_read(dom, h, off, TCP_HDR_LEN, buf)


@kernel(inline="always")
def l4_src_port(p):
    """Source port of a UDP, TCP or SCTP header at ``p`` (they share the first 4 bytes)."""
    return load_be16(p)


@kernel(inline="always")
def l4_dst_port(p):
    return load_be16(p + 2)


@kernel(inline="always")
def udp_len(p):
    return load_be16(p + UDP_LEN)


@kernel(inline="always")
def udp_cksum_field(p):
    return load_be16(p + UDP_CKSUM)


@kernel(inline="always")
def tcp_seq(p):
    return load_be32(p + TCP_SEQ)


@kernel(inline="always")
def tcp_ack(p):
    return load_be32(p + TCP_ACK)


@kernel(inline="always")
def tcp_hdr_len(p):
    """Data offset * 4: the header length with options (DPDK: ``(data_off & 0xf0) >> 2``)."""
    return (load_be16(p + TCP_DATA_OFF) >> 10) & 0x3C


@kernel(inline="always")
def tcp_flags(p):
    return load_be16(p + TCP_DATA_OFF) & 0xFF


@kernel(inline="always")
def tcp_window(p):
    return load_be16(p + TCP_WINDOW)


@kernel(inline="always")
def tcp_cksum_field(p):
    return load_be16(p + TCP_CKSUM)


@kernel
def udp_hdr_write(dom, h, off, src_port, dst_port, length):
    """Write a UDP header (zero checksum) at ``off``: 0 or a negative code (``E_RANGE``: the
    packet is too short)."""
    b = stack_u8(8)
    a = b.ctypes.data
    store_be16(a + UDP_SRC_PORT, src_port)
    store_be16(a + UDP_DST_PORT, dst_port)
    store_be16(a + UDP_LEN, length)
    store_be16(a + UDP_CKSUM, 0)
    return pktmbuf_write(dom, h, off, UDP_HDR_LEN, a, UDP_HDR_LEN)


@kernel
def tcp_hdr_write(dom, h, off, src_port, dst_port, seq, ack, hdr_len, flags, window):
    """Write a TCP header of ``hdr_len`` bytes (20 .. 60, a multiple of 4; options, if any,
    are filled with NOPs) with a zero checksum and urgent pointer at ``off``.  Returns 0,
    ``E_INVAL`` for a bad ``hdr_len``, or a negative code from the write."""
    if hdr_len < TCP_HDR_LEN or hdr_len > TCP_HDR_MAX or hdr_len % 4:
        return E_INVAL
    b = stack_u8(60)
    a = b.ctypes.data
    store_be16(a + TCP_SRC_PORT, src_port)
    store_be16(a + TCP_DST_PORT, dst_port)
    store_be32(a + TCP_SEQ, seq)
    store_be32(a + TCP_ACK, ack)
    b[TCP_DATA_OFF] = (hdr_len // 4) << 4
    b[TCP_FLAGS] = flags
    store_be16(a + TCP_WINDOW, window)
    store_be16(a + TCP_CKSUM, 0)
    store_be16(a + TCP_URP, 0)
    for i in range(TCP_HDR_LEN, hdr_len):
        b[i] = 1
    return pktmbuf_write(dom, h, off, hdr_len, a, 60)
