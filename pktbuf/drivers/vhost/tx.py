"""pktbuf Tx on a vhost port: frames written into the buffers the guest posted on its Rx vring
(2k).

Per packet -- split ring (:func:`tx_split`) or packed ring (:func:`tx_packed`), chosen per
queue (virtio 1.1 §5.1.6.3-4; DPDK 22.11 ``virtio_dev_rx_split`` / ``virtio_dev_rx_packed``):

1. take available chains (each walked once, every descriptor device-writable, every address
   inside the memory table) until their room holds the header and the frame -- one chain
   without MRG_RXBUF, as many as needed with it;
2. write the header (zeros: no offload is negotiated; ``num_buffers`` = chains taken) and the
   frame's segments across the chains' pieces, filling each chain but the last completely;
3. write one used entry (split) or used descriptor (packed) per chain: ``(head or id, bytes
   written into it)``.

A packet that does not fit the chains available now ends the burst: it and the rest stay the
caller's (``QS_MISSED``).  Sent mbufs are freed with one bulk free after ``used.idx`` is
published.  A chain that breaks the rules fails the queue; the packets already placed are
published and counted as sent.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_relaxed, store_release
from ...buf.mbuf.free import pktmbuf_free_bulk
from ...buf.mbuf.layout import NULL
from ...rawmem import addr_view, copy_in_bounds
from .layout import (A16_RING, IDX_MASK, MAX_BUFS, Q_DESC, Q_HDR, Q_MASK, Q_MRG, Q_N, Q_PACKED,
                     QS_AVAIL_WRAP, QS_BURSTS, QS_BYTES, QS_LAST_AVAIL, QS_MISSED, QS_PACKETS,
                     QS_USED_IDX, QS_USED_WRAP, V_BUFS)
from .packed import packed_advance, packed_avail, packed_call, packed_put_used, packed_walk
from .queue import queue_enter, queue_fail, queue_leave
from .vring import avail_count, avail_view, desc_view, publish_used, used_view32, walk_chain

__all__ = ["vhost_tx_burst"]


@kernel(inline="always")
def put_bytes(q, pi, po, src, ln):
    """Copy ``ln`` bytes from ``src`` into the pieces from piece ``pi``, offset ``po``; the
    caller made sure they have room.  Returns the new ``(pi, po)``."""
    src0, len0 = src, ln
    while ln > 0:
        room = q.pc_len[pi] - po
        if room == 0:
            pi += 1
            po = 0
            continue
        c = ln if ln <= room else room
        copy_in_bounds(q.pc_addr[pi] + po, q.pc_addr[pi], q.pc_len[pi], src, src0, len0, c)
        po += c
        src += c
        ln -= c
    return pi, po


@kernel
def tx_place(mb, q, h, plen, nb, hdr):
    """Write the header and packet ``h`` (``plen`` bytes) into the gathered pieces."""
    for i in range(hdr):
        q.hdr[i] = 0
    if hdr == 12:
        q.hdr[10] = np.uint8(nb & 0xFF)
        q.hdr[11] = np.uint8(nb >> 8)
    pi, po = put_bytes(q, 0, 0, np.int64(q.hdr.ctypes.data), hdr)
    seg = np.int64(h)
    while seg != NULL:
        m = mb[seg]
        pi, po = put_bytes(q, pi, po, np.int64(m.buf_addr) + np.int64(m.data_off),
                           np.int64(m.data_len))
        seg = np.int64(m.next)


@kernel
def tx_packed(dom, q, lcore, pkts, n):
    """The packed-ring burst body (the queue is up and ours).  A packet's used descriptors are
    written in order, the first one's flags last, so the guest never sees half a packet."""
    mb = dom.mb
    nr = q.cfg[Q_N]
    d64 = desc_view(q)
    d16 = addr_view(q.cfg[Q_DESC], 8 * nr, np.uint16)
    hdr = q.cfg[Q_HDR]
    mrg = q.cfg[Q_MRG] != 0
    slot, wrap = q.st[QS_LAST_AVAIL], q.st[QS_AVAIL_WRAP]
    us, uw = q.st[QS_USED_IDX], q.st[QS_USED_WRAP]
    sent = 0
    nbytes = 0
    failed = False
    for p in range(n):
        h = pkts[p]
        plen = np.int64(mb[h].pkt_len)
        need = hdr + plen
        nb = 0
        room = np.int64(0)
        end = np.int64(0)
        s2, w2 = slot, wrap
        while room < need and (mrg or nb == 0):
            if nb >= MAX_BUFS:
                queue_fail(q, V_BUFS, nb)
                failed = True
                break
            if not packed_avail(d64, s2, w2):
                break
            end, total, nd, bid = packed_walk(q, s2, True, end)
            if end < 0:
                queue_fail(q, -end, total)
                failed = True
                break
            q.buf_head[nb] = bid | (nd << 16)
            q.buf_cap[nb] = total
            s2, w2 = packed_advance(s2, w2, nd, nr)
            room += total
            nb += 1
        if failed or room < need:
            break
        tx_place(mb, q, h, plen, nb, hdr)
        rem = need
        first_slot = us
        first_fl = 0
        for b in range(nb):
            w = q.buf_cap[b] if q.buf_cap[b] <= rem else rem
            rem -= w
            fl = packed_put_used(d64, d16, us, uw, q.buf_head[b] & 0xFFFF, w, b > 0)
            if b == 0:
                first_fl = fl
            us, uw = packed_advance(us, uw, q.buf_head[b] >> 16, nr)
        store_release(d16, 8 * first_slot + 7, np.uint16(first_fl))
        slot, wrap = s2, w2
        sent += 1
        nbytes += plen
    q.st[QS_BURSTS] += 1
    if sent > 0:
        q.st[QS_LAST_AVAIL], q.st[QS_AVAIL_WRAP] = slot, wrap
        q.st[QS_USED_IDX], q.st[QS_USED_WRAP] = us, uw
        packed_call(q)
        pktmbuf_free_bulk(dom, lcore, pkts, sent)
        q.st[QS_PACKETS] += sent
        q.st[QS_BYTES] += nbytes
    q.st[QS_MISSED] += n - sent
    return sent


