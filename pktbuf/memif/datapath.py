"""memif data path: ``rx_burst`` / ``tx_burst`` kernels, copy and zero-copy.

Call them from your own ``@njit`` code with DPDK's semantics::

    n = rx_burst(dom, q, lcore, out, 32)   # n packets (mbuf handles) in out[:n]
    k = tx_burst(dom, q, lcore, pkts, n)   # pkts[:k] sent and now owned by the queue;
                                           # pkts[k:n] are still yours

``dom`` is the :class:`~pktbuf.mempool.layout.DomainState`, ``q`` the queue's
:data:`~pktbuf.memif.queue.MemifQueue`, ``lcore`` the lcore whose mempool cache the burst
uses.  Both return 0 while the link is down.  Neither ever raises; a peer that breaks the
protocol takes the queue down (the facade then disconnects with a reason).

Copy mode.  A burst works in two passes:

1. *gather*: read each descriptor the peer published **once** (relaxed atomic loads, so the
   compiler cannot re-read shared memory), validate it (:mod:`~pktbuf.memif.validate`) and keep
   the checked buffer address and length in the queue's private scratch arrays; count packets
   (complete NEXT chains only) and the mbufs or slots they need;
2. *copy*: allocate the mbufs (Rx), copy, publish the index once, free what was sent (Tx).

The copy pass comes in three loops, compiled separately from one template
(:func:`_make_rx` / :func:`_make_tx`) and chosen once per queue from the size relation between
the memif buffer size ``B`` and the mbuf data room ``C`` (buffer length minus headroom):

=========== ================================ ==================================
relation    Rx loop                           Tx loop
=========== ================================ ==================================
``B == C``  ``one``: 1 descriptor -> 1 mbuf  ``one``: 1 segment -> 1 slot
``B <  C``  ``one``                           ``split``: segment -> ceil(len/B) slots
``B >  C``  ``split``: desc -> ceil(len/C)    ``one``
general     packs bytes: ``min(src, dst)`` per copy, any sizes, any chain shapes
=========== ================================ ==================================

The ``one`` loops copy exactly the descriptor's (segment's) length with no size comparison;
the relation guarantees it fits.  The fast loops allocate all Rx mbufs of a burst with one
``pktmbuf_alloc_bulk`` and free all sent mbufs with one run-grouped ``pktmbuf_free_bulk``; the
general loop keeps DPDK 22.11's shape -- an mbuf allocated when the bytes need one, a free per
sent packet -- so forcing it gives the A/B baseline of the 2022 fast-path idea (loop shape,
bulk alloc, bulk free) in one switch.  A server cannot know the buffer sizes its client uses (they
are not negotiated), so it checks each descriptor against the size it assumed -- in the gather
pass, where the check is needed anyway -- and a burst with a larger descriptor falls back to
the general loop (counted in ``st[QS_FALLBACK]``).  ``Q_PATH = P_GENERAL`` forces the general
loop (tests, benchmarks).

Zero-copy (client only, as in DPDK): the client's mempool regions are shared with the peer as
regions 1..; Tx puts each mbuf segment's own address in the descriptor and frees the mbuf once
the peer's ``tail`` has passed it; Rx hands the peer empty mbufs (refill) and returns them
filled.  The ``slots`` array remembers which mbuf owns each slot; it lives in private memory,
so the peer can corrupt data but never our mbuf bookkeeping.

DPDK 22.11 quirk 1 (stale NEXT flags on its Tx): a receiver zeroes a descriptor's flags when
it returns or refills the slot.
"""
from __future__ import annotations

import numpy as np

from .._jit import kernel
from ..atomics import load_acquire, load_relaxed, store_release
from ..mbuf.free import pktmbuf_free, pktmbuf_free_bulk
from ..mbuf.layout import NULL
from ..mbuf.raw import pktmbuf_alloc, pktmbuf_alloc_bulk
from ..rawmem import addr_u8, memcpy
from ._sys import eventfd_signal
from .layout import (D32_BASE, DESC_FLAG_NEXT, DESC_SIZE, H16_FLAGS, H16_HEAD, H16_TAIL,
                     RING_FLAG_MASK_INT, RING_HDR_SIZE)
