"""pktbuf Tx on a virtio-user port: packets handed to the back end on vring 2k + 1, zero copy.

Per burst (split ring, virtio 1.1 §2.6.13; DPDK 22.11 ``virtio_xmit_pkts``):

1. **reclaim**: every used entry since the last burst is checked -- its id must be the head of
   a chain this side made available and has not had back (``slot_mb``, private), the used
   index may not run ahead of the chains outstanding -- then that chain's descriptors go back
   on the free stack (through the private links, never the table the back end can rewrite)
   and its packet is freed (one bulk free).  A bad entry fails the queue: the control thread
   takes the link down and frees what the ring still holds.
2. **post**: each packet becomes one chain.  A single direct segment with room in its headroom
   carries the virtio-net header in front of its data (one descriptor, as DPDK's "can push");
   otherwise the chain starts with a header descriptor pointing at this descriptor's 16-byte
   header slot in the ring memory, then one descriptor per segment, each pointing straight at
   the mbuf's data.  A packet whose data is not inside the memory table (a pool created after
   the connection, an external buffer) cannot be shown to the back end: it is freed and counted
   in ``QS_ERRORS``.  A packet that does not fit the free descriptors ends the burst
   (``QS_MISSED``); it and the rest stay the caller's.
3. one release store of ``avail.idx``, and a kick unless the back end set NO_NOTIFY.

A queue on a packed ring (``Q_PACKED``) runs :func:`~.tx_packed.tx_packed` instead.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_relaxed
from ...buf.mbuf.free import pktmbuf_free, pktmbuf_free_bulk
from ...buf.mbuf.layout import F_NOT_DIRECT, NULL
from ...rawmem import addr_view
from ..common.gate import queue_enter, queue_fail, queue_leave
from ..vhost.layout import A16_RING, DESC_F_INDIRECT, DESC_F_NEXT, IDX_MASK
from .layout import (IND_MAX, Q_HDR, Q_HDRS, Q_IN_ORDER, Q_IND, Q_MASK, Q_N, Q_PACKED,
                     QS_AVAIL_IDX, QS_BURSTS,
                     QS_BYTES,
                     QS_ERRORS, QS_FREE, QS_INFLIGHT, QS_MISSED, QS_NEXT_DESC, QS_PACKETS,
                     QS_USED_SEEN,
                     V_USED_ID)
from .tx_packed import tx_packed
from .vring import (avail_view, desc_pop, desc_push, desc_view, in_table, ind_fill, publish_avail,
                    put_desc, used_pending, used_view16, used_view32)

__all__ = ["virtio_user_tx_burst", "tx_reclaim"]


@kernel
def tx_reclaim(dom, q, lcore):
    """Take back the chains the back end has used; returns how many, -1 if the queue failed."""
    cnt = used_pending(q, used_view16(q))
    if cnt <= 0:
        return cnt
    u32 = used_view32(q)
    n = q.cfg[Q_N]
    mask = q.cfg[Q_MASK]
    seen = q.st[QS_USED_SEEN]
    inorder = q.cfg[Q_IN_ORDER] != 0
    k = 0
    bad = False
    for j in range(cnt):
        s = (seen + j) & mask
        # IN_ORDER: the used index alone says how many chains are done (a device may write one
        # entry for a batch and skip the rest, virtio 1.1 §2.6.9); the heads are ours
        hd = np.int64(q.order[s]) if inorder else np.int64(load_relaxed(u32, 1 + 2 * s))
        if hd >= n or q.slot_mb[hd] < 0:
            queue_fail(q, V_USED_ID, hd)
            bad = True
            break
        q.scr_mb[k] = q.slot_mb[hd]
        q.slot_mb[hd] = -1
        k += 1
        if inorder:                  # descriptors were taken in table order: give them back
            q.st[QS_FREE] += q.chain_len[hd]
            continue
        i = hd
        for _ in range(q.chain_len[hd]):
            nx = q.dnext[i]
            desc_push(q, i)
            i = nx
    q.st[QS_USED_SEEN] = (seen + k) & IDX_MASK
    q.st[QS_INFLIGHT] -= k
    if k > 0:
        pktmbuf_free_bulk(dom, lcore, q.scr_mb, k)
    return -1 if bad else k


@kernel(inline="always")
def tx_desc(q, inorder):
    """A free descriptor: with IN_ORDER the next one in table order (a chain's descriptors
    must be consecutive then, virtio 1.1 §2.6.9), else the top of the free stack."""
    if inorder:
        i = q.st[QS_NEXT_DESC]
        q.st[QS_NEXT_DESC] = (i + 1) & q.cfg[Q_MASK]
        q.st[QS_FREE] -= 1
        return np.int64(i)
    return desc_pop(q)


@kernel
def tx_split(dom, q, lcore, pkts, n):
    if tx_reclaim(dom, q, lcore) < 0:
        return 0
    mb = dom.mb
    d64 = desc_view(q)
    av = avail_view(q)
    mask = q.cfg[Q_MASK]
    hdr = q.cfg[Q_HDR]
    hdrs = q.cfg[Q_HDRS]
    inorder = q.cfg[Q_IN_ORDER] != 0
    indq = q.cfg[Q_IND] != 0
    aidx = q.st[QS_AVAIL_IDX]
    sent = 0
    posted = 0
    nbytes = 0
    for p in range(n):
        h = np.int64(pkts[p])
        m = mb[h]
        nseg = np.int64(m.nb_segs)
        push = (nseg == 1 and (m.ol_flags & F_NOT_DIRECT) == 0 and m.refcnt == 1
                and np.int64(m.data_off) >= hdr)
        need = nseg if push else nseg + 1
        ind = indq and not push and need <= IND_MAX and need <= q.cfg[Q_N]
        if (1 if ind else need) > q.st[QS_FREE]:
            if need > q.cfg[Q_N] and not ind:   # can never fit: dropped
                pktmbuf_free(dom, lcore, h)
                q.st[QS_ERRORS] += 1
                sent += 1
                continue
            break
        ok = True
        seg = h
        while seg != NULL:
            s = mb[seg]
            if not in_table(q, np.int64(s.buf_addr) + np.int64(s.data_off), np.int64(s.data_len)):
                ok = False
                break
            seg = np.int64(s.next)
        if push:
            # the headroom in front of the data is in the same region as the data
            ok = ok and in_table(q, np.int64(m.buf_addr) + np.int64(m.data_off) - hdr, hdr)
        if not ok:
            pktmbuf_free(dom, lcore, h)
            q.st[QS_ERRORS] += 1
            sent += 1
            continue
        head = tx_desc(q, inorder)
        if push:
            a = np.int64(m.buf_addr) + np.int64(m.data_off) - hdr
            z = addr_view(a, hdr, np.uint8)
            for b in range(hdr):
                z[b] = 0
            put_desc(d64, head, a, hdr + np.int64(m.data_len), 0, 0)
        elif ind:
            tbl = q.cfg[Q_IND] + 16 * IND_MAX * head
            ind_fill(mb, h, addr_view(tbl, 2 * IND_MAX, np.uint64), hdrs + 16 * head, hdr,
                     True)
            put_desc(d64, head, tbl, 16 * need, DESC_F_INDIRECT, 0)
            need = 1
        else:
            z = addr_view(hdrs + 16 * head, 16, np.uint8)
            for b in range(16):
                z[b] = 0
            prev = head
            paddr = np.int64(0)
            plen = np.int64(0)
            seg = h
            while seg != NULL:
                s = mb[seg]
                i = tx_desc(q, inorder)
                q.dnext[prev] = i
                if prev == head:
                    put_desc(d64, head, hdrs + 16 * head, hdr, DESC_F_NEXT, i)
                else:
                    put_desc(d64, prev, paddr, plen, DESC_F_NEXT, i)
                paddr = np.int64(s.buf_addr) + np.int64(s.data_off)
                plen = np.int64(s.data_len)
                prev = i
                seg = np.int64(s.next)
            put_desc(d64, prev, paddr, plen, 0, 0)
        q.chain_len[head] = need
        q.slot_mb[head] = h
        av[A16_RING + ((aidx + posted) & mask)] = np.uint16(head)
        q.order[(aidx + posted) & mask] = head
        posted += 1
        sent += 1
        nbytes += np.int64(m.pkt_len)
    q.st[QS_BURSTS] += 1
    if posted > 0:
        old = aidx
        aidx = (aidx + posted) & IDX_MASK
        q.st[QS_AVAIL_IDX] = aidx
        q.st[QS_INFLIGHT] += posted
        publish_avail(q, av, old, aidx)
        q.st[QS_PACKETS] += posted
        q.st[QS_BYTES] += nbytes
    q.st[QS_MISSED] += n - sent
    return sent


@kernel
def virtio_user_tx_burst(dom, q, lcore, pkts, n):
    """Send up to ``n`` packets of ``pkts[:n]``; returns how many were taken from the front
    (they are the back end's until it hands them back; 0 while the link is down, the rest stay
    yours).  ``q`` is a :data:`~pktbuf.drivers.virtio_user.layout.VIRTIO_USER_QUEUE` block."""
    if not queue_enter(q):
        return 0
    if q.cfg[Q_PACKED] != 0:
        sent = tx_packed(dom, q, lcore, pkts, n)
    else:
        sent = tx_split(dom, q, lcore, pkts, n)
    queue_leave(q)
    return sent
