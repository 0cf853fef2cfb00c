"""pktbuf Rx on a packed virtio-user ring (virtio 1.1 §2.7, §5.1.6.4; DPDK 22.11
``virtqueue_enqueue_recv_refill_packed``, ``virtio_recv_mergeable_pkts_packed``).

Buffers are posted as on the split ring (:mod:`.rx`): one device-writable descriptor per mbuf
starting ``hdr`` bytes before its data, each with a buffer id from the id stack.  Each used
descriptor is read one by one, from the used slot, while it is used (:mod:`.packed`): its id
must be a buffer the back end holds, its length within what that buffer was posted with (the
first buffer of a packet: at least the header).  With MRG_RXBUF the first buffer's
``num_buffers`` (read once) says how many consecutive used descriptors the packet spans -- at
least 1, at most the buffers the back end holds; a packet whose descriptors are not all used
yet waits for the next burst.  The packet's buffers become one mbuf chain, as on the split
ring; frames shorter than 14 bytes are freed and counted in ``QS_ERRORS``.  Refill: once
``Q_RX_BATCH`` descriptors are free, bulk allocations while the pool gives mbufs
(:func:`refill_alloc`), the first descriptor's flags last.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_relaxed
from ...buf.mbuf.free import pktmbuf_free
from ...buf.mbuf.layout import NULL
from ...buf.mbuf.raw import pktmbuf_alloc_bulk
from ...rawmem import addr_view
from ..common.gate import queue_fail
from ..vhost.layout import DESC_F_WRITE
from .layout import (REFILL_CHUNK, Q_HDR, Q_MRG, Q_N, Q_POOL, Q_PORT, Q_RX_BATCH, QS_AVAIL_IDX,
                     QS_AVAIL_WRAP,
                     QS_BURSTS, QS_BYTES, QS_ERRORS, QS_FREE, QS_INFLIGHT, QS_NOMBUF,
                     QS_PACKETS, QS_UP, QS_USED_SEEN, QS_USED_WRAP, V_NUM_BUFFERS, V_USED_ID,
                     V_USED_IDX, V_USED_LEN, V_USED_WRAP)
from .packed import (PK_BAD, PK_PENDING, pk_advance, pk_avail_flags, pk_id_pop, pk_id_push,
                     pk_publish, pk_put, pk_state, pk_word)
from .vring import desc_view

__all__ = ["rx_packed", "rx_refill_packed"]

MIN_FRAME = 14


@kernel
def refill_alloc(dom, q, lcore, free):
    """Up to ``free`` fresh mbufs into ``scr_mb``, in bulk allocations of up to
    ``REFILL_CHUNK`` until one finds the pool short; returns how many (a dry pool is counted
    in ``QS_NOMBUF``).  A large ring is filled as far as the pool allows, not all or none."""
    got = 0
    while got < free:
        c = free - got if free - got <= REFILL_CHUNK else REFILL_CHUNK
        if pktmbuf_alloc_bulk(dom, q.cfg[Q_POOL], lcore, q.scr_mb[got:], c) < 0:
            break
        got += c
    if got == 0:
        q.st[QS_NOMBUF] += 1
    return got


@kernel
def rx_refill_packed(dom, q, lcore):
    """Post a fresh mbuf on free descriptors, as many as the pool gives; returns how many."""
    free = refill_alloc(dom, q, lcore, q.st[QS_FREE])
    if free == 0:
        return 0
    mb = dom.mb
    d64 = desc_view(q)
    nr = q.cfg[Q_N]
    hdr = q.cfg[Q_HDR]
    slot, wrap = q.st[QS_AVAIL_IDX], q.st[QS_AVAIL_WRAP]
    first_slot = slot
    first_fl = pk_avail_flags(wrap) | DESC_F_WRITE
    for x in range(free):
        h = q.scr_mb[x]
        m = mb[h]
        bid = pk_id_pop(q)
        cap = np.int64(m.buf_len) - np.int64(m.data_off) + hdr
        a = np.int64(m.buf_addr) + np.int64(m.data_off) - hdr
        if x == 0:                     # not available until pk_publish
            pk_put(d64, slot, a, cap, bid, pk_avail_flags(wrap ^ 1) | DESC_F_WRITE)
        else:
            pk_put(d64, slot, a, cap, bid, pk_avail_flags(wrap) | DESC_F_WRITE)
        q.slot_mb[bid] = h
        q.slot_cap[bid] = cap
        slot, wrap = pk_advance(slot, wrap, 1, nr)
    q.st[QS_AVAIL_IDX], q.st[QS_AVAIL_WRAP] = slot, wrap
    q.st[QS_FREE] -= free
    q.st[QS_INFLIGHT] += free
    pk_publish(q, first_slot, first_fl)
    return free


@kernel(inline="always")
def take_id(q, bid, ln):
    """The mbuf of buffer ``bid`` if the back end holds it and ``ln`` fits it (the buffer is
    ours again then); ``-V_*`` otherwise."""
    if bid >= q.cfg[Q_N] or q.slot_mb[bid] < 0:
        return -np.int64(V_USED_ID)
    if ln > q.slot_cap[bid]:
        return -np.int64(V_USED_LEN)
    h = np.int64(q.slot_mb[bid])
    q.slot_mb[bid] = -1
    pk_id_push(q, bid)
    q.st[QS_FREE] += 1
    return h


@kernel
def rx_packed(dom, q, lcore, out, n):
    mb = dom.mb
    d64 = desc_view(q)
    nr = q.cfg[Q_N]
    hdr = q.cfg[Q_HDR]
    mrg = q.cfg[Q_MRG] != 0
    port = q.cfg[Q_PORT]
    held = q.st[QS_INFLIGHT]
    slot, wrap = q.st[QS_USED_SEEN], q.st[QS_USED_WRAP]
    j = 0
    got = 0
    nbytes = 0
    while got < n:
        state, fl = pk_state(d64, slot, wrap)
        if state == PK_PENDING:
            break
        if held - j == 0:
            if state != PK_BAD:
                queue_fail(q, V_USED_IDX, slot)
            break
        if state == PK_BAD:
            queue_fail(q, V_USED_WRAP, fl)
            break
        bid, ln = pk_word(d64, slot)
        nb = np.int64(1)
        if mrg:
            if bid >= nr or q.slot_mb[bid] < 0:
                queue_fail(q, V_USED_ID, bid)
                break
            m0 = mb[q.slot_mb[bid]]
            hv = addr_view(np.int64(m0.buf_addr) + np.int64(m0.data_off) - hdr + 10, 2, np.uint8)
            nb = np.int64(load_relaxed(hv, 0)) | (np.int64(load_relaxed(hv, 1)) << 8)
            if nb == 0 or nb > held - j:
                queue_fail(q, V_NUM_BUFFERS, nb)
                break
            wait = False
            bad = False
            s2, w2 = slot, wrap
            for _ in range(1, nb):            # the rest of the packet must be used already
                s2, w2 = pk_advance(s2, w2, 1, nr)
                st2, fl2 = pk_state(d64, s2, w2)
                if st2 == PK_PENDING:
                    wait = True
                    break
                if st2 == PK_BAD:
                    queue_fail(q, V_USED_WRAP, fl2)
                    bad = True
                    break
            if wait or bad:
                break
        h = take_id(q, bid, ln)
        if h < 0:
            queue_fail(q, -h, bid if h == -V_USED_ID else ln)
            break
        j += 1
        slot, wrap = pk_advance(slot, wrap, 1, nr)
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
            bid2, ln2 = pk_word(d64, slot)
            h2 = take_id(q, bid2, ln2)
            if h2 < 0:
                queue_fail(q, -h2, bid2 if h2 == -V_USED_ID else ln2)
                bad = True
                break
            j += 1
            slot, wrap = pk_advance(slot, wrap, 1, nr)
            m2 = mb[h2]
            m2.data_off = np.int64(m2.data_off) - hdr
            m2.data_len = ln2
            mb[prev].next = h2
            prev = h2
            total += ln2
            m.nb_segs = k + 1
        mb[prev].next = NULL
        if bad:
            pktmbuf_free(dom, lcore, h)
            break
        m.nb_segs = nb
        m.pkt_len = total
        m.port = port
        if total < MIN_FRAME:
            pktmbuf_free(dom, lcore, h)
            q.st[QS_ERRORS] += 1
            continue
        out[got] = h
        got += 1
        nbytes += total
    q.st[QS_USED_SEEN], q.st[QS_USED_WRAP] = slot, wrap
    q.st[QS_INFLIGHT] -= j
    q.st[QS_BURSTS] += 1
    q.st[QS_PACKETS] += got
    q.st[QS_BYTES] += nbytes
    if q.st[QS_FREE] >= q.cfg[Q_RX_BATCH] and q.st[QS_UP] != 0:
        rx_refill_packed(dom, q, lcore)
    return got