from .queue import (K_CLIENT_RX, K_CLIENT_RX_ZC, K_CLIENT_TX, K_CLIENT_TX_ZC, K_SERVER_RX,
                    K_SERVER_TX, P_EQ, P_GT, P_LT, Q_BSIZE, Q_BUF_BASE, Q_EVENTFD,
                    Q_KIND, Q_MASK, Q_MBUF_CAP, Q_N, Q_PATH, Q_POOL, Q_PORT, Q_RING,
                    Q_ZC_REGION, QS_BURSTS, QS_BYTES, QS_DROPS, QS_FALLBACK, QS_HEAD, QS_LAST,
                    QS_NOMBUF, QS_PACKETS, QS_KICKS, QS_UP, queue_enter, queue_fail, queue_leave)
from .validate import (V_CHAIN, V_DESC_LENGTH, V_RING_INDEX, desc_address, ring_distance)

__all__ = ["rx_burst", "tx_burst", "rx_refill", "zc_reclaim", "zc_release_all", "link_up"]

# loop shapes
L_ONE = 1
L_SPLIT = 2
L_GENERAL = 3

FALLBACK = -1000        # internal: the fast loop cannot take this burst
MAX_DESC_LEN = 0xFFFF   # mbuf data_len is 16 bits; we accept no longer descriptor
MAX_SEGS = 0xFFFF
D16_BASE = RING_HDR_SIZE // 2


SHORT = 64              # copies up to this size go through one fixed-size (inlined) copy


@kernel(inline="always")
def _copy(dst, src, n, short_ok):
    """Copy ``n`` bytes.  If ``short_ok`` (both buffers have at least SHORT bytes from their
    start) and ``n <= SHORT``, copy a fixed SHORT bytes: LLVM then emits a few vector moves
    in place of a call to libc's memcpy.  The extra bytes stay inside both buffers (beyond
    ``n`` at the destination, where nothing reads them)."""
    if short_ok and n <= SHORT:
        memcpy(dst, src, SHORT)
    else:
        memcpy(dst, src, n)


@kernel(inline="always")
def _ring16(q):
    return addr_u8(q.cfg[Q_RING], RING_HDR_SIZE + DESC_SIZE * q.cfg[Q_N]).view(np.uint16)


@kernel(inline="always")
def _kick(q, r16):
    """Signal the peer's eventfd if it asked for interrupts (its MASK_INT is clear)."""
    if q.cfg[Q_EVENTFD] >= 0 and (load_relaxed(r16, H16_FLAGS) & RING_FLAG_MASK_INT) == 0:
        eventfd_signal(q.cfg[Q_EVENTFD])
        q.st[QS_KICKS] += 1


@kernel
def rx_refill(q):
    """Client copy Rx: hand every consumed S2C slot back to the server (head = last + N).

    Rewrites each returned descriptor completely (flags 0, region 0, our offset, length = our
    buffer size), so nothing a peer left in it survives.  Done on every Rx poll, as DPDK does.
    """
    r16 = _ring16(q)
    r32 = r16.view(np.uint32)
    n = q.cfg[Q_N]
    mask = q.cfg[Q_MASK]
    bsize = q.cfg[Q_BSIZE]
    off0 = q.cfg[Q_BUF_BASE] - np.int64(q.regions[0, 0])
    head = q.st[QS_HEAD]
    target = (q.st[QS_LAST] + n) & 0xFFFF
    cnt = ring_distance(target, head)
    for x in range(cnt):
        s = (head + x) & mask
        w = D32_BASE + 4 * s
        r32[w] = 0
        r32[w + 1] = bsize
        r32[w + 2] = off0 + s * bsize
    if cnt > 0:
        store_release(r16, H16_HEAD, target)
        q.st[QS_HEAD] = target


