"""Packet data: headroom/tailroom, append/prepend/adj/trim, chains, read, linearize, copy.

Addresses are virtual addresses (``int64``), as DPDK returns pointers; view them with
:func:`pktbuf.rawmem.addr_u8` or take :func:`pktmbuf_data` directly.  Calls that return an
address return a negative error code instead on failure (an address is never negative), and
change nothing in that case.
"""
from __future__ import annotations

import numpy as np

from .._jit import kernel
from ..errors import E_NOENT, E_NOSPC, E_OVERFLOW, E_RANGE
from ..rawmem import addr_u8, memcpy
from .free import pktmbuf_free, pktmbuf_free_seg
from .layout import F_NOT_DIRECT, MAX_SEGS, NULL
from .raw import pktmbuf_alloc, pktmbuf_copy_header


@kernel
def pktmbuf_headroom(dom, h):
    """Bytes free in front of the data of segment ``h``."""
    return np.int64(dom.mb[h].data_off)


@kernel
def pktmbuf_tailroom(dom, h):
    """Bytes free after the data of segment ``h``."""
    m = dom.mb[h]
    return np.int64(m.buf_len) - np.int64(m.data_off) - np.int64(m.data_len)


@kernel
def pktmbuf_mtod(dom, h):
    """``rte_pktmbuf_mtod``: address of the first data byte of segment ``h``."""
    m = dom.mb[h]
    return np.int64(m.buf_addr) + np.int64(m.data_off)


@kernel
def pktmbuf_mtod_offset(dom, h, off):
    """``rte_pktmbuf_mtod_offset``: address of data byte ``off`` of segment ``h``."""
    return pktmbuf_mtod(dom, h) + off


@kernel(nrt=True)
def pktmbuf_data(dom, h):
    """A ``uint8`` view of segment ``h``'s data (``data_len`` bytes); writes go to the packet.

    For your own ``@njit`` code (it returns an array, so it is compiled with Numba's runtime and
    cannot be called from pktbuf's runtime-free kernels, which use ``addr_u8`` instead)."""
    m = dom.mb[h]
    return addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), np.int64(m.data_len))


@kernel(nrt=True)
def pktmbuf_buffer(dom, h):
    """A ``uint8`` view of segment ``h``'s whole buffer (``buf_len`` bytes)."""
    m = dom.mb[h]
    return addr_u8(np.int64(m.buf_addr), np.int64(m.buf_len))


@kernel
def pktmbuf_lastseg(dom, h):
    """``rte_pktmbuf_lastseg``: the last segment of packet ``h``."""
    seg = np.int64(h)
    while dom.mb[seg].next != NULL:
        seg = np.int64(dom.mb[seg].next)
    return seg


@kernel
def pktmbuf_is_contiguous(dom, h):
    """True for a single-segment packet."""
    return dom.mb[h].nb_segs == 1


@kernel
def pktmbuf_append(dom, h, length):
    """``rte_pktmbuf_append``: grow the packet by ``length`` bytes at its tail.

    Returns the address of the added bytes (in the last segment), or -ENOSPC (-28) when the last
    segment's tailroom is smaller than ``length`` (nothing changes).
    """
    if length < 0:
        return np.int64(E_RANGE)
    last = pktmbuf_lastseg(dom, h)
    if length > pktmbuf_tailroom(dom, last):
        return np.int64(E_NOSPC)
    l = dom.mb[last]
    tail = np.int64(l.buf_addr) + np.int64(l.data_off) + np.int64(l.data_len)
    l.data_len = np.int64(l.data_len) + length
    dom.mb[h].pkt_len = np.int64(dom.mb[h].pkt_len) + length
    return tail


