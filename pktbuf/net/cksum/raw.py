"""Raw one's-complement sums (DPDK ``lib/net/rte_ip.h``: ``__rte_raw_cksum``,
``rte_raw_cksum``, ``rte_raw_cksum_mbuf``).

Byte order: DPDK adds the data as host (little-endian) 16-bit words and returns the folded,
**non-inverted** sum in that order -- stored as a host ``uint16`` it puts the right bytes on
the wire.  Every function here returns DPDK's number (``{01 02 03}`` -> ``0x0204``); the wire
value is its byte swap (:func:`~pktbuf.net.cksum.naive.to_wire`).

Speed: :func:`raw_sum` loads 8 bytes at a time and adds their two 32-bit halves into a
64-bit accumulator (no carry can be lost before 16 GiB), which gives the same folded value as
DPDK's 16-bit loop: a one's-complement sum does not depend on the word width it is taken in.

Chains (:func:`raw_cksum_mbuf`): each segment's part is summed alone; a part that starts at
an odd byte of the range is byte-swapped before it is added.  DPDK truncates that part to 16
bits *before* folding it, so its result is wrong whenever such a part's sum exceeds 0xFFFF (a
bug still in DPDK main).  By default the part is folded first (correct); ``dpdk_bug=True``
gives DPDK's result, bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_FAULT, E_RANGE
from ...buf.mbuf.layout import MAX_SEGS, NULL
from ...rawmem import load_u8
from ..hdr.mem import load_le16, load_le32, load_le64

_M32 = np.uint64(0xFFFFFFFF)


@kernel(inline="always")
def raw_sum(addr, n):
    """The unfolded 64-bit sum of ``n`` bytes at ``addr`` (an odd last byte counts as the low
    byte of a word, i.e. it is padded with a zero after it)."""
    s = np.uint64(0)
    i = np.int64(0)
    while i + 32 <= n:
        a = load_le64(addr + i)
        b = load_le64(addr + i + 8)
        c = load_le64(addr + i + 16)
        d = load_le64(addr + i + 24)
        s += (a & _M32) + (a >> np.uint64(32)) + (b & _M32) + (b >> np.uint64(32))
        s += (c & _M32) + (c >> np.uint64(32)) + (d & _M32) + (d >> np.uint64(32))
        i += 32
    while i + 8 <= n:
        a = load_le64(addr + i)
        s += (a & _M32) + (a >> np.uint64(32))
        i += 8
    if i + 4 <= n:
        s += np.uint64(load_le32(addr + i))
        i += 4
    if i + 2 <= n:
        s += np.uint64(load_le16(addr + i))
        i += 2
    if i < n:
        s += np.uint64(load_u8(addr + i))
    return s


@kernel(inline="always")
def fold(s):
    """Fold a 64-bit sum to 16 bits with end-around carries (``__rte_raw_cksum_reduce``)."""
    s = np.uint64(s)
    s = (s & _M32) + (s >> np.uint64(32))
    s = (s & _M32) + (s >> np.uint64(32))
    s = (s & np.uint64(0xFFFF)) + (s >> np.uint64(16))
    s = (s & np.uint64(0xFFFF)) + (s >> np.uint64(16))
    return np.int64(s)


@kernel(inline="always")
def bswap16(v):
    return ((v & 0xFF) << 8) | ((v >> 8) & 0xFF)


@kernel
def raw_cksum(addr, n):
    """``rte_raw_cksum``: the folded, non-inverted sum of ``n`` bytes at ``addr`` (0 .. 0xFFFF,
    DPDK's byte order).  The caller guarantees the bytes are readable."""
    return fold(raw_sum(addr, n))


@kernel(inline="always")
def _dpdk_part(addr, n):
    """DPDK's unfolded 32-bit sum of 16-bit words (what it truncates in the bug)."""
    s = np.int64(0)
    i = np.int64(0)
    while i + 2 <= n:
        s += load_le16(addr + i)
        i += 2
    if i < n:
        s += np.int64(load_u8(addr + i))
    return s & 0xFFFFFFFF


@kernel
def raw_cksum_mbuf(dom, h, off, n, dpdk_bug):
    """``rte_raw_cksum_mbuf``: the raw checksum of bytes ``[off, off + n)`` of packet ``h``,
    across segments (0 .. 0xFFFF), or

    * ``E_RANGE`` (-34): ``off``/``n`` negative or ``off + n`` beyond ``pkt_len`` (DPDK: -1);
    * ``E_FAULT`` (-14): the chain ends before ``pkt_len`` bytes.

    ``dpdk_bug``: reproduce DPDK's result for parts starting at an odd offset (module
    docstring); False gives the correct sum.
    """
    m = dom.mb[h]
    if off < 0 or n < 0 or off + n > np.int64(m.pkt_len):
        return np.int64(E_RANGE)
    if off + n <= np.int64(m.data_len):
        return fold(raw_sum(np.int64(m.buf_addr) + np.int64(m.data_off) + off, n))
    if n == 0:
        return np.int64(0)          # an empty range at the very end: no segment to find
    seg = np.int64(h)
    nseg = 1
    while off >= np.int64(dom.mb[seg].data_len):
        off -= np.int64(dom.mb[seg].data_len)
        seg = np.int64(dom.mb[seg].next)
        nseg += 1
        if seg == NULL or nseg > MAX_SEGS:
            return np.int64(E_FAULT)
    acc = np.uint64(0)
    dacc = np.int64(0)              # DPDK's 32-bit accumulator, for dpdk_bug
    done = np.int64(0)
    while done < n:
        if seg == NULL or nseg > MAX_SEGS:
            return np.int64(E_FAULT)
        s = dom.mb[seg]
        chunk = np.int64(s.data_len) - off
        if chunk > n - done:
            chunk = n - done
        addr = np.int64(s.buf_addr) + np.int64(s.data_off) + off
        if dpdk_bug:
            part = _dpdk_part(addr, chunk)
            if done & 1:
                part = bswap16(part & 0xFFFF)      # truncated, not folded: DPDK's bug
            dacc = (dacc + part) & 0xFFFFFFFF
        else:
            part = raw_sum(addr, chunk)
            if done & 1:
                part = np.uint64(bswap16(fold(part)))
            acc += part
        done += chunk
        off = 0
        seg = np.int64(s.next)
        nseg += 1
    if dpdk_bug:
        return fold(np.uint64(dacc))
    return fold(acc)
