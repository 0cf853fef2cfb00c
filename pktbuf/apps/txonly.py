"""The generator step of the traffic app and of the memif benchmark: testpmd's ``txonly``.

Per packet, DPDK 22.11's testpmd ``txonly`` forwarding mode takes an mbuf, writes the Ethernet,
IPv4 and UDP headers (42 bytes, built once at start) and sets the lengths; the payload bytes
are whatever the buffer held.  :func:`txonly_alloc_burst` does the same work, so a pktbuf
generator and a testpmd generator are compared doing equal work per packet.  (It allocates
with ``pktmbuf_alloc_bulk``, which resets every mbuf; testpmd takes raw objects and resets
the few fields it needs -- if anything, pktbuf does more.)

testpmd's default headers: source IP 198.18.0.1, destination 198.18.0.2, UDP ports 9 -> 9, TTL
64, IP checksum set, UDP checksum 0 (app/test-pmd/txonly.c in DPDK 22.11).
"""
from __future__ import annotations

import struct

import numpy as np

from .._jit import kernel
from ..buf.mbuf.raw import pktmbuf_alloc_bulk
from ..rawmem import copy_in_bounds

HDR_LEN = 14 + 20 + 8       # Ethernet + IPv4 + UDP
MIN_PKT_LEN = HDR_LEN


def _ip_checksum(hdr: bytes) -> int:
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_headers(pkt_len: int, src_mac: bytes, dst_mac: bytes) -> np.ndarray:
    """The 42 header bytes of a ``pkt_len``-byte Ethernet/IPv4/UDP frame, as testpmd's
    ``txonly`` builds them."""
    if not MIN_PKT_LEN <= pkt_len <= 0xFFFF:
        raise ValueError(f"pkt_len must be in [{MIN_PKT_LEN}, 65535], got {pkt_len}")
    eth = bytes(dst_mac) + bytes(src_mac) + b"\x08\x00"
    ip_len = pkt_len - 14
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0, 64, 17, 0,
                     bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2]))
    ip = ip[:10] + struct.pack("!H", _ip_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", 9, 9, ip_len - 20, 0)
    return np.frombuffer(eth + ip + udp, np.uint8).copy()


@kernel(inline="always")
def txonly_alloc_burst(dom, pid, lcore, pkts, n, hdr, pkt_len):
    """Allocate ``n`` mbufs of pool ``pid`` into ``pkts`` and make each a ``pkt_len``-byte
    frame: the 42 bytes of ``hdr`` (:func:`udp_headers`) written, the payload left as is.
    ``pkt_len`` must fit the pool's data room.  Returns 0, or ``-ENOENT`` with nothing
    allocated."""
    rc = pktmbuf_alloc_bulk(dom, pid, lcore, pkts, n)
    if rc != 0:
        return rc
    mb = dom.mb
    src = hdr.ctypes.data
    for i in range(n):
        m = mb[pkts[i]]
        copy_in_bounds(np.int64(m.buf_addr) + np.int64(m.data_off), np.int64(m.buf_addr),
                       np.int64(m.buf_len), src, src, hdr.size, HDR_LEN)
        m.data_len = pkt_len
        m.pkt_len = pkt_len
    return 0
