"""pktbuf Rx on a virtio-user port: frames the back end wrote into mbufs posted on vring 2k.

Buffers are posted as DPDK's virtio driver posts them (DPDK 22.11 ``virtio_rxtx.c``): one
device-writable descriptor per mbuf, starting ``hdr`` bytes before the mbuf's data so that the
virtio-net header lands in the headroom, ``buf_len - data_off + hdr`` bytes long.  Frames are
written straight into the mbufs: nothing is copied.

Per burst (virtio 1.1 §2.6.14, §5.1.6.4):

1. **harvest** the used entries: each id must name a descriptor this side posted and has not
   had back, each length must lie within what that buffer was posted with and (for a packet's
   first buffer) hold the header.  With MRG_RXBUF the header's ``num_buffers`` (read once from
   the mbuf's headroom) says how many used entries the packet spans -- at least 1, at most the
   buffers the back end holds; a packet whose entries are not all published yet waits for the
   next burst.  Its buffers become one mbuf chain: the first mbuf's data starts after the
   header, the others' ``hdr`` bytes earlier (where the back end wrote).  Frames shorter than
   an Ethernet header (14 bytes) are freed and counted in ``QS_ERRORS``, as DPDK's driver does.
2. **refill** once ``Q_RX_BATCH`` descriptors are free: bulk allocations of up to
   ``REFILL_CHUNK`` mbufs while the pool gives them (a ring larger than the pool is filled as
   far as it goes), one avail publish (a pool that gives none is counted in ``QS_NOMBUF`` and
   tried again next burst).

A used entry that breaks the rules fails the queue (the mbufs of the packet being built are
freed); the packets completed before it are returned, and the control thread takes the link
down and frees what the ring still holds.  A queue on a packed ring (``Q_PACKED``) runs
:mod:`.rx_packed` instead.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_relaxed
from ...buf.mbuf.free import pktmbuf_free
from ...buf.mbuf.layout import NULL
from ...rawmem import addr_view
from ..common.gate import queue_enter, queue_fail, queue_leave
from ..vhost.layout import A16_RING, DESC_F_WRITE, IDX_MASK
from .layout import (Q_HDR, Q_MASK, Q_MRG, Q_N, Q_PACKED, Q_PORT, Q_RX_BATCH,
                     QS_AVAIL_IDX, QS_UP, QS_BURSTS, QS_BYTES, QS_ERRORS, QS_FREE, QS_INFLIGHT,
                     QS_PACKETS,
                     QS_USED_SEEN, V_NUM_BUFFERS, V_USED_ID, V_USED_LEN)
from .rx_packed import refill_alloc, rx_packed, rx_refill_packed
from .vring import (avail_view, desc_pop, desc_push, desc_view, publish_avail, put_desc,
                    used_pending, used_view16, used_view32)

__all__ = ["virtio_user_rx_burst", "rx_refill"]

MIN_FRAME = 14


@kernel
def rx_refill(dom, q, lcore):
    """Post a fresh mbuf on free descriptors, as many as the pool gives (in bulk allocations
    of up to ``REFILL_CHUNK``); returns how many."""
    if q.cfg[Q_PACKED] != 0:
        return rx_refill_packed(dom, q, lcore)
    return rx_refill_split(dom, q, lcore)


@kernel
def rx_refill_split(dom, q, lcore):
    free = refill_alloc(dom, q, lcore, q.st[QS_FREE])
    if free == 0:
        return 0
    mb = dom.mb
    d64 = desc_view(q)
    av = avail_view(q)
    mask = q.cfg[Q_MASK]
    hdr = q.cfg[Q_HDR]
    old = q.st[QS_AVAIL_IDX]
    aidx = old
    for x in range(free):
        h = q.scr_mb[x]
        m = mb[h]
        i = desc_pop(q)
        cap = np.int64(m.buf_len) - np.int64(m.data_off) + hdr
        put_desc(d64, i, np.int64(m.buf_addr) + np.int64(m.data_off) - hdr, cap, DESC_F_WRITE, 0)
        q.slot_mb[i] = h
        q.slot_cap[i] = cap
        av[A16_RING + ((aidx + x) & mask)] = np.uint16(i)
    aidx = (aidx + free) & IDX_MASK
    q.st[QS_AVAIL_IDX] = aidx
    q.st[QS_INFLIGHT] += free
    publish_avail(q, av, old, aidx)
    return free


@kernel(inline="always")
def take_buf(q, u32, s):
    """``(id, len, mbuf)`` of used slot ``s`` if the id is a buffer the back end holds and the
    length fits it; the buffer is ours again then.  ``(-V_*, value, -1)`` otherwise."""
    hd = np.int64(load_relaxed(u32, 1 + 2 * s))
    ln = np.int64(load_relaxed(u32, 2 + 2 * s))
    if hd >= q.cfg[Q_N] or q.slot_mb[hd] < 0:
        return -np.int64(V_USED_ID), hd, np.int64(-1)
    if ln > q.slot_cap[hd]:
        return -np.int64(V_USED_LEN), ln, np.int64(-1)
    h = np.int64(q.slot_mb[hd])
    q.slot_mb[hd] = -1
    desc_push(q, hd)
    return hd, ln, h


@kernel
def rx_split(dom, q, lcore, out, n):
    cnt = used_pending(q, used_view16(q))
    if cnt < 0:
        return 0
    mb = dom.mb
    u32 = used_view32(q)
    mask = q.cfg[Q_MASK]
    hdr = q.cfg[Q_HDR]
    mrg = q.cfg[Q_MRG] != 0
    port = q.cfg[Q_PORT]
    seen = q.st[QS_USED_SEEN]
    j = 0
    got = 0
    nbytes = 0
    while got < n and j < cnt:
        s = (seen + j) & mask
        hd = np.int64(load_relaxed(u32, 1 + 2 * s))
        nb = np.int64(1)
        if mrg:
            if hd >= q.cfg[Q_N] or q.slot_mb[hd] < 0:
                queue_fail(q, V_USED_ID, hd)
                break
            m0 = mb[q.slot_mb[hd]]
            hv = addr_view(np.int64(m0.buf_addr) + np.int64(m0.data_off) - hdr + 10, 2, np.uint8)
            nb = np.int64(load_relaxed(hv, 0)) | (np.int64(load_relaxed(hv, 1)) << 8)
            if nb == 0 or nb > q.st[QS_INFLIGHT] - j:
                queue_fail(q, V_NUM_BUFFERS, nb)
                break
            if nb > cnt - j:
                break                      # the rest of the packet is not published yet
        hd, ln, h = take_buf(q, u32, s)
        if hd < 0:
            queue_fail(q, -hd, ln)
            break
        j += 1
        if ln < hdr:
            pktmbuf_free(dom, lcore, h)
            queue_fail(q, V_USED_LEN, ln)
            break
        m = mb[h]
        m.data_len = ln - hdr
        total = ln - hdr
        prev = h
        bad = False
        for k in range(1, nb):
            hd2, ln2, h2 = take_buf(q, u32, (seen + j) & mask)
            if hd2 < 0:
                queue_fail(q, -hd2, ln2)
                bad = True
                break
            j += 1
            m2 = mb[h2]
            m2.data_off = np.int64(m2.data_off) - hdr
            m2.data_len = ln2
            mb[prev].next = h2
            prev = h2
            total += ln2
            m.nb_segs = k + 1
        if bad:
            pktmbuf_free(dom, lcore, h)
            break
        m.nb_segs = nb
        m.pkt_len = total
        m.port = port
        mb[prev].next = NULL
        if total < MIN_FRAME:
            pktmbuf_free(dom, lcore, h)
            q.st[QS_ERRORS] += 1
            continue
        out[got] = h
        got += 1
        nbytes += total
    q.st[QS_USED_SEEN] = (seen + j) & IDX_MASK
    q.st[QS_INFLIGHT] -= j
    q.st[QS_BURSTS] += 1
    q.st[QS_PACKETS] += got
    q.st[QS_BYTES] += nbytes
    if q.st[QS_FREE] >= q.cfg[Q_RX_BATCH] and q.st[QS_UP] != 0:
        rx_refill_split(dom, q, lcore)
    return got


@kernel
def virtio_user_rx_burst(dom, q, lcore, out, n):
    """Receive up to ``n`` frames into ``out[:n]``; returns how many (0 while the link is
    down).  ``q`` is a :data:`~pktbuf.drivers.virtio_user.layout.VIRTIO_USER_QUEUE` block."""
    if not queue_enter(q):
        return 0
    if q.cfg[Q_PACKED] != 0:
        got = rx_packed(dom, q, lcore, out, n)
    else:
        got = rx_split(dom, q, lcore, out, n)
    queue_leave(q)
    return got
