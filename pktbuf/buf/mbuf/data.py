"""Packet data: headroom/tailroom, append/prepend/adj/trim, chains, read, linearize, copy.

Addresses are virtual addresses (``int64``), as DPDK returns pointers; view them with
:func:`pktbuf.rawmem.addr_u8` or take :func:`pktmbuf_data` directly.  Calls that return an
address return a negative error code instead on failure (an address is never negative), and
change nothing in that case.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel, never_inline
from ...errors import E_FAULT, E_INVAL, E_NOENT, E_NOSPC, E_OVERFLOW, E_RANGE
from ...rawmem import addr_u8, copy_in_bounds, move_in_bounds
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
    """``rte_pktmbuf_lastseg``: the last segment of packet ``h`` (a chain that loops stops
    after 65535 segments instead of spinning forever)."""
    seg = np.int64(h)
    n = 1
    while dom.mb[seg].next != NULL and n < MAX_SEGS:
        seg = np.int64(dom.mb[seg].next)
        n += 1
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


@never_inline
@kernel
def pktmbuf_read(dom, h, off, length, buf):
    """``rte_pktmbuf_read``: address of ``length`` bytes of packet data from offset ``off``.

    If the bytes lie inside one segment the address points into it (no copy); otherwise they
    are copied into ``buf`` (a uint8 array of at least ``length``) and ``buf``'s address is
    returned.  -ERANGE (-34) if ``off + length`` is beyond ``pkt_len`` (or ``buf`` is too
    small), -EFAULT (-14) if the segments hold fewer bytes than ``pkt_len`` says (a packet
    whose lengths disagree; nothing is written beyond ``buf[:length]`` then either).

    Zero-length segments anywhere in the chain are legal (DPDK's test_mbuf reads across
    {1024, 0, 100}): the skip walks over every segment that ends at or before ``off``, as
    DPDK 22.11's ``__rte_pktmbuf_read`` does (``while (off >= data_len)``), and the copy loop
    never computes a negative chunk.
    """
    m = dom.mb[h]
    if off < 0 or length < 0 or off + length > np.int64(m.pkt_len):
        return np.int64(E_RANGE)
    if off + length <= np.int64(m.data_len):
        return pktmbuf_mtod(dom, h) + off
    # skip the segments that end at or before `off`; stop on the last one (off == pkt_len
    # with length 0 ends there) -- or at a broken chain
    seg = np.int64(h)
    nseg = 0
    while off >= np.int64(dom.mb[seg].data_len):
        nxt = np.int64(dom.mb[seg].next)
        nseg += 1
        if nxt == NULL or nseg > MAX_SEGS:
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
        if seg == NULL or nseg > MAX_SEGS:
            return np.int64(E_FAULT)          # the chain ended before pkt_len bytes
        s = dom.mb[seg]
        chunk = np.int64(s.data_len) - off     # off < data_len here, or the segment is empty
        if chunk > length - done:
            chunk = length - done
        if chunk > 0:
            copy_in_bounds(dst + done, dst, buf.size,
                           np.int64(s.buf_addr) + np.int64(s.data_off) + off,
                           np.int64(s.buf_addr), np.int64(s.buf_len), chunk)
            done += chunk
        off = 0
        seg = np.int64(s.next)
        nseg += 1
    return np.int64(dst)


@kernel
def pktmbuf_linearize(dom, lcore, h):
    """``rte_pktmbuf_linearize``: move every segment's data into the first one.

    Returns 0, or -ENOSPC (-28) (nothing changed) if the first segment's tailroom cannot hold
    the rest of the packet, or -EFAULT (-14) (nothing changed) if the chain loops.  The
    emptied segments are freed through ``lcore``'s caches.

    How much moves is the sum of the segments' ``data_len``, counted before anything is
    copied -- not ``pkt_len - data_len``, which a packet whose lengths disagree would make too
    small for the copy that follows.
    """
    m = dom.mb[h]
    if m.next == NULL:
        return 0
    extra = np.int64(0)
    seg = np.int64(m.next)
    nseg = 1
    while seg != NULL:
        nseg += 1
        if nseg > MAX_SEGS:
            return E_FAULT
        extra += np.int64(dom.mb[seg].data_len)
        seg = np.int64(dom.mb[seg].next)
    if extra > pktmbuf_tailroom(dom, h):
        return E_NOSPC
    dst = np.int64(m.buf_addr) + np.int64(m.data_off) + np.int64(m.data_len)
    seg = np.int64(m.next)
    while seg != NULL:
        s = dom.mb[seg]
        n = np.int64(s.data_len)
        # memmove: a later segment may be a clone of this very buffer
        move_in_bounds(dst, np.int64(m.buf_addr), np.int64(m.buf_len),
                       np.int64(s.buf_addr) + np.int64(s.data_off),
                       np.int64(s.buf_addr), np.int64(s.buf_len), n)
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
    Returns its handle, or (nothing allocated is kept):

    * -ERANGE (-34) if ``off > pkt_len``;
    * -ENOENT (-2) if the pool ran out;
    * -EINVAL (-22) if there is data to copy and the pool's mbufs have no room for data
      (data room equal to the headroom: the copy would chain empty mbufs until the pool is
      exhausted);
    * -EOVERFLOW (-75) if the copy would need more than 65535 segments;
    * -EFAULT (-14) if the segments hold fewer bytes than ``pkt_len`` says, or the chain loops.

    Zero-length segments anywhere in the source are legal.
    """
    src = dom.mb[h]
    pkt_len = np.int64(src.pkt_len)
    if off < 0 or off > pkt_len:
        return np.int64(E_RANGE)
    if length < 0 or length > pkt_len - off:
        length = pkt_len - off
    p = dom.pools[pid]
    if length > 0 and np.int64(p.data_room) <= np.int64(p.headroom):
        return np.int64(E_INVAL)
    head = pktmbuf_alloc(dom, pid, lcore)
    if head < 0:
        return head
    pktmbuf_copy_header(dom, head, h)
    dom.mb[head].ol_flags = src.ol_flags & ~np.uint64(F_NOT_DIRECT)
    # skip the segments that end at or before `off` (zero-length ones included)
    seg = np.int64(h)
    nsrc = 1
    while seg != NULL and off >= np.int64(dom.mb[seg].data_len):
        off -= np.int64(dom.mb[seg].data_len)
        seg = np.int64(dom.mb[seg].next)
        nsrc += 1
        if nsrc > MAX_SEGS + 1:
            pktmbuf_free(dom, lcore, head)
            return np.int64(E_FAULT)
    cur = head
    remaining = length
    while remaining > 0:
        if seg == NULL:
            # the chain ended before pkt_len: the source's lengths disagree
            pktmbuf_free(dom, lcore, head)
            return np.int64(E_FAULT)
        room = pktmbuf_tailroom(dom, cur)
        if room == 0:
            if np.int64(dom.mb[head].nb_segs) >= MAX_SEGS:
                pktmbuf_free(dom, lcore, head)
                return np.int64(E_OVERFLOW)
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
        if chunk > 0:
            c = dom.mb[cur]
            copy_in_bounds(np.int64(c.buf_addr) + np.int64(c.data_off) + np.int64(c.data_len),
                           np.int64(c.buf_addr), np.int64(c.buf_len),
                           np.int64(s.buf_addr) + np.int64(s.data_off) + off,
                           np.int64(s.buf_addr), np.int64(s.buf_len), chunk)
            c.data_len = np.int64(c.data_len) + chunk
            dom.mb[head].pkt_len = np.int64(dom.mb[head].pkt_len) + chunk
            remaining -= chunk
            off += chunk
        if off >= np.int64(s.data_len):
            off = 0
            seg = np.int64(s.next)
            nsrc += 1
            if nsrc > MAX_SEGS + 1:
                pktmbuf_free(dom, lcore, head)
                return np.int64(E_FAULT)
    return head
