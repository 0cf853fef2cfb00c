"""memif copy-mode Rx: the client's S2C receive and the server's C2S receive.

A burst works in two passes:

1. *gather* (:func:`rx_gather`): read each descriptor the peer published **once** (relaxed
   atomic loads, so the compiler cannot re-read shared memory), validate it
   (:func:`rx_read_desc`, :mod:`~pktbuf.drivers.memif.validate`) and keep the checked buffer address
   and length in the queue's private scratch arrays; cut them into packets (complete NEXT
   chains only) and count the mbufs they need;
2. *copy*: allocate the mbufs, copy, chain, and hand the slots back with one index store
   (:func:`rx_return`).

The copy pass has three loop shapes -- the fast ones :func:`rx_copy` with a constant
``loop``, compiled once per shape, and :func:`rx_copy_general` -- chosen once per queue from
the size relation between the memif buffer size ``B`` and the mbuf data room ``C`` (buffer
length minus headroom):

=========== =============== =========================================
relation    ``loop``        copy
=========== =============== =========================================
``B <= C``  ``L_ONE``       one descriptor -> one mbuf
``B >  C``  ``L_SPLIT``     one descriptor -> ceil(len/C) mbufs
general     ``L_GENERAL``   bytes packed into mbufs as they come
=========== =============== =========================================

(:func:`rx_fill_one`, :func:`rx_fill_split` and :func:`rx_pack_general` copy one packet.)

The fast loops copy each descriptor's length with no size comparison (the relation guarantees
it fits) into mbufs taken with one ``pktmbuf_alloc_bulk``.  The general loop keeps DPDK
22.11's shape -- an mbuf allocated when the bytes need one -- so forcing it gives the A/B
baseline of the fast loops in one switch.  A server cannot know the buffer size its client
uses (it is not negotiated): it checks each descriptor in the gather pass, where the check is
needed anyway, and a burst with a descriptor longer than the mbuf room ends the one-to-one
loop with ``FALLBACK`` before anything was taken (the dispatcher then runs the general loop).

DPDK 22.11 quirk (stale NEXT flags on its Tx): a receiver zeroes a descriptor's flags when it
returns (server) or refills (client) the slot.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_relaxed, store_release
from ...buf.mbuf.free import pktmbuf_free
from ...buf.mbuf.layout import MAX_SEGS
from ...buf.mbuf.raw import pktmbuf_alloc, pktmbuf_alloc_bulk
from ...rawmem import addr_view, copy_in_bounds
from .burst import (FAILED, FALLBACK, L_GENERAL, L_ONE, L_SPLIT, MAX_DESC_LEN, SHORT,
                    copy_short, finish_packet, ring_u16, ring_u32, rx_window)
from .layout import (D_W_FLAGS_REGION, D_W_LENGTH, D_W_OFFSET, DESC_FLAG_NEXT, H16_HEAD,
                     H16_TAIL, desc_word)
from .queue import (K_CLIENT_RX, Q_BSIZE, Q_BUF_BASE, Q_KIND, Q_MASK, Q_MBUF_CAP, Q_N, Q_POOL,
                    Q_PORT, QS_BURSTS, QS_BYTES, QS_HEAD, QS_LAST, QS_NOMBUF, QS_PACKETS,
                    queue_fail)
from .validate import IDX_MASK, V_CHAIN, V_DESC_LENGTH, V_RING_INDEX, desc_address, ring_distance

__all__ = ["rx_copy", "rx_copy_general", "rx_refill"]


@kernel
def rx_refill(q):
    """Client copy Rx: hand every consumed S2C slot back to the server (head = last + N).

    Rewrites each returned descriptor completely (flags 0, region 0, our offset, length = our
    buffer size), so nothing a peer left in it survives.  Done on every Rx poll, as DPDK does.
    """
    r32 = ring_u32(q)
    mask = q.cfg[Q_MASK]
    bsize = q.cfg[Q_BSIZE]
    off0 = q.cfg[Q_BUF_BASE] - np.int64(q.regions[0, 0])
    head = q.st[QS_HEAD]
    target = (q.st[QS_LAST] + q.cfg[Q_N]) & IDX_MASK
    cnt = ring_distance(target, head)
    for x in range(cnt):
        s = (head + x) & mask
        w = desc_word(s)
        r32[w + D_W_FLAGS_REGION] = 0
        r32[w + D_W_LENGTH] = bsize
        r32[w + D_W_OFFSET] = off0 + s * bsize
    if cnt > 0:
        store_release(ring_u16(q), H16_HEAD, target)
        q.st[QS_HEAD] = target


# -- pass 1: gather -------------------------------------------------------------------------------
@kernel(inline="always")
def rx_read_desc(q, r32, client, s, bsize, base):
    """Read slot ``s``'s descriptor once and validate it: ``(address, length, word 0)``.

    Client (our own buffers): the length must fit our buffer size, the address is our slot's
    buffer whatever the descriptor says.  Server: the length must fit an mbuf's 16-bit
    ``data_len`` and region/offset/length must lie inside a mapped region.  On a violation the
    queue fails and the address is ``FAILED``.
    """
    w = desc_word(s)
    w0 = np.int64(load_relaxed(r32, w + D_W_FLAGS_REGION))
    ln = np.int64(load_relaxed(r32, w + D_W_LENGTH))
    if client:
        if ln > bsize:
            queue_fail(q, V_DESC_LENGTH, ln)
            return np.int64(FAILED), ln, w0
        return base + s * bsize, ln, w0
    if ln > MAX_DESC_LEN:
        queue_fail(q, V_DESC_LENGTH, ln)
        return np.int64(FAILED), ln, w0
    a = desc_address(q, w0 >> 16, np.int64(load_relaxed(r32, w + D_W_OFFSET)), ln)
    if a < 0:
        queue_fail(q, -a, s)
        return np.int64(FAILED), ln, w0
    return a, ln, w0


@kernel(inline="always")
def rx_desc_mbufs(ln, cap, loop):
    """mbufs a descriptor of ``ln`` bytes takes in fast loop ``loop`` (``FALLBACK``: the
    one-to-one loop cannot take it).  The general loop counts per packet: 0."""
    if loop == L_ONE:
        return 1 if ln <= cap else FALLBACK
    if loop == L_SPLIT:
        return 1 if ln <= cap else (ln + cap - 1) // cap
    return 0


@kernel
def rx_gather(q, r32, client, last, avail, limit, n, loop, cap):
    """Pass 1: validate the ``avail`` filled descriptors from ``last`` on, up to ``n`` packets.

    Fills ``scr_addr``/``scr_len`` (per descriptor) and ``scr_end`` (per packet: one past its
    last descriptor).  Returns ``(packets, mbufs needed, short_ok)``; ``packets`` is
    ``FAILED`` or ``FALLBACK`` to stop.  A chain that is not complete yet waits for the next
    burst -- unless it already spans the whole ring, which no chain may.
    """
    bsize = q.cfg[Q_BSIZE]
    base = q.cfg[Q_BUF_BASE]
    mask = q.cfg[Q_MASK]
    nring = q.cfg[Q_N]
    scr_a = q.scr_addr
    scr_l = q.scr_len
    scr_e = q.scr_end
    maxseg = q.scr_mb.size
    short_ok = cap >= SHORT and (not client or bsize >= SHORT)
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
            a, ln, w0 = rx_read_desc(q, r32, client, s, bsize, base)
            if a < 0:
                return FAILED, 0, False
            if not client and a + SHORT > np.int64(q.regions[w0 >> 16, 0] + q.regions[w0 >> 16, 1]):
                short_ok = False          # a fixed-size copy would read past the region
            scr_a[j] = a
            scr_l[j] = ln
            k = rx_desc_mbufs(ln, cap, loop)
            if k < 0:
                return FALLBACK, 0, False
            segs += k
            plen += ln
            j += 1
            if (w0 & DESC_FLAG_NEXT) == 0:
                complete = True
                break
        if not complete:
            if i == 0 and j >= limit and limit == nring:
                queue_fail(q, V_CHAIN, j)            # a chain that can never end
                return FAILED, 0, False
            break                                    # wait for the rest of the chain
        if loop == L_GENERAL:
            segs = 1 if plen == 0 else (plen + cap - 1) // cap
        if segs > MAX_SEGS or nseg + segs > maxseg:
            if npk == 0:
                queue_fail(q, V_CHAIN, segs)
                return FAILED, 0, False
            break
        scr_e[npk] = j
        npk += 1
        nseg += segs
        i = j
    return npk, nseg, short_ok


# -- pass 2: the copy loops ---------------------------------------------------------------------
@kernel(inline="always")
def rx_fill_one(mb, q, k, d, end, short_ok):
    """Copy descriptors ``d .. end-1`` (one packet) into one mbuf each, taken in order from
    ``scr_mb[k:]``, and chain them.  Returns ``(k after, segments, packet length)``."""
    mbs = q.scr_mb
    prev = np.int64(-1)
    nb = 0
    plen = 0
    while d < end:
        seg = mbs[k]
        k += 1
        m = mb[seg]
        ln = q.scr_len[d]
        src = q.scr_addr[d]
        # the peer's side: the descriptor's bytes, or SHORT of them, which rx_gather checked
        # lie inside the region
        copy_short(np.int64(m.buf_addr) + np.int64(m.data_off), np.int64(m.buf_addr),
                   np.int64(m.buf_len), src, src, SHORT if short_ok and ln < SHORT else ln,
                   ln, short_ok)
        m.data_len = ln
        if prev >= 0:
            mb[prev].next = seg
        prev = seg
        nb += 1
        plen += ln
        d += 1
    return k, nb, plen


@kernel(inline="always")
def rx_fill_split(mb, q, k, d, end, cap):
    """As :func:`rx_fill_one`, each descriptor split over ``ceil(len / cap)`` mbufs."""
    mbs = q.scr_mb
    prev = np.int64(-1)
    nb = 0
    plen = 0
    while d < end:
        src = q.scr_addr[d]
        rem = q.scr_len[d]
        src0, len0 = src, rem
        plen += rem
        while True:
            seg = mbs[k]
            k += 1
            m = mb[seg]
            c = rem if rem <= cap else cap
            copy_in_bounds(np.int64(m.buf_addr) + np.int64(m.data_off), np.int64(m.buf_addr),
                           np.int64(m.buf_len), src, src0, len0, c)
            m.data_len = c
            if prev >= 0:
                mb[prev].next = seg
            prev = seg
            nb += 1
            src += c
            rem -= c
            if rem == 0:
                break
        d += 1
    return k, nb, plen


@kernel
def rx_pack_general(dom, q, lcore, d, end, cap):
    """DPDK 22.11's loop: pack descriptors ``d .. end-1`` into mbufs allocated one at a time
    as the bytes need them.  Returns ``(head, segments, packet length)``; ``head < 0`` when
    the pool ran dry (the packet's mbufs are given back; it stays in the ring)."""
    mb = dom.mb
    pid = q.cfg[Q_POOL]
    h = pktmbuf_alloc(dom, pid, lcore)
    if h < 0:
        return np.int64(-1), 0, 0
    m = mb[h]
    dst = np.int64(m.buf_addr) + np.int64(m.data_off)
    room = cap
    used = np.int64(0)
    nb = 1
    plen = 0
    prev = h
    while d < end:
        src = q.scr_addr[d]
        rem = q.scr_len[d]
        src0, len0 = src, rem
        plen += rem
        while rem > 0:
            if room == 0:
                mb[prev].data_len = used
                seg = pktmbuf_alloc(dom, pid, lcore)
                if seg < 0:
                    mb[h].nb_segs = nb
                    pktmbuf_free(dom, lcore, h)
                    return np.int64(-1), 0, 0
                mb[prev].next = seg
                prev = seg
                m = mb[seg]
                dst = np.int64(m.buf_addr) + np.int64(m.data_off)
                room = cap
                used = 0
                nb += 1
            c = rem if rem <= room else room
            copy_in_bounds(dst, np.int64(m.buf_addr), np.int64(m.buf_len), src, src0, len0, c)
            dst += c
            src += c
            rem -= c
            room -= c
            used += c
        d += 1
    mb[prev].data_len = used
    return np.int64(h), nb, plen


@kernel
def rx_fill_fast(mb, q, out, npk, loop, cap, short_ok):
    """The fast loops over the gathered packets, into the bulk-allocated ``scr_mb``.
    Returns the bytes received."""
    port = q.cfg[Q_PORT]
    k = 0
    d = 0
    nbytes = 0
    for p in range(npk):
        end = q.scr_end[p]
        h = q.scr_mb[k]
        if loop == L_ONE:
            k, nb, plen = rx_fill_one(mb, q, k, d, end, short_ok)
        else:
            k, nb, plen = rx_fill_split(mb, q, k, d, end, cap)
        d = end
        finish_packet(mb, h, plen, nb, port)
        out[p] = h
        nbytes += plen
    return nbytes


@kernel
def rx_fill_general(dom, q, lcore, out, npk, cap):
    """The general loop over the gathered packets.  Returns ``(packets, bytes)``: fewer
    packets than gathered when the pool ran dry (counted in ``QS_NOMBUF``)."""
    port = q.cfg[Q_PORT]
    d = 0
    nbytes = 0
    for p in range(npk):
        end = q.scr_end[p]
        h, nb, plen = rx_pack_general(dom, q, lcore, d, end, cap)
        if h < 0:
            q.st[QS_NOMBUF] += 1
            return p, nbytes
        d = end
        finish_packet(dom.mb, h, plen, nb, port)
        out[p] = h
        nbytes += plen
    return npk, nbytes


@kernel
def rx_return(q, r16, client, last, npk, nbytes):
    """Hand the slots of ``npk`` received packets back with one index store, and count them.

    Server: zero the flags of the returned descriptors first (DPDK 22.11 quirk), only where
    set, so the common single-buffer packet costs no write to the sender's cache line; then
    store ``tail``.  Client: refill (which rewrites the descriptors) -- on every poll, even an
    empty one, as DPDK does.
    """
    if npk > 0:
        i = q.scr_end[npk - 1]
        if not client:
            mask = q.cfg[Q_MASK]
            for x in range(i):
                fi = 2 * desc_word((last + x) & mask)
                if r16[fi] != 0:
                    r16[fi] = 0
        last = (last + i) & IDX_MASK
        q.st[QS_LAST] = last
        if not client:
            store_release(r16, H16_TAIL, last)
        q.st[QS_PACKETS] += npk
        q.st[QS_BYTES] += nbytes
    if client:
        rx_refill(q)
    return npk


@kernel(inline="always")
def _rx_begin(q, n, loop):
    """Both passes' start: the ring window and the gather pass.  Returns ``(r16, client,
    last, packets, mbufs needed, short_ok)``; ``packets`` is 0, ``FAILED`` or ``FALLBACK``
    when nothing is to be copied."""
    r16 = ring_u16(q)
    client = q.cfg[Q_KIND] == K_CLIENT_RX
    last, peer, avail, limit = rx_window(q, r16, client)
    if avail > limit:
        queue_fail(q, V_RING_INDEX, peer)
        return r16, client, last, FAILED, 0, False
    npk, nseg, short_ok = rx_gather(q, ring_u32(q), client, last, avail, limit, n, loop,
                                    q.cfg[Q_MBUF_CAP])
    return r16, client, last, npk, nseg, short_ok


@kernel(literal=("loop",))
def rx_copy(dom, q, lcore, out, n, loop):
    """A copy-mode Rx burst with fast loop ``loop`` (``L_ONE`` or ``L_SPLIT``, a constant:
    one compiled version per shape).  ``FALLBACK`` when a descriptor does not fit the
    shape (nothing taken: the caller runs :func:`rx_copy_general`)."""
    r16, client, last, npk, nseg, short_ok = _rx_begin(q, n, loop)
    if npk == FAILED:
        return 0
    if npk == FALLBACK:
        return FALLBACK
    q.st[QS_BURSTS] += 1
    nbytes = 0
    if npk > 0:
        if pktmbuf_alloc_bulk(dom, q.cfg[Q_POOL], lcore, q.scr_mb, nseg) < 0:
            q.st[QS_NOMBUF] += 1
            npk = 0
        else:
            nbytes = rx_fill_fast(dom.mb, q, out, npk, loop, q.cfg[Q_MBUF_CAP], short_ok)
    return rx_return(q, r16, client, last, npk, nbytes)


@kernel(cfunc=True)
def rx_copy_general(dom, q, lcore, out_addr, n):
    """A copy-mode Rx burst with the general loop (DPDK 22.11's shape: an mbuf allocated
    when the bytes need one) into the ``n`` handles at ``out_addr``.  A kernel of its own, not
    a shape of :func:`rx_copy`: Numba types every branch of a function whatever its constant
    arguments, so as a shape it would be compiled -- and linked into every caller -- with the
    fast loops.  Called through its address (:mod:`.variants`), hence the handles' address."""
    out = addr_view(out_addr, n, np.int32)
    r16, client, last, npk, nseg, short_ok = _rx_begin(q, n, L_GENERAL)
    if npk == FAILED or npk == FALLBACK:
        return 0
    q.st[QS_BURSTS] += 1
    nbytes = 0
    if npk > 0:
        npk, nbytes = rx_fill_general(dom, q, lcore, out, npk, q.cfg[Q_MBUF_CAP])
    return rx_return(q, r16, client, last, npk, nbytes)
