"""memif copy-mode Tx: the client's C2S send and the server's S2C send.

Each packet (an mbuf chain) is copied into the buffers of consecutive free slots; the burst is
published with one release store of our index, then the sent mbufs are freed.  Sending stops
at the first packet that does not fit in the ring, so a chain is never split over two bursts.

Where the buffers are: a client owns them (slot ``s`` of its ring is at ``buf_base + s * B``
in region 0, capacity its own buffer size ``B``); a server takes region, offset and capacity
from each descriptor the client left in the slot -- read once, validated, remembered in
scratch (:func:`tx_slot`), so that what it did not publish can be given back unchanged
(:func:`tx_unwind`).

Three loop shapes -- the fast ones :func:`tx_copy` with a constant ``loop``, compiled once
per shape, and :func:`tx_copy_general` -- chosen once per queue from the memif buffer size
``B`` and the mbuf data room ``C``:

=========== =============== =========================================
relation    ``loop``        copy
=========== =============== =========================================
``B >= C``  ``L_ONE``       one segment -> one slot
``B <  C``  ``L_SPLIT``     one segment -> ceil(len/B) slots
general     ``L_GENERAL``   bytes packed into slots of any capacity
=========== =============== =========================================

(:func:`tx_put_fixed` copies a packet in the first two, :func:`tx_put_general` in the third.)

The fast loops count a packet's slots before copying (:func:`tx_slots_needed`) and free all
sent mbufs with one run-grouped ``pktmbuf_free_bulk``; a segment longer than ``B`` (an mbuf
of a pool bigger than the relation assumed) or a server slot smaller than ``B`` ends them with
``FALLBACK`` before anything is published.  The general loop keeps DPDK 22.11's shape: it
rolls back to the packet start when the ring fills mid-packet and frees packet by packet.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_acquire, load_relaxed
from ...buf.mbuf.free import pktmbuf_free, pktmbuf_free_bulk
from ...buf.mbuf.layout import NULL
from ...rawmem import addr_view, copy_in_bounds
from .burst import (FAILED, FALLBACK, L_ONE, SHORT, copy_short, ring_u16, ring_u32,
                    tx_publish)
from .layout import (D_W_FLAGS_REGION, D_W_LENGTH, D_W_OFFSET, DESC_FLAG_NEXT, H16_HEAD,
                     H16_TAIL, desc_word)
from .queue import K_CLIENT_TX, Q_BSIZE, Q_BUF_BASE, Q_KIND, Q_MASK, Q_N, QS_LAST, queue_fail
from .validate import V_RING_INDEX, desc_address, ring_distance

__all__ = ["tx_copy", "tx_copy_general"]

RING_FULL = -2          # tx_put_general: the ring filled mid-packet


@kernel
def tx_free_slots(q, r16, client, cur):
    """Slots we may fill from our cursor ``cur``, or ``FAILED`` (queue failed) when the
    peer's index is impossible.  Client: ``N - (head - tail)``; server: ``head - tail``."""
    nring = q.cfg[Q_N]
    if client:
        peer = np.int64(load_acquire(r16, H16_TAIL))
        used = ring_distance(cur, peer)
        if used > nring:
            queue_fail(q, V_RING_INDEX, peer)
            return FAILED
        return nring - used
    peer = np.int64(load_acquire(r16, H16_HEAD))
    free = ring_distance(peer, cur)
    if free > nring:
        queue_fail(q, V_RING_INDEX, peer)
        return FAILED
    return free


@kernel(inline="always")
def tx_slot(q, r32, client, cur, j, got):
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
    w = desc_word(s)
    w0 = np.int64(load_relaxed(r32, w + D_W_FLAGS_REGION))
    cap = np.int64(load_relaxed(r32, w + D_W_LENGTH))
    a = desc_address(q, w0 >> 16, np.int64(load_relaxed(r32, w + D_W_OFFSET)), cap)
    q.scr_addr[j] = a
    q.scr_len[j] = cap
    return a, cap, got + 1


@kernel
def tx_unwind(q, r32, cur, frm, got):
    """Server: put the client's capacities back into slots ``frm .. got`` we did not publish."""
    mask = q.cfg[Q_MASK]
    for x in range(frm, got):
        r32[desc_word((cur + x) & mask) + D_W_LENGTH] = q.scr_len[x]