@kernel
def _rx_zc_refill(dom, q, lcore):
    """Client zero-copy Rx: give the server fresh mbufs for every free S2C slot."""
    r16 = _ring16(q)
    r32 = r16.view(np.uint32)
    n = q.cfg[Q_N]
    mask = q.cfg[Q_MASK]
    head = q.st[QS_HEAD]
    target = (q.st[QS_LAST] + n) & 0xFFFF
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
        w = D32_BASE + 4 * s
        r32[w] = region << 16
        r32[w + 1] = cap
        r32[w + 2] = np.int64(m.buf_iova) + np.int64(m.data_off)
    store_release(r16, H16_HEAD, target)
    q.st[QS_HEAD] = target
    return cnt


@kernel(inline="always")
def _rx_window(q, r16, client):
    """(our cursor, slots the peer has filled, the most it may have filled) of an Rx ring.

    Client: the server's ``tail`` may be at most our refilled ``head`` ahead of our cursor;
    server: the client's ``head`` at most one ring ahead.  The caller fails the queue when
    ``avail > limit``."""
    last = q.st[QS_LAST]
    if client:
        peer = np.int64(load_acquire(r16, H16_TAIL))
        limit = ring_distance(q.st[QS_HEAD], last)
    else:
        peer = np.int64(load_acquire(r16, H16_HEAD))
        limit = q.cfg[Q_N]
    return last, peer, ring_distance(peer, last), limit


@kernel(inline="always")
def _finish_packet(mb, h, plen, nb, port):
    m = mb[h]
    m.pkt_len = plen
    m.nb_segs = nb
    m.port = port


@kernel(inline="always")
def _tx_publish(q, r16, head_side, cur, j, p, n, nbytes):
    """Account a Tx burst of ``p`` packets in ``j`` slots and publish them (one release store
    of our index, then the eventfd if the receiver asked for it).  Returns the new cursor."""
    st = q.st
    st[QS_BURSTS] += 1
    if p < n:
        st[QS_DROPS] += n - p
    if p == 0:
        return cur
    cur = (cur + j) & 0xFFFF
    st[QS_LAST] = cur
    store_release(r16, H16_HEAD if head_side else H16_TAIL, cur)
    _kick(q, r16)
    st[QS_PACKETS] += p
    st[QS_BYTES] += nbytes
    return cur