@kernel
def tx_split(dom, q, lcore, pkts, n):
    """The burst body (the queue is up and ours)."""
    mb = dom.mb
    av = avail_view(q)
    u32 = used_view32(q)
    mask = q.cfg[Q_MASK]
    hdr = q.cfg[Q_HDR]
    mrg = q.cfg[Q_MRG] != 0
    last = q.st[QS_LAST_AVAIL]
    cnt, idx = avail_count(q, av, last)
    if cnt < 0:
        queue_fail(q, -cnt, idx)
        q.st[QS_MISSED] += n
        return 0
    uidx = q.st[QS_USED_IDX]
    took = 0
    sent = 0
    nbytes = 0
    failed = False
    for p in range(n):
        h = pkts[p]
        plen = np.int64(mb[h].pkt_len)
        need = hdr + plen
        nb = 0
        room = np.int64(0)
        end = np.int64(0)
        while room < need and took + nb < cnt and (mrg or nb == 0):
            if nb >= MAX_BUFS:
                queue_fail(q, V_BUFS, nb)
                failed = True
                break
            head = np.int64(load_relaxed(av, A16_RING + ((last + took + nb) & mask)))
            end, total = walk_chain(q, head, True, end)
            if end < 0:
                queue_fail(q, -end, total)
                failed = True
                break
            q.buf_head[nb] = head
            q.buf_cap[nb] = total
            room += total
            nb += 1
        if failed or room < need:
            break
        tx_place(mb, q, h, plen, nb, hdr)
        rem = need
        for b in range(nb):
            w = q.buf_cap[b] if q.buf_cap[b] <= rem else rem
            rem -= w
            s = uidx & mask
            u32[1 + 2 * s] = np.uint32(q.buf_head[b])
            u32[2 + 2 * s] = np.uint32(w)
            uidx = (uidx + 1) & IDX_MASK
        took += nb
        sent += 1
        nbytes += plen
    q.st[QS_BURSTS] += 1
    if took > 0:
        old = q.st[QS_USED_IDX]
        q.st[QS_LAST_AVAIL] = (last + took) & IDX_MASK
        q.st[QS_USED_IDX] = uidx
        publish_used(q, old, uidx)
        pktmbuf_free_bulk(dom, lcore, pkts, sent)
        q.st[QS_PACKETS] += sent
        q.st[QS_BYTES] += nbytes
    q.st[QS_MISSED] += n - sent
    return sent


@kernel
def vhost_tx_burst(dom, q, lcore, pkts, n):
    """Send up to ``n`` packets of ``pkts[:n]`` into the guest's Rx buffers; returns how many
    were taken from the front (freed; 0 while the ring is down, the rest stay yours)."""
    if not queue_enter(q):
        return 0
    if q.cfg[Q_PACKED]:
        sent = tx_packed(dom, q, lcore, pkts, n)
    else:
        sent = tx_split(dom, q, lcore, pkts, n)
    queue_leave(q)
    return sent
