"""pktbuf Rx on a vhost port: the frames the guest sends, taken from its Tx vring (2k + 1).

Per available chain -- split ring (:func:`rx_split`, virtio 1.1 §2.6) or packed ring
(:func:`rx_packed`, §2.7), chosen per queue; §5.1.6; DPDK 22.11 ``virtio_dev_tx_split`` /
``virtio_dev_tx_packed``:

1. walk it once (:func:`~pktbuf.drivers.vhost.vring.walk_chain`): every descriptor read-only,
   every address inside the memory table; its buffers become host pieces;
2. skip the virtio-net header (no offload is negotiated, so nothing in it matters) and copy
   the frame bytes into a chain of ``ceil(len / room)`` mbufs from the queue's pool;
3. hand it back: used entry ``(head, 0)`` (split), used descriptor ``(id, 0)`` (packed).

A chain no longer than the header, or with more than ``MAX_FRAME`` bytes after it, is consumed
and counted in ``QS_ERRORS``.  When the pool is dry the chain stays in the ring (``QS_NOMBUF``)
and the burst ends.  A chain that breaks the rules fails the queue: the chains consumed before
it are published and their packets returned, and the control thread takes the link down.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_relaxed
from ...buf.mbuf.raw import pktmbuf_alloc_bulk
from ...rawmem import addr_view, copy_in_bounds
from .layout import (A16_RING, IDX_MASK, MAX_FRAME, Q_DESC, Q_HDR, Q_MASK, Q_MBUF_CAP, Q_N,
                     Q_PACKED, Q_POOL, Q_PORT, QS_AVAIL_WRAP, QS_BURSTS, QS_BYTES, QS_ERRORS,
                     QS_LAST_AVAIL, QS_NOMBUF, QS_PACKETS, QS_USED_IDX, QS_USED_WRAP,
                     SCRATCH_MB)
from .packed import packed_advance, packed_avail, packed_call, packed_put_used, packed_walk
from .queue import queue_enter, queue_fail, queue_leave
from .vring import avail_count, avail_view, desc_view, publish_used, used_view32, walk_chain

__all__ = ["vhost_rx_burst"]


@kernel
def rx_copy_frame(mb, q, end, skip, dlen, cap, nseg):
    """Copy the pieces ``0 .. end-1`` after their first ``skip`` bytes (``dlen`` bytes) into
    the ``nseg`` mbufs of ``scr_mb``, chained; returns the head."""
    k = 0
    h = q.scr_mb[0]
    m = mb[h]
    dst = np.int64(m.buf_addr) + np.int64(m.data_off)
    room = cap
    used = np.int64(0)
    for i in range(end):
        src = q.pc_addr[i]
        ln = q.pc_len[i]
        src0, len0 = src, ln
        if skip > 0:
            s = skip if skip <= ln else ln
            src += s
            ln -= s
            skip -= s
        while ln > 0:
            if room == 0:
                mb[q.scr_mb[k]].data_len = used
                k += 1
                mb[q.scr_mb[k - 1]].next = q.scr_mb[k]
                m = mb[q.scr_mb[k]]
                dst = np.int64(m.buf_addr) + np.int64(m.data_off)
                room = cap
                used = 0
            c = ln if ln <= room else room
            copy_in_bounds(dst, np.int64(m.buf_addr), np.int64(m.buf_len), src, src0, len0, c)
            dst += c
            src += c
            ln -= c
            room -= c
            used += c
    m.data_len = used
    hm = mb[h]
    hm.pkt_len = dlen
    hm.nb_segs = nseg
    hm.port = q.cfg[Q_PORT]
    return h


@kernel(inline="always")
def rx_take(dom, q, lcore, out, got, end, dlen, cap, pid):
    """Deliver the frame of ``dlen`` bytes after the header in pieces ``0 .. end-1`` into
    ``out[got]``: 1; 0 when it is dropped (nothing after the header, or longer than
    MAX_FRAME: counted in ``QS_ERRORS``); -1 when the pool is dry (``QS_NOMBUF``)."""
    if dlen <= 0 or dlen > MAX_FRAME:
        q.st[QS_ERRORS] += 1
        return 0
    nseg = (dlen + cap - 1) // cap
    if nseg > SCRATCH_MB:
        q.st[QS_ERRORS] += 1
        return 0
    if pktmbuf_alloc_bulk(dom, pid, lcore, q.scr_mb, nseg) < 0:
        q.st[QS_NOMBUF] += 1
        return -1
    out[got] = rx_copy_frame(dom.mb, q, end, q.cfg[Q_HDR], dlen, cap, nseg)
    return 1


@kernel
def rx_packed(dom, q, lcore, out, n):
    """The packed-ring burst body (the queue is up and ours)."""
    nr = q.cfg[Q_N]
    d64 = desc_view(q)
    d16 = addr_view(q.cfg[Q_DESC], 8 * nr, np.uint16)
    hdr = q.cfg[Q_HDR]
    cap = q.cfg[Q_MBUF_CAP]
    pid = q.cfg[Q_POOL]
    slot, wrap = q.st[QS_LAST_AVAIL], q.st[QS_AVAIL_WRAP]
    us, uw = q.st[QS_USED_IDX], q.st[QS_USED_WRAP]
    got = 0
    took = 0
    nbytes = 0
    while got < n and took < nr and packed_avail(d64, slot, wrap):
        end, total, nd, bid = packed_walk(q, slot, False, 0)
        if end < 0:
            queue_fail(q, -end, total)
            break
        r = rx_take(dom, q, lcore, out, got, end, total - hdr, cap, pid)
        if r < 0:
            break
        got += r
        if r:
            nbytes += total - hdr
        packed_put_used(d64, d16, us, uw, bid, 0, True)
        us, uw = packed_advance(us, uw, nd, nr)
        slot, wrap = packed_advance(slot, wrap, nd, nr)
        took += 1
    q.st[QS_BURSTS] += 1
    if took > 0:
        q.st[QS_LAST_AVAIL], q.st[QS_AVAIL_WRAP] = slot, wrap
        q.st[QS_USED_IDX], q.st[QS_USED_WRAP] = us, uw
        packed_call(q)
        q.st[QS_PACKETS] += got
        q.st[QS_BYTES] += nbytes
    return got


@kernel
def rx_split(dom, q, lcore, out, n):
    """The burst body (the queue is up and ours)."""
    av = avail_view(q)
    u32 = used_view32(q)
    mask = q.cfg[Q_MASK]
    hdr = q.cfg[Q_HDR]
    cap = q.cfg[Q_MBUF_CAP]
    pid = q.cfg[Q_POOL]
    last = q.st[QS_LAST_AVAIL]
    cnt, idx = avail_count(q, av, last)
    if cnt < 0:
        queue_fail(q, -cnt, idx)
        return 0
    uidx = q.st[QS_USED_IDX]
    got = 0
    took = 0
    nbytes = 0
    while took < cnt and got < n:
        head = np.int64(load_relaxed(av, A16_RING + ((last + took) & mask)))
        end, total = walk_chain(q, head, False, 0)
        if end < 0:
            queue_fail(q, -end, total)
            break
        r = rx_take(dom, q, lcore, out, got, end, total - hdr, cap, pid)
        if r < 0:
            break                              # no mbufs: the chain stays in the ring
        got += r
        if r:
            nbytes += total - hdr
        s = uidx & mask
        u32[1 + 2 * s] = np.uint32(head)
        u32[2 + 2 * s] = np.uint32(0)
        uidx = (uidx + 1) & IDX_MASK
        took += 1
    q.st[QS_BURSTS] += 1
    if took > 0:
        old = q.st[QS_USED_IDX]
        q.st[QS_LAST_AVAIL] = (last + took) & IDX_MASK
        q.st[QS_USED_IDX] = uidx
        publish_used(q, old, uidx)
        q.st[QS_PACKETS] += got
        q.st[QS_BYTES] += nbytes
    return got


@kernel
def vhost_rx_burst(dom, q, lcore, out, n):
    """Receive up to ``n`` frames the guest sent into ``out[:n]``; returns how many (0 while
    the ring is down).  ``q`` is a :data:`~pktbuf.drivers.vhost.layout.VHOST_QUEUE` block."""
    if not queue_enter(q):
        return 0
    if q.cfg[Q_PACKED]:
        got = rx_packed(dom, q, lcore, out, n)
    else:
        got = rx_split(dom, q, lcore, out, n)
    queue_leave(q)
    return got