def _make_rx(loop, name):
    """Compile one copy-mode Rx kernel whose copy loop has the shape ``loop`` (L_*)."""
    LOOP = loop

    def rx(dom, q, lcore, out, n):
        cfg = q.cfg
        st = q.st
        r16 = _ring16(q)
        r32 = r16.view(np.uint32)
        nring = cfg[Q_N]
        mask = cfg[Q_MASK]
        client = cfg[Q_KIND] == K_CLIENT_RX
        last, peer, avail, limit = _rx_window(q, r16, client)
        if avail > limit:
            return queue_fail(q, V_RING_INDEX, peer)
        cap = cfg[Q_MBUF_CAP]
        bsize = cfg[Q_BSIZE]
        base = cfg[Q_BUF_BASE]
        scr_a = q.scr_addr
        scr_l = q.scr_len
        scr_e = q.scr_end
        maxseg = q.scr_mb.size
        short_ok = cap >= SHORT and (not client or bsize >= SHORT)
        # ---- gather: validate each descriptor once, count complete packets and mbufs
        i = 0
        npk = 0
        nseg = 0
        while npk < n and i < avail:
            j = i
            segs = 0
            plen = 0
            complete = False
            while j < avail:
                s = (last + j) & mask
                w = D32_BASE + 4 * s
                w0 = np.int64(load_relaxed(r32, w))
                ln = np.int64(load_relaxed(r32, w + 1))
                if client:
                    if ln > bsize:
                        return queue_fail(q, V_DESC_LENGTH, ln)
                    a = base + s * bsize
                else:
                    if ln > MAX_DESC_LEN:
                        return queue_fail(q, V_DESC_LENGTH, ln)
                    a = desc_address(q, w0 >> 16, np.int64(load_relaxed(r32, w + 2)), ln)
                    if a < 0:
                        return queue_fail(q, -a, s)
                    if a + SHORT > np.int64(q.regions[w0 >> 16, 0] + q.regions[w0 >> 16, 1]):
                        short_ok = False
                scr_a[j] = a
                scr_l[j] = ln
                if LOOP == L_ONE:
                    if ln > cap:
                        return FALLBACK
                    segs += 1
                elif LOOP == L_SPLIT:
                    r = ln
                    segs += 1
                    while r > cap:
                        r -= cap
                        segs += 1
                plen += ln
                j += 1
                if (w0 & DESC_FLAG_NEXT) == 0:
                    complete = True
                    break
            if not complete:
                if i == 0 and j >= limit and limit == nring:
                    return queue_fail(q, V_CHAIN, j)   # a chain that can never end
                break                                  # wait for the rest of the chain
            if LOOP == L_GENERAL:
                segs = 1 if plen == 0 else (plen + cap - 1) // cap
            if segs > MAX_SEGS or nseg + segs > maxseg:
                if npk == 0:
                    return queue_fail(q, V_CHAIN, segs)
                break
            scr_e[npk] = j
            npk += 1
            nseg += segs
            i = j
        st[QS_BURSTS] += 1
        if npk == 0:
            if client:
                rx_refill(q)
            return 0
        # ---- fast loops: one bulk allocation for the whole burst
        pid = cfg[Q_POOL]
        if LOOP != L_GENERAL and pktmbuf_alloc_bulk(dom, pid, lcore, q.scr_mb, nseg) < 0:
            st[QS_NOMBUF] += 1
            if client:
                rx_refill(q)
            return 0
        mb = dom.mb
        mbs = q.scr_mb
        port = cfg[Q_PORT]
        k = 0
        d = 0
        nbytes = 0
        for p in range(npk):
            end = scr_e[p]
            h = mbs[k]
            prev = np.int64(-1)
            nb = 0
            plen = 0
            if LOOP == L_ONE:
                while d < end:
                    seg = mbs[k]
                    k += 1
                    m = mb[seg]
                    ln = scr_l[d]
                    _copy(np.int64(m.buf_addr) + np.int64(m.data_off), scr_a[d], ln, short_ok)
                    m.data_len = ln
                    if prev >= 0:
                        mb[prev].next = seg
                    prev = seg
                    nb += 1
                    plen += ln
                    d += 1
            elif LOOP == L_SPLIT:
                while d < end:
                    src = scr_a[d]
                    rem = scr_l[d]
                    while True:
                        seg = mbs[k]
                        k += 1
                        m = mb[seg]
                        c = rem if rem <= cap else cap
                        memcpy(np.int64(m.buf_addr) + np.int64(m.data_off), src, c)
                        m.data_len = c
                        if prev >= 0:
                            mb[prev].next = seg
                        prev = seg
                        nb += 1
                        src += c
                        rem -= c
                        if rem == 0:
                            break
                    plen += scr_l[d]
                    d += 1
            else:
                # DPDK 22.11's loop shape: one mbuf at a time, as the bytes need them
                h = pktmbuf_alloc(dom, pid, lcore)
                if h < 0:
                    st[QS_NOMBUF] += 1
                    npk = p
                    break
                seg = h
                m = mb[seg]
                dst = np.int64(m.buf_addr) + np.int64(m.data_off)
                room = cap
                used = np.int64(0)
                nb = 1
                prev = seg
                nomem = False
                while d < end and not nomem:
                    src = scr_a[d]
                    rem = scr_l[d]
                    plen += rem
                    while rem > 0:
                        if room == 0:
                            mb[prev].data_len = used
                            seg = pktmbuf_alloc(dom, pid, lcore)
                            if seg < 0:
                                nomem = True
                                break
                            mb[prev].next = seg
                            prev = seg
                            m = mb[seg]
                            dst = np.int64(m.buf_addr) + np.int64(m.data_off)
                            room = cap
                            used = 0
                            nb += 1
                        c = rem if rem <= room else room
                        memcpy(dst, src, c)
                        dst += c
                        src += c
                        rem -= c
                        room -= c
                        used += c
                    d += 1
                if nomem:       # give back this packet's mbufs; it stays in the ring
                    mb[h].nb_segs = nb
                    pktmbuf_free(dom, lcore, h)
                    st[QS_NOMBUF] += 1
                    npk = p
                    break
                mb[prev].data_len = used
            _finish_packet(mb, h, plen, nb, port)
            out[p] = h
            nbytes += plen
        # ---- return the slots, publish once
        if npk == 0:
            if client:
                rx_refill(q)
            return 0
        i = scr_e[npk - 1]
        if not client:
            # clear flags (DPDK 22.11 quirk 1) before handing the slots back; only where set,
            # so the common single-buffer packet costs no write to the sender's cache line
            for x in range(i):
                fi = D16_BASE + 8 * ((last + x) & mask)
                if r16[fi] != 0:
                    r16[fi] = 0
        last = (last + i) & 0xFFFF
        st[QS_LAST] = last
        if client:
            rx_refill(q)
        else:
            store_release(r16, H16_TAIL, last)
        st[QS_PACKETS] += npk
        st[QS_BYTES] += nbytes
        return npk

    rx.__name__ = rx.__qualname__ = f"memif_rx_copy_{name}"
    return kernel(rx)