@kernel
def pktmbuf_prepend(dom, h, length):
    """``rte_pktmbuf_prepend``: grow the packet by ``length`` bytes in front.

    Returns the new data start address, or -ENOSPC (-28) if the headroom is too small.
    """
    if length < 0:
        return np.int64(E_RANGE)
    m = dom.mb[h]
    if length > np.int64(m.data_off):
        return np.int64(E_NOSPC)
    m.data_off = np.int64(m.data_off) - length
    m.data_len = np.int64(m.data_len) + length
    m.pkt_len = np.int64(m.pkt_len) + length
    return np.int64(m.buf_addr) + np.int64(m.data_off)


@kernel
def pktmbuf_adj(dom, h, length):
    """``rte_pktmbuf_adj``: remove ``length`` bytes from the front of the first segment.

    Returns the new data start address, or -ERANGE (-34) if ``length`` exceeds ``data_len``.
    """
    m = dom.mb[h]
    if length < 0 or length > np.int64(m.data_len):
        return np.int64(E_RANGE)
    m.data_off = np.int64(m.data_off) + length
    m.data_len = np.int64(m.data_len) - length
    m.pkt_len = np.int64(m.pkt_len) - length
    return np.int64(m.buf_addr) + np.int64(m.data_off)


@kernel
def pktmbuf_trim(dom, h, length):
    """``rte_pktmbuf_trim``: remove ``length`` bytes from the end of the last segment.

    Returns 0, or -ERANGE (-34) if ``length`` exceeds the last segment's ``data_len``.
    """
    last = pktmbuf_lastseg(dom, h)
    l = dom.mb[last]
    if length < 0 or length > np.int64(l.data_len):
        return E_RANGE
    l.data_len = np.int64(l.data_len) - length
    dom.mb[h].pkt_len = np.int64(dom.mb[h].pkt_len) - length
    return 0


@kernel
def pktmbuf_chain(dom, head, tail):
    """``rte_pktmbuf_chain``: append packet ``tail`` to packet ``head``.

    Returns 0, or -EOVERFLOW (-75) if the result would have more than 65535 segments.
    ``tail`` must no longer be used as a packet of its own.
    """
    mh = dom.mb[head]
    mt = dom.mb[tail]
    if np.int64(mh.nb_segs) + np.int64(mt.nb_segs) > MAX_SEGS:
        return E_OVERFLOW
    last = pktmbuf_lastseg(dom, head)
    dom.mb[last].next = tail
    mh.nb_segs = np.int64(mh.nb_segs) + np.int64(mt.nb_segs)
    mh.pkt_len = np.int64(mh.pkt_len) + np.int64(mt.pkt_len)
    mt.pkt_len = mt.data_len
    return 0


@kernel
def pktmbuf_read(dom, h, off, length, buf):
    """``rte_pktmbuf_read``: address of ``length`` bytes of packet data from offset ``off``.

    If the bytes lie inside one segment the address points into it (no copy); otherwise they
    are copied into ``buf`` (a uint8 array of at least ``length``) and ``buf``'s address is
    returned.  -ERANGE (-34) if ``off + length`` is beyond ``pkt_len`` (or ``buf`` too small).
    """
    m = dom.mb[h]
    if off < 0 or length < 0 or off + length > np.int64(m.pkt_len):
        return np.int64(E_RANGE)
    if off + length <= np.int64(m.data_len):
        return pktmbuf_mtod(dom, h) + off
    # skip whole segments before `off` (a zero-length segment stops the skip, as in DPDK)
    seg = np.int64(h)
    while off >= np.int64(dom.mb[seg].data_len) and dom.mb[seg].data_len != 0:
        nxt = np.int64(dom.mb[seg].next)
        if nxt == NULL:   # off == pkt_len and length == 0: the end of the last segment
            break
        off -= np.int64(dom.mb[seg].data_len)
        seg = nxt
    if off + length <= np.int64(dom.mb[seg].data_len):
        return pktmbuf_mtod(dom, seg) + off
    if buf.size < length:
        return np.int64(E_RANGE)
    dst = buf.ctypes.data
    done = np.int64(0)
    while done < length:
        s = dom.mb[seg]
        chunk = np.int64(s.data_len) - off
        if chunk > length - done:
            chunk = length - done
        memcpy(dst + done, np.int64(s.buf_addr) + np.int64(s.data_off) + off, chunk)
        done += chunk
        off = 0
        seg = np.int64(s.next)
    return np.int64(dst)