@kernel(inline="always")
def tx_set_desc(r16, r32, s, length, more):
    """Write a Tx descriptor's length and flags (``NEXT`` if the packet continues); region and
    offset stay as the buffer's owner wrote them."""
    w = desc_word(s)
    r32[w + D_W_LENGTH] = length
    r16[2 * w] = DESC_FLAG_NEXT if more else 0


@kernel(inline="always")
def tx_slots_needed(mb, h, bsize, loop):
    """Slots packet ``h`` takes in fast loop ``loop``: one per segment (``FALLBACK`` if a
    segment is longer than ``bsize``), or ``ceil(data_len / bsize)`` per segment."""
    if loop == L_ONE:
        need = np.int64(mb[h].nb_segs)
        if need == 1:           # the common case: no chain walk
            return need if np.int64(mb[h].data_len) <= bsize else FALLBACK
        seg = h
        while seg != NULL:
            if np.int64(mb[seg].data_len) > bsize:
                return FALLBACK
            seg = np.int64(mb[seg].next)
        return need
    need = np.int64(0)
    seg = h
    while seg != NULL:
        r = np.int64(mb[seg].data_len)
        need += 1
        while r > bsize:
            r -= bsize
            need += 1
        seg = np.int64(mb[seg].next)
    return need


@kernel(inline="always")
def tx_put_fixed(q, r16, r32, client, mb, h, cur, j, got, loop):
    """Fast loops: copy packet ``h`` into the slots from ``j`` on, whose number
    :func:`tx_slots_needed` counted.  Returns ``(j after, got)``; ``j`` is ``FAILED`` or
    ``FALLBACK`` (a server slot smaller than our buffer size; slots given back)."""
    bsize = q.cfg[Q_BSIZE]
    mask = q.cfg[Q_MASK]
    seg = h
    while seg != NULL:
        m = mb[seg]
        nxt = np.int64(m.next)
        src = np.int64(m.buf_addr) + np.int64(m.data_off)
        rem = np.int64(m.data_len)
        while True:
            s = (cur + j) & mask
            dst, capd, got = tx_slot(q, r32, client, cur, j, got)
            if dst < 0:
                queue_fail(q, -dst, s)
                return FAILED, got
            if capd < bsize:          # server: smaller buffer than assumed
                tx_unwind(q, r32, cur, 0, got)
                return FALLBACK, got
            if loop == L_ONE:
                c = rem
                copy_short(dst, dst, capd, src, np.int64(m.buf_addr), np.int64(m.buf_len), c,
                           capd >= SHORT and np.int64(m.buf_len) - np.int64(m.data_off) >= SHORT)
            else:
                c = rem if rem <= bsize else bsize
                copy_in_bounds(dst, dst, capd, src, np.int64(m.buf_addr), np.int64(m.buf_len), c)
            src += c
            rem -= c
            j += 1
            tx_set_desc(r16, r32, s, c, rem != 0 or nxt != NULL)
            if rem == 0:
                break
        seg = nxt
    return j, got


@kernel
def tx_put_general(q, r16, r32, client, mb, h, cur, j, free, got):
    """General loop: pack packet ``h``'s bytes into slots of whatever capacity they have, from
    ``j`` on.  Returns ``(j after, got)``; ``j`` is ``RING_FULL`` when the ring filled
    mid-packet (the caller rolls back to the packet start) or ``FAILED``."""
    mask = q.cfg[Q_MASK]
    s = (cur + j) & mask
    dst, room, got = tx_slot(q, r32, client, cur, j, got)
    if dst < 0:
        queue_fail(q, -dst, s)
        return FAILED, got
    slot, cap = dst, room
    filled = np.int64(0)
    seg = h
    while seg != NULL:
        m = mb[seg]
        src = np.int64(m.buf_addr) + np.int64(m.data_off)
        rem = np.int64(m.data_len)
        while rem > 0:
            if room == 0:
                tx_set_desc(r16, r32, s, filled, True)
                j += 1
                if j >= free:
                    return RING_FULL, got
                s = (cur + j) & mask
                dst, room, got = tx_slot(q, r32, client, cur, j, got)
                if dst < 0:
                    queue_fail(q, -dst, s)
                    return FAILED, got
                slot, cap = dst, room
                filled = 0
            c = rem if rem <= room else room
            copy_in_bounds(dst, slot, cap, src, np.int64(m.buf_addr), np.int64(m.buf_len), c)
            dst += c
            src += c
            rem -= c
            room -= c
            filled += c
        seg = np.int64(m.next)
    tx_set_desc(r16, r32, s, filled, False)
    return j + 1, got