@kernel(inline="always")
def _tx_slot(q, r32, client, cur, j, got):
    """Buffer address and capacity of the ``j``-th free slot of this Tx burst.

    Client: computed from the slot (our own region).  Server: taken from the client's
    descriptor -- read once, validated, and remembered in scratch (``got`` slots so far), so a
    rollback can restore the capacity the client wrote there.  Returns ``(addr, cap, got)``;
    ``addr < 0`` is ``-V_*``.
    """
    s = (cur + j) & q.cfg[Q_MASK]
    if client:
        bsize = q.cfg[Q_BSIZE]
        return q.cfg[Q_BUF_BASE] + s * bsize, bsize, got
    if j < got:
        return q.scr_addr[j], q.scr_len[j], got
    w = D32_BASE + 4 * s
    w0 = np.int64(load_relaxed(r32, w))
    cap = np.int64(load_relaxed(r32, w + 1))
    a = desc_address(q, w0 >> 16, np.int64(load_relaxed(r32, w + 2)), cap)
    q.scr_addr[j] = a
    q.scr_len[j] = cap
    return a, cap, got + 1


@kernel(inline="always")
def _tx_unwind(q, r32, cur, frm, got):
    """Server: put the client's capacities back into slots ``frm .. got`` we did not publish."""
    mask = q.cfg[Q_MASK]
    for x in range(frm, got):
        r32[D32_BASE + 4 * ((cur + x) & mask) + 1] = q.scr_len[x]