@kernel
def pktmbuf_linearize(dom, lcore, h):
    """``rte_pktmbuf_linearize``: move every segment's data into the first one.

    Returns 0, or -ENOSPC (-28) (nothing changed) if the first segment's tailroom cannot hold
    the rest of the packet.  The emptied segments are freed through ``lcore``'s caches.
    """
    m = dom.mb[h]
    if m.nb_segs == 1:
        return 0
    extra = np.int64(m.pkt_len) - np.int64(m.data_len)
    if extra > pktmbuf_tailroom(dom, h):
        return E_NOSPC
    dst = np.int64(m.buf_addr) + np.int64(m.data_off) + np.int64(m.data_len)
    seg = np.int64(m.next)
    while seg != NULL:
        s = dom.mb[seg]
        n = np.int64(s.data_len)
        memcpy(dst, np.int64(s.buf_addr) + np.int64(s.data_off), n)
        dst += n
        nxt = np.int64(s.next)
        pktmbuf_free_seg(dom, lcore, seg)
        seg = nxt
    m.data_len = np.int64(m.data_len) + extra
    m.next = NULL
    m.nb_segs = 1
    return 0


@kernel
def pktmbuf_copy(dom, pid, lcore, h, off, length):
    """``rte_pktmbuf_copy``: a deep copy of bytes [off, off + length) of packet ``h``.

    ``length`` is clamped to the data after ``off``.  The copy is a new (direct) packet from
    pool ``pid``, chained when it does not fit one buffer, with the header fields of ``h``.
    Returns its handle, -ERANGE (-34) if ``off > pkt_len``, or -ENOENT (-2) (nothing allocated
    is kept) if the pool ran out.
    """
    src = dom.mb[h]
    pkt_len = np.int64(src.pkt_len)
    if off < 0 or off > pkt_len:
        return np.int64(E_RANGE)
    if length < 0 or length > pkt_len - off:
        length = pkt_len - off
    head = pktmbuf_alloc(dom, pid, lcore)
    if head < 0:
        return head
    pktmbuf_copy_header(dom, head, h)
    dom.mb[head].ol_flags = src.ol_flags & ~np.uint64(F_NOT_DIRECT)
    # skip to the segment holding `off`
    seg = np.int64(h)
    while seg != NULL and off >= np.int64(dom.mb[seg].data_len):
        off -= np.int64(dom.mb[seg].data_len)
        seg = np.int64(dom.mb[seg].next)
    cur = head
    remaining = length
    while remaining > 0:
        room = pktmbuf_tailroom(dom, cur)
        if room == 0:
            nxt = pktmbuf_alloc(dom, pid, lcore)
            if nxt < 0:
                pktmbuf_free(dom, lcore, head)
                return np.int64(E_NOENT)
            dom.mb[cur].next = nxt
            dom.mb[head].nb_segs = np.int64(dom.mb[head].nb_segs) + 1
            cur = nxt
            room = pktmbuf_tailroom(dom, cur)
        s = dom.mb[seg]
        avail = np.int64(s.data_len) - off
        chunk = avail if avail < room else room
        if chunk > remaining:
            chunk = remaining
        c = dom.mb[cur]
        memcpy(np.int64(c.buf_addr) + np.int64(c.data_off) + np.int64(c.data_len),
               np.int64(s.buf_addr) + np.int64(s.data_off) + off, chunk)
        c.data_len = np.int64(c.data_len) + chunk
        dom.mb[head].pkt_len = np.int64(dom.mb[head].pkt_len) + chunk
        remaining -= chunk
        off += chunk
        if off >= np.int64(s.data_len):
            off = 0
            seg = np.int64(s.next)
    return head