@kernel(inline="always")
def _tx_begin(q):
    """Both loops' start: ``(r16, r32, client, cursor, free slots)``; free < 0: the queue
    failed (nothing to send)."""
    r16 = ring_u16(q)
    r32 = ring_u32(q)
    client = q.cfg[Q_KIND] == K_CLIENT_TX
    cur = q.st[QS_LAST]
    return r16, r32, client, cur, tx_free_slots(q, r16, client, cur)


@kernel(inline="always")
def _tx_end(q, r16, r32, client, cur, j, got, p, n, nbytes):
    """Both loops' end: a server gives back the slots it took but did not fill, then the
    ``j`` filled slots (``p`` packets, ``nbytes``) are published."""
    if not client:
        tx_unwind(q, r32, cur, j, got)
    tx_publish(q, r16, client, cur, j, p, n, nbytes)


@kernel(literal=("loop",))
def tx_copy(dom, q, lcore, mbufs, n, loop):
    """A copy-mode Tx burst with fast loop ``loop`` (``L_ONE`` or ``L_SPLIT``, a constant:
    one compiled version per shape).  ``FALLBACK`` when a packet does not fit the shape
    (nothing published: the caller runs :func:`tx_copy_general`)."""
    r16, r32, client, cur, free = _tx_begin(q)
    if free < 0:
        return 0
    bsize = q.cfg[Q_BSIZE]
    mb = dom.mb
    j = 0
    got = 0
    p = 0
    nbytes = 0
    while p < n:
        h = np.int64(mbufs[p])
        need = tx_slots_needed(mb, h, bsize, loop)
        if need == FALLBACK:
            tx_unwind(q, r32, cur, 0, got)
            return FALLBACK
        if need > free - j:
            break
        nj, got = tx_put_fixed(q, r16, r32, client, mb, h, cur, j, got, loop)
        if nj == FAILED:
            return 0
        if nj == FALLBACK:
            return FALLBACK
        j = nj
        nbytes += np.int64(mb[h].pkt_len)
        p += 1
    _tx_end(q, r16, r32, client, cur, j, got, p, n, nbytes)
    if p == 0:
        return 0
    pktmbuf_free_bulk(dom, lcore, mbufs, p)   # one run-grouped bulk free
    return p


@kernel(cfunc=True)
def tx_copy_general(dom, q, lcore, mbufs_addr, n):
    """A copy-mode Tx burst with the general loop (DPDK 22.11's shape: it rolls back to the
    packet start when the ring fills mid-packet and frees packet by packet) of the ``n``
    handles at ``mbufs_addr``.  A kernel of its own, not a shape of :func:`tx_copy`: Numba
    types every branch of a function whatever its constant arguments, so as a shape it would
    be compiled -- and linked into every caller -- with the fast loops.  Called through its
    address (:mod:`.variants`), hence the handles' address."""
    mbufs = addr_view(mbufs_addr, n, np.int32)
    r16, r32, client, cur, free = _tx_begin(q)
    if free < 0:
        return 0
    mb = dom.mb
    j = 0
    got = 0
    p = 0
    nbytes = 0
    while p < n and j < free:
        h = np.int64(mbufs[p])
        nj, got = tx_put_general(q, r16, r32, client, mb, h, cur, j, free, got)
        if nj == RING_FULL:
            break                    # j still marks the packet start: nothing of it sent
        if nj == FAILED:
            return 0
        j = nj
        nbytes += np.int64(mb[h].pkt_len)
        p += 1
    _tx_end(q, r16, r32, client, cur, j, got, p, n, nbytes)
    for x in range(p):          # DPDK 22.11: one free per packet
        pktmbuf_free(dom, lcore, mbufs[x])
    return p