def _make_tx(loop, name):
    """Compile one copy-mode Tx kernel whose copy loop has the shape ``loop`` (L_*)."""
    LOOP = loop

    def tx(dom, q, lcore, mbufs, n):
        cfg = q.cfg
        st = q.st
        r16 = _ring16(q)
        r32 = r16.view(np.uint32)
        nring = cfg[Q_N]
        mask = cfg[Q_MASK]
        client = cfg[Q_KIND] == K_CLIENT_TX
        cur = st[QS_LAST]
        if client:
            peer = np.int64(load_acquire(r16, H16_TAIL))
            used = ring_distance(cur, peer)
            if used > nring:
                return queue_fail(q, V_RING_INDEX, peer)
            free = nring - used
        else:
            peer = np.int64(load_acquire(r16, H16_HEAD))
            free = ring_distance(peer, cur)
            if free > nring:
                return queue_fail(q, V_RING_INDEX, peer)
        bsize = cfg[Q_BSIZE]
        mb = dom.mb
        j = 0
        got = 0
        p = 0
        nbytes = 0
        while p < n:
            h = np.int64(mbufs[p])
            if LOOP == L_ONE or LOOP == L_SPLIT:
                if LOOP == L_ONE:
                    # one segment per slot; a segment longer than the buffer (an mbuf of a
                    # pool bigger than the relation assumed) sends the burst to the general loop
                    need = np.int64(mb[h].nb_segs)
                    if need == 1:
                        if np.int64(mb[h].data_len) > bsize:
                            _tx_unwind(q, r32, cur, 0, got)
                            return FALLBACK
                    else:
                        seg = h
                        while seg != NULL:
                            if np.int64(mb[seg].data_len) > bsize:
                                _tx_unwind(q, r32, cur, 0, got)
                                return FALLBACK
                            seg = np.int64(mb[seg].next)
                else:
                    need = 0
                    seg = h
                    while seg != NULL:
                        r = np.int64(mb[seg].data_len)
                        need += 1
                        while r > bsize:
                            r -= bsize
                            need += 1
                        seg = np.int64(mb[seg].next)
                if need > free - j:
                    break
                seg = h
                while seg != NULL:
                    m = mb[seg]
                    nxt = np.int64(m.next)
                    src = np.int64(m.buf_addr) + np.int64(m.data_off)
                    rem = np.int64(m.data_len)
                    while True:
                        s = (cur + j) & mask
                        dst, capd, got = _tx_slot(q, r32, client, cur, j, got)
                        if dst < 0:
                            return queue_fail(q, -dst, s)
                        if capd < bsize:          # server: smaller buffer than assumed
                            _tx_unwind(q, r32, cur, 0, got)
                            return FALLBACK
                        if LOOP == L_ONE:
                            c = rem
                            _copy(dst, src, c, capd >= SHORT and
                                  np.int64(m.buf_len) - np.int64(m.data_off) >= SHORT)
                        else:
                            c = rem if rem <= bsize else bsize
                            memcpy(dst, src, c)
                        src += c
                        rem -= c
                        r32[D32_BASE + 4 * s + 1] = c
                        j += 1
                        if rem == 0:
                            r16[D16_BASE + 8 * s] = DESC_FLAG_NEXT if nxt != NULL else 0
                            break
                        r16[D16_BASE + 8 * s] = DESC_FLAG_NEXT
                    seg = nxt
            else:
                # general: pack the packet's bytes into slots of whatever capacity they have;
                # roll back to the packet start if the ring fills mid-packet
                if j >= free:
                    break
                j0 = j
                full = False
                s = (cur + j) & mask
                dst, room, got = _tx_slot(q, r32, client, cur, j, got)
                if dst < 0:
                    return queue_fail(q, -dst, s)
                filled = np.int64(0)
                seg = h
                while seg != NULL and not full:
                    m = mb[seg]
                    src = np.int64(m.buf_addr) + np.int64(m.data_off)
                    rem = np.int64(m.data_len)
                    while rem > 0:
                        if room == 0:
                            r32[D32_BASE + 4 * s + 1] = filled
                            r16[D16_BASE + 8 * s] = DESC_FLAG_NEXT
                            j += 1
                            if j >= free:
                                full = True
                                break
                            s = (cur + j) & mask
                            dst, room, got = _tx_slot(q, r32, client, cur, j, got)
                            if dst < 0:
                                return queue_fail(q, -dst, s)
                            filled = 0
                        c = rem if rem <= room else room
                        memcpy(dst, src, c)
                        dst += c
                        src += c
                        rem -= c
                        room -= c
                        filled += c
                    seg = np.int64(m.next)
                if full:
                    j = j0
                    break
                r32[D32_BASE + 4 * s + 1] = filled
                r16[D16_BASE + 8 * s] = 0
                j += 1
            nbytes += np.int64(mb[h].pkt_len)
            p += 1
        if not client:
            _tx_unwind(q, r32, cur, j, got)
        _tx_publish(q, r16, client, cur, j, p, n, nbytes)
        if p == 0:
            return 0
        if LOOP == L_GENERAL:
            for x in range(p):          # DPDK 22.11: one free per packet
                pktmbuf_free(dom, lcore, mbufs[x])
        else:
            pktmbuf_free_bulk(dom, lcore, mbufs, p)   # one run-grouped bulk free
        return p

    tx.__name__ = tx.__qualname__ = f"memif_tx_copy_{name}"
    return kernel(tx)


