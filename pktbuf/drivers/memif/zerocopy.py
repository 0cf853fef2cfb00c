"""memif zero-copy (client only, as in DPDK): descriptors point at mbuf data.

The client's mempool regions are shared with the peer as regions 1.. (region 0 holds only the
rings).  Tx (:func:`zc_tx`) puts each mbuf segment's own address in a descriptor and frees the
mbuf once the peer's ``tail`` has passed its slot (:func:`zc_tx_reclaim`); Rx hands the server
empty mbufs (:func:`zc_rx_refill`) and returns them filled (:func:`zc_rx`).  The ``slots``
array remembers which mbuf owns each slot; it lives in private memory, so the peer can corrupt
packet data but never our mbuf bookkeeping.  When the link goes down, :func:`zc_release_all`
frees what the slots still hold.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_acquire, load_relaxed, store_release
from ...buf.mbuf.free import pktmbuf_free, pktmbuf_free_bulk
from ...buf.mbuf.layout import MAX_SEGS, NULL
from ...buf.mbuf.raw import pktmbuf_alloc_bulk
from .burst import FAILED, finish_packet, ring_u16, ring_u32, rx_window, tx_publish
from .layout import (D_W_FLAGS_REGION, D_W_LENGTH, D_W_OFFSET, DESC_FLAG_NEXT, H16_HEAD,
                     H16_TAIL, desc_word)
from .queue import (Q_MASK, Q_MBUF_CAP, Q_N, Q_POOL, Q_PORT, Q_ZC_REGION, QS_BURSTS, QS_BYTES,
                    QS_HEAD, QS_LAST, QS_NOMBUF, QS_PACKETS, QS_UP, queue_fail)
from .validate import IDX_MASK, V_CHAIN, V_DESC_LENGTH, V_RING_INDEX, ring_distance

__all__ = ["zc_rx", "zc_rx_refill", "zc_tx", "zc_tx_reclaim", "zc_release_all"]


# -- Rx -------------------------------------------------------------------------------------------
@kernel
def zc_rx_refill(dom, q, lcore):
    """Give the server a fresh mbuf for every free S2C slot (one bulk allocation; nothing
    when the pool cannot fill them all, counted in ``QS_NOMBUF``).  Returns the slots given."""
    r32 = ring_u32(q)
    mask = q.cfg[Q_MASK]
    head = q.st[QS_HEAD]
    target = (q.st[QS_LAST] + q.cfg[Q_N]) & IDX_MASK
    cnt = ring_distance(target, head)
    if cnt == 0:
        return 0
    if pktmbuf_alloc_bulk(dom, q.cfg[Q_POOL], lcore, q.scr_mb, cnt) < 0:
        q.st[QS_NOMBUF] += 1
        return 0
    region = q.cfg[Q_ZC_REGION]
    cap = q.cfg[Q_MBUF_CAP]
    mb = dom.mb
    for x in range(cnt):
        s = (head + x) & mask
        h = q.scr_mb[x]
        q.slots[s] = h
        m = mb[h]
        w = desc_word(s)
        r32[w + D_W_FLAGS_REGION] = region << 16
        r32[w + D_W_LENGTH] = cap
        r32[w + D_W_OFFSET] = np.int64(m.buf_iova) + np.int64(m.data_off)
    store_release(ring_u16(q), H16_HEAD, target)
    q.st[QS_HEAD] = target
    return cnt


@kernel(inline="always")
def zc_rx_gather(q, r32, last, avail, n):
    """Read the lengths of the filled slots once (each must fit the mbuf it came back in) and
    cut them into packets: ``scr_len`` per slot, ``scr_end`` per packet.  Returns the packets,
    or ``FAILED``."""
    mask = q.cfg[Q_MASK]
    nring = q.cfg[Q_N]
    cap = q.cfg[Q_MBUF_CAP]
    i = 0
    npk = 0
    while npk < n and i < avail:
        j = i
        complete = False
        while j < avail:
            w = desc_word((last + j) & mask)
            w0 = np.int64(load_relaxed(r32, w + D_W_FLAGS_REGION))
            ln = np.int64(load_relaxed(r32, w + D_W_LENGTH))
            if ln > cap:
                queue_fail(q, V_DESC_LENGTH, ln)
                return FAILED
            q.scr_len[j] = ln
            j += 1
            if (w0 & DESC_FLAG_NEXT) == 0:
                complete = True
                break
        if not complete:
            if i == 0 and j >= nring:
                queue_fail(q, V_CHAIN, j)
                return FAILED
            break
        if j - i > MAX_SEGS:
            queue_fail(q, V_CHAIN, j - i)
            return FAILED
        q.scr_end[npk] = j
        npk += 1
        i = j
    return npk


@kernel(inline="always")
def zc_rx_chain(mb, q, last, d, end):
    """Take the mbufs of slots ``d .. end-1`` (one packet) out of ``slots``, set their
    lengths and chain them.  Returns ``(head, segments, packet length)``."""
    mask = q.cfg[Q_MASK]
    h = np.int64(q.slots[(last + d) & mask])
    prev = np.int64(-1)
    nb = 0
    plen = 0
    while d < end:
        s = (last + d) & mask
        seg = np.int64(q.slots[s])
        q.slots[s] = -1
        mb[seg].data_len = q.scr_len[d]
        if prev >= 0:
            mb[prev].next = seg
        prev = seg
        nb += 1
        plen += q.scr_len[d]
        d += 1
    return h, nb, plen


@kernel
def zc_rx(dom, q, lcore, out, n):
    """Zero-copy Rx burst: the filled mbufs themselves, then a refill of the freed slots."""
    r16 = ring_u16(q)
    last, tail, avail, limit = rx_window(q, r16, True)
    if avail > limit:
        return queue_fail(q, V_RING_INDEX, tail)
    npk = zc_rx_gather(q, ring_u32(q), last, avail, n)
    if npk == FAILED:
        return 0
    q.st[QS_BURSTS] += 1
    mb = dom.mb
    port = q.cfg[Q_PORT]
    d = 0
    nbytes = 0
    for p in range(npk):
        end = q.scr_end[p]
        h, nb, plen = zc_rx_chain(mb, q, last, d, end)
        d = end
        finish_packet(mb, h, plen, nb, port)
        out[p] = h
        nbytes += plen
    q.st[QS_LAST] = (last + d) & IDX_MASK
    zc_rx_refill(dom, q, lcore)
    q.st[QS_PACKETS] += npk
    q.st[QS_BYTES] += nbytes
    return npk


# -- Tx -------------------------------------------------------------------------------------------
@kernel
def zc_tx_reclaim(dom, q, lcore):
    """Free the mbufs of every slot the peer has consumed (its ``tail`` passed it).

    Returns the number of packets freed, or 0 after a validation failure.
    """
    r16 = ring_u16(q)
    mask = q.cfg[Q_MASK]
    rc = q.st[QS_HEAD]
    tail = np.int64(load_acquire(r16, H16_TAIL))
    cnt = ring_distance(tail, rc)
    if cnt > ring_distance(q.st[QS_LAST], rc):
        return queue_fail(q, V_RING_INDEX, tail)
    k = 0
    for x in range(cnt):
        s = (rc + x) & mask
        h = q.slots[s]
        if h >= 0:
            q.scr_mb[k] = h
            k += 1
            q.slots[s] = -1
    q.st[QS_HEAD] = tail
    if k > 0:
        pktmbuf_free_bulk(dom, lcore, q.scr_mb, k)
    return k


@kernel(inline="always")
def zc_shared(mb, preg, h):
    """True if every segment of packet ``h`` is in a pool the peer can see."""
    seg = h
    while seg != NULL:
        if preg[mb[seg].pool] < 0:
            return False
        seg = np.int64(mb[seg].next)
    return True


@kernel(inline="always")
def zc_tx_put(mb, q, r32, h, cur, j):
    """Point the slots from ``j`` on at packet ``h``'s segments; the last slot owns the
    packet.  Returns ``j`` after."""
    mask = q.cfg[Q_MASK]
    preg = q.pool_region
    seg = h
    while seg != NULL:
        m = mb[seg]
        nxt = np.int64(m.next)
        s = (cur + j) & mask
        w = desc_word(s)
        r32[w + D_W_FLAGS_REGION] = ((np.int64(preg[m.pool]) << 16)
                                     | (DESC_FLAG_NEXT if nxt != NULL else 0))
        r32[w + D_W_LENGTH] = m.data_len
        r32[w + D_W_OFFSET] = np.int64(m.buf_iova) + np.int64(m.data_off)
        q.slots[s] = h if nxt == NULL else -1
        j += 1
        seg = nxt
    return j


@kernel
def zc_tx(dom, q, lcore, mbufs, n):
    """Zero-copy Tx burst: reclaim what the peer consumed, then publish descriptors pointing at
    the packets.  Stops at the first packet that does not fit or is not in a shared pool (it
    stays with the caller)."""
    r16 = ring_u16(q)
    r32 = ring_u32(q)
    cur = q.st[QS_LAST]
    zc_tx_reclaim(dom, q, lcore)
    if q.st[QS_UP] == 0:        # reclaim found a bad tail
        return 0
    free = q.cfg[Q_N] - ring_distance(cur, q.st[QS_HEAD])
    mb = dom.mb
    j = 0
    p = 0
    nbytes = 0
    while p < n:
        h = np.int64(mbufs[p])
        if np.int64(mb[h].nb_segs) > free - j or not zc_shared(mb, q.pool_region, h):
            break
        j = zc_tx_put(mb, q, r32, h, cur, j)
        nbytes += np.int64(mb[h].pkt_len)
        p += 1
    tx_publish(q, r16, True, cur, j, p, n, nbytes)
    return p


@kernel
def zc_release_all(dom, q):
    """Free every mbuf a zero-copy queue still holds in its slots (after the link is down)."""
    k = 0
    for s in range(q.slots.size):
        h = q.slots[s]
        if h >= 0:
            q.slots[s] = -1
            pktmbuf_free(dom, -1, h)
            k += 1
    return k
