"""pktbuf Tx on a packed virtio-user ring (virtio 1.1 §2.7; DPDK 22.11
``virtqueue_enqueue_xmit_packed``): the same chains as the split ring, written at consecutive
ring slots.

1. **reclaim**: from the used slot, while the descriptor there is used (:mod:`.packed`): its
   buffer id must be a chain this side made available and has not had back (``slot_mb``); the
   chain's packet is freed (one bulk free at the end), its id goes back on the id stack and the
   used slot moves on by the chain's descriptor count (``chain_len``, private).  With IN_ORDER a
   chain's id is the slot of its first descriptor and one used descriptor may stand for a batch
   (virtio 1.1 §2.7, "In-order use of descriptors"): every outstanding chain from the oldest
   through the one named is done.
2. **post**: as for the split ring (:mod:`.tx`): the header pushed into the headroom of a single
   direct segment, else a header descriptor (the id's 16-byte header slot) and one descriptor
   per segment, NEXT on all but the last, the id in every one.  A packet outside the memory
   table is freed and counted in ``QS_ERRORS``; one that does not fit the free descriptors ends
   the burst (``QS_MISSED``).
3. the first descriptor's flags with one release store, a kick unless the device area says
   DISABLE.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...buf.mbuf.free import pktmbuf_free, pktmbuf_free_bulk
from ...buf.mbuf.layout import F_NOT_DIRECT, NULL
from ...rawmem import addr_view
from ..common.gate import queue_fail
from ..vhost.layout import DESC_F_INDIRECT, DESC_F_NEXT
from .layout import (IND_MAX, Q_HDR, Q_HDRS, Q_IN_ORDER, Q_IND, Q_N, QS_AVAIL_IDX, QS_AVAIL_WRAP,
                     QS_BURSTS,
                     QS_BYTES, QS_ERRORS, QS_FREE, QS_INFLIGHT, QS_MISSED, QS_PACKETS,
                     QS_USED_SEEN, QS_USED_WRAP, V_USED_ID, V_USED_IDX, V_USED_WRAP)
from .packed import (PK_BAD, PK_PENDING, pk_advance, pk_avail_flags, pk_id_pop, pk_id_push,
                     pk_publish, pk_put, pk_state, pk_word)
from .vring import desc_view, in_table, ind_fill

__all__ = ["tx_packed", "tx_reclaim_packed"]


@kernel(inline="always")
def give_back(q, bid, k):
    """Chain ``bid`` is done: its packet to ``scr_mb[k]``, its descriptors free again."""
    q.scr_mb[k] = q.slot_mb[bid]
    q.slot_mb[bid] = -1
    q.st[QS_FREE] += q.chain_len[bid]
    q.st[QS_INFLIGHT] -= 1
    return np.int64(q.chain_len[bid])


@kernel
def tx_reclaim_packed(dom, q, lcore):
    """Take back the chains the back end has used; returns how many, -1 if the queue failed."""
    n = q.cfg[Q_N]
    d64 = desc_view(q)
    inorder = q.cfg[Q_IN_ORDER] != 0
    slot, wrap = q.st[QS_USED_SEEN], q.st[QS_USED_WRAP]
    k = 0
    bad = False
    while True:
        state, fl = pk_state(d64, slot, wrap)
        if state == PK_PENDING:
            break
        if q.st[QS_INFLIGHT] == 0:
            if state != PK_BAD:
                queue_fail(q, V_USED_IDX, slot)
                bad = True
            break
        if state == PK_BAD:
            queue_fail(q, V_USED_WRAP, fl)
            bad = True
            break
        bid, _ln = pk_word(d64, slot)
        if bid >= n or q.slot_mb[bid] < 0:
            queue_fail(q, V_USED_ID, bid)
            bad = True
            break
        if inorder:
            # the oldest chain starts at the used slot; free chains up to the one named
            for _ in range(q.st[QS_INFLIGHT]):
                hd = slot
                nd = give_back(q, hd, k)
                k += 1
                slot, wrap = pk_advance(slot, wrap, nd, n)
                if hd == bid:
                    break
        else:
            nd = give_back(q, bid, k)
            k += 1
            pk_id_push(q, bid)
            slot, wrap = pk_advance(slot, wrap, nd, n)
    q.st[QS_USED_SEEN], q.st[QS_USED_WRAP] = slot, wrap
    if k > 0:
        pktmbuf_free_bulk(dom, lcore, q.scr_mb, k)
    return -1 if bad else k


@kernel
def tx_packed(dom, q, lcore, pkts, n):
    if tx_reclaim_packed(dom, q, lcore) < 0:
        return 0
    mb = dom.mb
    d64 = desc_view(q)
    nr = q.cfg[Q_N]
    hdr = q.cfg[Q_HDR]
    hdrs = q.cfg[Q_HDRS]
    inorder = q.cfg[Q_IN_ORDER] != 0
    indq = q.cfg[Q_IND] != 0
    slot, wrap = q.st[QS_AVAIL_IDX], q.st[QS_AVAIL_WRAP]
    first_slot = np.int64(-1)
    first_fl = np.int64(0)
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
        ind = indq and not push and need <= IND_MAX and need <= nr
        if (1 if ind else need) > q.st[QS_FREE]:
            if need > nr and not ind:      # can never fit: dropped
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
            ok = ok and in_table(q, np.int64(m.buf_addr) + np.int64(m.data_off) - hdr, hdr)
        if not ok:
            pktmbuf_free(dom, lcore, h)
            q.st[QS_ERRORS] += 1
            sent += 1
            continue
        bid = slot if inorder else pk_id_pop(q)
        extra = 0
        if ind:                            # one descriptor: the table of the whole chain
            tbl = q.cfg[Q_IND] + 16 * IND_MAX * bid
            ind_fill(mb, h, addr_view(tbl, 2 * IND_MAX, np.uint64), hdrs + 16 * bid, hdr,
                     False)
            ind_len = 16 * need
            need = 1
            extra = DESC_F_INDIRECT
        for d in range(need):
            if ind:
                a = tbl
                ln = ind_len
                seg = NULL
            elif push:
                a = np.int64(m.buf_addr) + np.int64(m.data_off) - hdr
                z = addr_view(a, hdr, np.uint8)
                for b in range(hdr):
                    z[b] = 0
                ln = hdr + np.int64(m.data_len)
                seg = NULL
            elif d == 0:
                a = hdrs + 16 * bid
                z = addr_view(a, 16, np.uint8)
                for b in range(16):
                    z[b] = 0
                ln = hdr
                seg = h
            else:
                s = mb[seg]
                a = np.int64(s.buf_addr) + np.int64(s.data_off)
                ln = np.int64(s.data_len)
                seg = np.int64(s.next)
            fl = pk_avail_flags(wrap) | (DESC_F_NEXT if d < need - 1 else 0) | extra
            if first_slot < 0:             # published last, by pk_publish
                first_slot, first_fl = slot, fl
                pk_put(d64, slot, a, ln, bid, pk_avail_flags(wrap ^ 1))
            else:
                pk_put(d64, slot, a, ln, bid, fl)
            slot, wrap = pk_advance(slot, wrap, 1, nr)
        q.st[QS_FREE] -= need
        q.chain_len[bid] = need
        q.slot_mb[bid] = h
        posted += 1
        sent += 1
        nbytes += np.int64(m.pkt_len)
    q.st[QS_BURSTS] += 1
    if posted > 0:
        q.st[QS_AVAIL_IDX], q.st[QS_AVAIL_WRAP] = slot, wrap
        q.st[QS_INFLIGHT] += posted
        pk_publish(q, first_slot, first_fl)
        q.st[QS_PACKETS] += posted
        q.st[QS_BYTES] += nbytes
    q.st[QS_MISSED] += n - sent
    return sent