rx_copy_one = _make_rx(L_ONE, "one")
rx_copy_split = _make_rx(L_SPLIT, "split")
rx_copy_general = _make_rx(L_GENERAL, "general")
tx_copy_one = _make_tx(L_ONE, "one")
tx_copy_split = _make_tx(L_SPLIT, "split")
tx_copy_general = _make_tx(L_GENERAL, "general")


@kernel
def zc_reclaim(dom, q, lcore):
    """Zero-copy Tx: free the mbufs of every slot the peer has consumed (``tail`` passed it).

    Returns the number of packets freed, or 0 after a validation failure.
    """
    r16 = _ring16(q)
    mask = q.cfg[Q_MASK]
    cur = q.st[QS_LAST]
    rc = q.st[QS_HEAD]
    tail = np.int64(load_acquire(r16, H16_TAIL))
    cnt = ring_distance(tail, rc)
    if cnt > ring_distance(cur, rc):
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


@kernel
def _tx_zc(dom, q, lcore, mbufs, n):
    cfg = q.cfg
    st = q.st
    r16 = _ring16(q)
    r32 = r16.view(np.uint32)
    nring = cfg[Q_N]
    mask = cfg[Q_MASK]
    cur = st[QS_LAST]
    zc_reclaim(dom, q, lcore)
    if st[QS_UP] == 0:        # reclaim found a bad tail
        return 0
    free = nring - ring_distance(cur, st[QS_HEAD])
    mb = dom.mb
    preg = q.pool_region
    j = 0
    p = 0
    nbytes = 0
    while p < n:
        h = np.int64(mbufs[p])
        if np.int64(mb[h].nb_segs) > free - j:
            break
        seg = h
        shared = True
        while seg != NULL:
            if preg[mb[seg].pool] < 0:
                shared = False
                break
            seg = np.int64(mb[seg].next)
        if not shared:
            break       # not in a region the peer can see: stays with the caller
        seg = h
        while seg != NULL:
            m = mb[seg]
            nxt = np.int64(m.next)
            s = (cur + j) & mask
            w = D32_BASE + 4 * s
            r32[w] = (np.int64(preg[m.pool]) << 16) | (DESC_FLAG_NEXT if nxt != NULL else 0)
            r32[w + 1] = m.data_len
            r32[w + 2] = np.int64(m.buf_iova) + np.int64(m.data_off)
            q.slots[s] = h if nxt == NULL else -1
            j += 1
            seg = nxt
        nbytes += np.int64(mb[h].pkt_len)
        p += 1
    _tx_publish(q, r16, True, cur, j, p, n, nbytes)
    return p


@kernel
def _rx_zc(dom, q, lcore, out, n):
    cfg = q.cfg
    st = q.st
    r16 = _ring16(q)
    r32 = r16.view(np.uint32)
    mask = cfg[Q_MASK]
    nring = cfg[Q_N]
    last, tail, avail, limit = _rx_window(q, r16, True)
    if avail > limit:
        return queue_fail(q, V_RING_INDEX, tail)
    cap = cfg[Q_MBUF_CAP]
    scr_l = q.scr_len
    scr_e = q.scr_end
    i = 0
    npk = 0
    while npk < n and i < avail:
        j = i
        complete = False
        while j < avail:
            s = (last + j) & mask
            w = D32_BASE + 4 * s
            w0 = np.int64(load_relaxed(r32, w))
            ln = np.int64(load_relaxed(r32, w + 1))
            if ln > cap:
                return queue_fail(q, V_DESC_LENGTH, ln)
            scr_l[j] = ln
            j += 1
            if (w0 & DESC_FLAG_NEXT) == 0:
                complete = True
                break
        if not complete:
            if i == 0 and j >= nring:
                return queue_fail(q, V_CHAIN, j)
            break
        if j - i > MAX_SEGS:
            return queue_fail(q, V_CHAIN, j - i)
        scr_e[npk] = j
        npk += 1
        i = j
    st[QS_BURSTS] += 1
    mb = dom.mb
    port = cfg[Q_PORT]
    d = 0
    nbytes = 0
    for p in range(npk):
        end = scr_e[p]
        h = np.int64(q.slots[(last + d) & mask])
        prev = np.int64(-1)
        nb = 0
        plen = 0
        while d < end:
            s = (last + d) & mask
            seg = np.int64(q.slots[s])
            q.slots[s] = -1
            mb[seg].data_len = scr_l[d]
            if prev >= 0:
                mb[prev].next = seg
            prev = seg
            nb += 1
            plen += scr_l[d]
            d += 1
        _finish_packet(mb, h, plen, nb, port)
        out[p] = h
        nbytes += plen
    st[QS_LAST] = (last + i) & 0xFFFF
    _rx_zc_refill(dom, q, lcore)
    st[QS_PACKETS] += npk
    st[QS_BYTES] += nbytes
    return npk


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


