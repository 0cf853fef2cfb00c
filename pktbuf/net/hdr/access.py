"""Reading and writing header bytes of an mbuf's packet data, across segments.

Every header accessor of :mod:`pktbuf.net.hdr` first gets the address of the header's bytes
with :func:`hdr_read` and then loads fields from that address (:mod:`.mem`).  The read is
``rte_pktmbuf_read``'s (DPDK ``lib/mbuf/rte_mbuf.h``; pktbuf's is
:func:`pktbuf.buf.mbuf.data.pktmbuf_read`): when the bytes lie inside one segment the address
points into that segment, otherwise they are gathered into the caller's scratch buffer (a
:func:`~pktbuf.net.hdr.mem.stack_u8` array) with bounded copies.  Nothing past a segment's
``data_len`` nor past the packet's ``pkt_len`` is ever read.

:func:`pktmbuf_write` is the reverse (DPDK 22.11 has no such call): it scatters bytes into the
packet at an offset, for the header builders, so that a header may be written across a
segment boundary too.

Errors (negative, nothing read or written):

* ``E_RANGE`` (-34): ``off + n`` is beyond ``pkt_len`` (the header does not fit the packet:
  a truncated header), or ``off``/``n`` negative, or the scratch buffer is too small;
* ``E_FAULT`` (-14): the segments hold fewer bytes than ``pkt_len`` says (a packet whose
  lengths disagree).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...buf.mbuf.data import pktmbuf_read
from ...buf.mbuf.layout import MAX_SEGS, NULL
from ...errors import E_FAULT, E_RANGE
from ...rawmem import copy_in_bounds


@kernel(inline="always")
def hdr_read(dom, h, off, n, buf):
    """Address of ``n`` contiguous bytes of packet ``h`` from offset ``off`` (into the segment,
    or into ``buf`` when they straddle segments), or ``E_RANGE``/``E_FAULT``.

    Inlined: bytes inside the first segment (the common case) cost a compare and an add, as
    in DPDK's inline ``rte_pktmbuf_read``; the rest goes to the out-of-line reader."""
    m = dom.mb[h]
    if off >= 0 and n >= 0 and off + n <= np.int64(m.data_len):
        return np.int64(m.buf_addr) + np.int64(m.data_off) + off
    return pktmbuf_read(dom, h, off, n, buf)


@kernel
def pktmbuf_write(dom, h, off, n, src, src_size):
    """Copy ``n`` bytes from address ``src`` (a buffer of ``src_size`` bytes) into packet
    ``h`` at offset ``off``, across segments.  Returns 0, ``E_RANGE`` if ``off + n`` exceeds
    ``pkt_len`` or ``n > src_size``, ``E_FAULT`` if the chain ends early (then the bytes of
    the segments before the break may have been written)."""
    m = dom.mb[h]
    if off < 0 or n < 0 or n > src_size or off + n > np.int64(m.pkt_len):
        return E_RANGE
    seg = np.int64(h)
    nseg = 0
    while off >= np.int64(dom.mb[seg].data_len):
        nxt = np.int64(dom.mb[seg].next)
        nseg += 1
        if nxt == NULL or nseg > MAX_SEGS:
            if n == 0:
                return 0
            return E_FAULT
        off -= np.int64(dom.mb[seg].data_len)
        seg = nxt
    done = np.int64(0)
    while done < n:
        if seg == NULL or nseg > MAX_SEGS:
            return E_FAULT
        s = dom.mb[seg]
        chunk = np.int64(s.data_len) - off
        if chunk > n - done:
            chunk = n - done
        if chunk > 0:
            copy_in_bounds(np.int64(s.buf_addr) + np.int64(s.data_off) + off,
                           np.int64(s.buf_addr), np.int64(s.buf_len),
                           src + done, src, src_size, chunk)
            done += chunk
        off = 0
        seg = np.int64(s.next)
        nseg += 1
    return 0
