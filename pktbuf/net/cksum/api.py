"""Checksums for plain Python, over bytes or mbufs, with DPDK's results.

    raw_cksum(b"\\x01\\x02\\x03")             # 0x0204, as rte_raw_cksum
    ipv4_cksum(hdr)                          # rte_ipv4_cksum: checksum field must be zero
    ipv4_udptcp_cksum(ip_packet)             # IPv4 header + UDP/TCP segment
    raw_cksum_mbuf(mbuf, off, n)             # across segments (dpdk_bug=True: DPDK's result)

Every value is in DPDK's byte order (``int.to_bytes(2, "little")`` gives the wire bytes;
:func:`to_wire` gives the number tshark shows).  Arguments are checked here and bad ones raise
from :mod:`pktbuf.errors`; the kernels are :mod:`.raw`, :mod:`.ipv4`, :mod:`.ipv6`,
:mod:`.incr`.
"""
from __future__ import annotations

import numpy as np

from ...errors import InvalidArgument, check_flag, check_count, check_uint, raise_for
from ...buf.domain.entry import py_mbuf_status
from . import incr, ipv4, ipv6, raw
from .naive import to_wire

__all__ = ["raw_cksum", "ipv4_cksum", "ipv4_cksum_verify", "ipv4_udptcp_cksum",
           "ipv4_udptcp_cksum_verify", "ipv6_udptcp_cksum", "ipv6_udptcp_cksum_verify",
           "raw_cksum_mbuf", "cksum_update16", "cksum_update32", "to_wire"]


def _buf(data, name="data") -> np.ndarray:
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise InvalidArgument(f"{name} must be bytes or a 1-d uint8 array")
        data = data.tobytes()
    elif not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"{name} must be bytes, got {type(data).__name__}")
    # one spare byte so that an empty input still has an address
    return np.frombuffer(bytes(data) + b"\0", np.uint8)


def raw_cksum(data) -> int:
    """``rte_raw_cksum``: the folded, non-inverted sum of ``data``."""
    a = _buf(data)
    return int(raw.raw_cksum(a.ctypes.data, a.size - 1))


def _ipv4(hdr) -> np.ndarray:
    a = _buf(hdr, "hdr")
    n = a.size - 1
    if n < 20 or a[0] >> 4 != 4 or (a[0] & 15) < 5 or (a[0] & 15) * 4 > n:
        raise InvalidArgument("not an IPv4 header: version 4, IHL >= 5 and IHL * 4 bytes needed")
    return a


def ipv4_cksum(hdr) -> int:
    """``rte_ipv4_cksum`` over the IPv4 header at the start of ``hdr`` (0 if its checksum is
    already right; zero the field first to compute one)."""
    a = _ipv4(hdr)
    return int(ipv4.ipv4_cksum(a.ctypes.data))


def ipv4_cksum_verify(hdr) -> bool:
    a = _ipv4(hdr)
    return int(ipv4.ipv4_cksum_verify(a.ctypes.data)) == 0


def _ipv4_l4(packet) -> tuple[np.ndarray, int]:
    a = _ipv4(packet)
    ihl = (int(a[0]) & 15) * 4
    tl = (int(a[2]) << 8) | int(a[3])
    if tl > a.size - 1:
        raise InvalidArgument(f"total_length {tl} exceeds the {a.size - 1} bytes given")
    return a, ihl


def ipv4_udptcp_cksum(packet) -> int:
    """``rte_ipv4_udptcp_cksum`` of ``packet`` (IPv4 header, then the UDP/TCP segment; its
    checksum field zero): 0xFFFF for a UDP zero and for ``total_length < IHL * 4``."""
    a, ihl = _ipv4_l4(packet)
    return int(ipv4.ipv4_udptcp_cksum(a.ctypes.data, a.ctypes.data + ihl))


def ipv4_udptcp_cksum_verify(packet) -> bool:
    """``rte_ipv4_udptcp_cksum_verify``: the stored L4 checksum is right (a UDP checksum of 0,
    "none", is not)."""
    a, ihl = _ipv4_l4(packet)
    return int(ipv4.ipv4_udptcp_cksum_verify(a.ctypes.data, a.ctypes.data + ihl)) == 0


def _ipv6_l4(packet) -> np.ndarray:
    a = _buf(packet, "packet")
    if a.size - 1 < 40 or a[0] >> 4 != 6:
        raise InvalidArgument("not an IPv6 header: version 6 and 40 bytes needed")
    pl = (int(a[4]) << 8) | int(a[5])
    if 40 + pl > a.size - 1:
        raise InvalidArgument(f"payload_len {pl} exceeds the {a.size - 41} bytes given")
    return a


def ipv6_udptcp_cksum(packet) -> int:
    """``rte_ipv6_udptcp_cksum`` of ``packet`` (IPv6 header, then ``payload_len`` bytes)."""
    a = _ipv6_l4(packet)
    return int(ipv6.ipv6_udptcp_cksum(a.ctypes.data, a.ctypes.data + 40))


def ipv6_udptcp_cksum_verify(packet) -> bool:
    a = _ipv6_l4(packet)
    return int(ipv6.ipv6_udptcp_cksum_verify(a.ctypes.data, a.ctypes.data + 40)) == 0


def raw_cksum_mbuf(m, off: int, length: int, *, handle=None, dpdk_bug: bool = False) -> int:
    """``rte_raw_cksum_mbuf`` over bytes ``[off, off + length)`` of a packet (an Mbuf, or a
    Domain/pool with ``handle=``), across segments.  ``dpdk_bug=True`` reproduces DPDK
    22.11's result when a segment starts at an odd offset of the range (docs/net.md).
    OutOfRange if the range is beyond the packet."""
    bug = check_flag(dpdk_bug, "dpdk_bug")
    o = check_count(off, "off", lo=0, hi=(1 << 32) - 1)
    n = check_count(length, "length", lo=0, hi=(1 << 32) - 1)
    if handle is None:
        if not hasattr(m, "_valid"):
            raise InvalidArgument("expected an Mbuf, or a Domain or pool with handle=")
        m._valid()
        st, h = m.domain.state, int(m.handle)
    else:
        d = getattr(m, "domain", m)
        if not hasattr(d, "handle"):
            raise InvalidArgument(f"expected a Domain or a pool, got {type(m).__name__}")
        h = d.handle(handle)
        raise_for(min(int(py_mbuf_status(d.state, h)), 0),
                  f"{h} is not an mbuf the application holds")
        st = d.state
    rc = int(raw.raw_cksum_mbuf(st, h, o, n, bug))
    raise_for(rc, f"bytes [{o}, {o + n}) are not all in the packet")
    return rc


def cksum_update16(cksum, old, new) -> int:
    """RFC 1624: ``cksum`` after a 16-bit field went from ``old`` to ``new`` (all three in
    the same byte order)."""
    args = [check_uint(v, name, 16) for v, name in ((cksum, "cksum"), (old, "old"), (new, "new"))]
    return int(incr.cksum_update16(*args))


def cksum_update32(cksum, old, new) -> int:
    """RFC 1624 for a 32-bit field (an IPv4 address)."""
    c = check_uint(cksum, "cksum", 16)
    return int(incr.cksum_update32(c, check_uint(old, "old", 32), check_uint(new, "new", 32)))