@kernel
def link_up(q):
    """True while the queue's link is up (bursts move packets)."""
    return load_acquire(q.st, QS_UP) != 0


@kernel
def rx_burst(dom, q, lcore, out, n):
    """Receive up to ``n`` packets into ``out[:n]``; returns how many (DPDK ``rte_eth_rx_burst``).

    The packets are mbufs of the queue's Rx pool (chained when a packet spans several
    buffers); they are the caller's to free.  0 when the link is down, nothing arrived, the
    pool is empty (``st[QS_NOMBUF]`` counts those bursts; the packets stay in the ring) or the
    peer broke the protocol (the queue then goes down).
    """
    if n > out.size:
        n = out.size
    if n <= 0 or not queue_enter(q):
        return 0
    kind = q.cfg[Q_KIND]
    r = 0
    if kind == K_CLIENT_RX or kind == K_SERVER_RX:
        path = q.cfg[Q_PATH]
        if path == P_EQ or path == P_LT:
            r = rx_copy_one(dom, q, lcore, out, n)
            if r == FALLBACK:
                q.st[QS_FALLBACK] += 1
                r = rx_copy_general(dom, q, lcore, out, n)
        elif path == P_GT:
            r = rx_copy_split(dom, q, lcore, out, n)
        else:
            r = rx_copy_general(dom, q, lcore, out, n)
    elif kind == K_CLIENT_RX_ZC:
        r = _rx_zc(dom, q, lcore, out, n)
    queue_leave(q)
    return r


@kernel
def tx_burst(dom, q, lcore, mbufs, n):
    """Send up to ``n`` packets from ``mbufs[:n]``; returns how many (DPDK ``rte_eth_tx_burst``).

    The first ``k`` (the return value) now belong to the queue (copy mode: already freed with
    one run-grouped bulk free; zero-copy: freed once the peer has consumed them); the rest are
    still the caller's.  Sending stops at the first packet that does not fit in the ring.
    """
    if n > mbufs.size:
        n = mbufs.size
    if n <= 0 or not queue_enter(q):
        return 0
    kind = q.cfg[Q_KIND]
    r = 0
    if kind == K_CLIENT_TX or kind == K_SERVER_TX:
        path = q.cfg[Q_PATH]
        if path == P_EQ or path == P_GT:
            r = tx_copy_one(dom, q, lcore, mbufs, n)
            if r == FALLBACK:
                q.st[QS_FALLBACK] += 1
                r = tx_copy_general(dom, q, lcore, mbufs, n)
        elif path == P_LT:
            r = tx_copy_split(dom, q, lcore, mbufs, n)
            if r == FALLBACK:
                q.st[QS_FALLBACK] += 1
                r = tx_copy_general(dom, q, lcore, mbufs, n)
        else:
            r = tx_copy_general(dom, q, lcore, mbufs, n)
    elif kind == K_CLIENT_TX_ZC:
        r = _tx_zc(dom, q, lcore, mbufs, n)
    queue_leave(q)
    return r
