"""``af_packet_rx_burst``: frames from a TPACKET_V3 Rx ring into mbufs.

The kernel fills blocks in ring order and hands each over whole (``TP_STATUS_USER`` in its
``block_status``) when it is full or its retire timer fires.  A burst works in two passes:

1. *gather*: from the queue's cursor (block, packets consumed, offset of the next packet),
   walk the packets of the blocks the kernel handed over -- the block status read with acquire
   ordering, every offset and length checked against the block -- and note each deliverable
   frame (address, length, status and VLAN words) in the queue's scratch, up to ``n`` frames;
2. *copy*: take all the mbufs the burst needs with one ``pktmbuf_alloc_bulk`` (none: count
   ``RS_NOMBUF``, leave everything in the ring), copy each frame (a chain when it is longer
   than one mbuf), then hand every fully consumed block back with a release store of
   ``TP_STATUS_KERNEL`` and move the cursor.

A burst that finds the current block still the kernel's costs one load and no system call;
:func:`af_packet_rx_wait` sleeps in ``poll()`` for a caller with nothing else to do.

What a received mbuf holds: the frame as it was on the wire -- the VLAN tag the kernel took out
is put back after the MAC addresses (``vlan_tci`` and ``RX_VLAN`` are set too, as DPDK does);
with ``RXF_VLAN_STRIP`` the tag stays out of the data, in ``vlan_tci`` with ``RX_VLAN |
RX_VLAN_STRIPPED``.  A GSO frame (``TP_STATUS_GSO_TCP``: locally sent TCP crossing a veth, up
to 64 KiB) is delivered whole, as a chain, with ``RX_LRO``; a frame whose L4 checksum the
sender left to offload (``TP_STATUS_CSUMNOTREADY``) has ``RX_L4_CKSUM_NONE``, one the kernel
verified ``RX_L4_CKSUM_GOOD``.  A frame the kernel clamped to the block (``tp_snaplen <
tp_len``) is never delivered truncated: it is dropped and counted (``RS_TRUNCATED``, ierrors).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_acquire, store_release
from ...buf.mbuf.layout import MAX_SEGS
from ...buf.mbuf.raw import pktmbuf_alloc_bulk
from ...rawmem import addr_view, copy_in_bounds, store_u8
from ...syscalls import POLLERR, POLLIN, fd_poll, sock_error
from .layout import (BLK_HDR_LEN, BLK_W_FIRST, BLK_W_NUM_PKTS, BLK_W_STATUS, ETHER_TYPE_VLAN,
                     PKT_HDR_LEN, PKT_W_LEN, PKT_W_MAC_NET, PKT_W_NEXT, PKT_W_SNAPLEN,
                     PKT_W_STATUS, PKT_W_VLAN_TCI, PKT_W_VLAN_TPID, RC_BLOCK_NR, RC_BLOCK_SIZE,
                     RC_FD, RC_FLAGS, RC_MBUF_CAP, RC_POOL, RC_PORT, RC_RING, RS_BAD_RING,
                     RS_BLK, RS_BLOCKS, RS_BYTES, RS_ERRORS, RS_NOMBUF, RS_NPK, RS_OFF,
                     RS_PACKETS, RS_PKT, RS_TRUNCATED, RS_WAITS, RX_L4_CKSUM_GOOD,
                     RX_L4_CKSUM_NONE, RX_LRO, RX_MAX_BURST, RX_VLAN, RX_VLAN_STRIPPED,
                     RXF_VLAN_STRIP, TP_STATUS_CSUM_VALID, TP_STATUS_CSUMNOTREADY,
                     TP_STATUS_GSO_TCP, TP_STATUS_KERNEL, TP_STATUS_USER,
                     TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID, VLAN_HLEN)

__all__ = ["af_packet_rx_burst", "af_packet_rx_wait", "rx_ready"]

MIN_PKT_SPACE = 8       # the least room a packet can take in a block (tp_next_offset >= 8)


@kernel(inline="always")
def _block(q, b):
    bsz = q.cfg[RC_BLOCK_SIZE]
    base = q.cfg[RC_RING] + b * bsz
    return base, addr_view(base, bsz // 4, np.uint32)


@kernel(inline="always")
def _tag_inserted(meta, strip):
    """Whether a frame with status/VLAN word ``meta`` gets its tag put back into the data."""
    return (meta & TP_STATUS_VLAN_VALID) != 0 and not strip


@kernel
def rx_ready(q):
    """True when the block at the queue's cursor holds frames for us (no system call)."""
    b = q.st[RS_BLK]
    base, w = _block(q, b)
    return (load_acquire(w, BLK_W_STATUS) & TP_STATUS_USER) != 0


@kernel
def rx_gather(q, n, strip):
    """Pass 1: note up to ``n`` deliverable frames in scratch.  Returns ``(frames, segments,
    dropped, bad, b, pi, off, npk, released)``: the cursor after them and the number of
    blocks consumed whole (from the cursor's block on), to be committed by the caller."""
    bsz = q.cfg[RC_BLOCK_SIZE]
    nblk = q.cfg[RC_BLOCK_NR]
    cap = q.cfg[RC_MBUF_CAP]
    maxseg = np.int64(q.scr_mb.size)
    b = q.st[RS_BLK]
    pi = q.st[RS_PKT]
    off = q.st[RS_OFF]
    npk = q.st[RS_NPK]
    got = 0
    segs = np.int64(0)
    dropped = 0
    bad = 0
    released = 0
    base, w = _block(q, b)
    while got < n:
        if npk < 0:                               # a block not opened yet
            if released >= nblk:
                break
            if (load_acquire(w, BLK_W_STATUS) & TP_STATUS_USER) == 0:
                break                             # still the kernel's
            npk = np.int64(w[BLK_W_NUM_PKTS])
            off = np.int64(w[BLK_W_FIRST])
            pi = 0
            if off < BLK_HDR_LEN or off > bsz or (off & 3) != 0 or \
                    npk > (bsz - off) // MIN_PKT_SPACE:
                bad += 1                          # nothing in it can be trusted: skip it
                npk = 0
        if pi >= npk:                             # block done: the next one
            released += 1
            b = b + 1 if b + 1 < nblk else 0
            npk = -1
            base, w = _block(q, b)
            continue
        if off + PKT_HDR_LEN > bsz or (off & 3) != 0:
            bad += 1                              # a header outside the block: drop the rest
            pi = npk
            continue
        h = off >> 2
        nxt = np.int64(w[h + PKT_W_NEXT])
        snap = np.int64(w[h + PKT_W_SNAPLEN])
        tlen = np.int64(w[h + PKT_W_LEN])
        status = np.int64(w[h + PKT_W_STATUS])
        mac = np.int64(w[h + PKT_W_MAC_NET] & 0xFFFF)
        if off + mac + snap > bsz or (pi + 1 < npk and nxt < MIN_PKT_SPACE):
            bad += 1                              # data outside the block, or no progress
            pi = npk
            continue
        if snap < tlen:
            dropped += 1                          # clamped by the kernel: never deliver it cut
        else:
            tag = (status & TP_STATUS_VLAN_VALID) != 0 and not strip and snap >= 12
            ln = snap + VLAN_HLEN if tag else snap
            k = (ln + cap - 1) // cap if ln > 0 else np.int64(1)
            if segs + k > maxseg or k > MAX_SEGS:
                if got == 0:
                    dropped += 1                  # can never fit a burst: drop it
                else:
                    break                         # the next burst takes it
            else:
                tci = np.int64(w[h + PKT_W_VLAN_TCI] & 0xFFFF)
                tpid = np.int64(w[h + PKT_W_VLAN_TPID] & 0xFFFF)
                if (status & TP_STATUS_VLAN_TPID_VALID) == 0:
                    tpid = ETHER_TYPE_VLAN
                if (status & TP_STATUS_VLAN_VALID) != 0 and not tag and not strip:
                    status &= ~np.int64(TP_STATUS_VLAN_VALID)   # too short to put it back
                q.scr_src[got] = base + off + mac
                q.scr_len[got] = snap
                q.scr_meta[got] = (status & 0xFFFFFFFF) | (tci << 32) | (tpid << 48)
                got += 1
                segs += k
        pi += 1
        off += nxt
    if npk >= 0 and pi >= npk and released < nblk:
        released += 1                             # the last block is done too: hand it back
        b = b + 1 if b + 1 < nblk else 0
        npk = -1
    return got, segs, dropped, bad, b, pi, off, npk, released


@kernel(inline="always")
def rx_copy_frame(mb, q, k, src, ln, meta, cap, lo, size, strip):
    """Copy one frame of ``ln`` bytes at ``src`` into the mbufs ``scr_mb[k:]`` (chained),
    putting a VLAN tag back after byte 12 when ``meta`` says one was stripped (unless
    ``strip``).  Returns ``(k after, segments, packet length)``."""
    mbs = q.scr_mb
    h = mbs[k]
    m = mb[h]
    dst = np.int64(m.buf_addr) + np.int64(m.data_off)
    used = np.int64(0)
    rem = ln
    if _tag_inserted(meta, strip):
        copy_in_bounds(dst, np.int64(m.buf_addr), np.int64(m.buf_len), src, lo, size, 12)
        tpid = (meta >> 48) & 0xFFFF
        tci = (meta >> 32) & 0xFFFF
        store_u8(dst + 12, tpid >> 8)
        store_u8(dst + 13, tpid & 0xFF)
        store_u8(dst + 14, tci >> 8)
        store_u8(dst + 15, tci & 0xFF)
        used = np.int64(16)
        src += 12
        rem -= 12
    nb = np.int64(1)
    plen = used + rem
    seg = h
    while True:
        c = cap - used
        if c > rem:
            c = rem
        copy_in_bounds(dst + used, np.int64(m.buf_addr), np.int64(m.buf_len), src, lo, size, c)
        used += c
        src += c
        rem -= c
        m.data_len = used
        if rem == 0:
            break
        k += 1
        nxt = mbs[k]
        m.next = nxt
        seg = nxt
        m = mb[seg]
        dst = np.int64(m.buf_addr) + np.int64(m.data_off)
        used = 0
        nb += 1
    return k + 1, nb, plen


@kernel
def rx_fill(dom, q, out, got):
    """Pass 2: copy the gathered frames into the allocated mbufs; returns the bytes."""
    mb = dom.mb
    port = q.cfg[RC_PORT]
    cap = q.cfg[RC_MBUF_CAP]
    strip = (q.cfg[RC_FLAGS] & RXF_VLAN_STRIP) != 0
    lo = q.cfg[RC_RING]
    size = q.cfg[RC_BLOCK_SIZE] * q.cfg[RC_BLOCK_NR]
    k = 0
    nbytes = np.int64(0)
    for p in range(got):
        meta = q.scr_meta[p]
        h = q.scr_mb[k]
        k, nb, plen = rx_copy_frame(mb, q, k, q.scr_src[p], q.scr_len[p], meta, cap, lo,
                                    size, strip)
        m = mb[h]
        m.pkt_len = plen
        m.nb_segs = nb
        m.port = port
        fl = np.uint64(0)
        if (meta & TP_STATUS_VLAN_VALID) != 0:
            m.vlan_tci = (meta >> 32) & 0xFFFF
            fl |= np.uint64(RX_VLAN | RX_VLAN_STRIPPED) if strip else np.uint64(RX_VLAN)
        if (meta & TP_STATUS_CSUMNOTREADY) != 0:
            fl |= np.uint64(RX_L4_CKSUM_NONE)
        elif (meta & TP_STATUS_CSUM_VALID) != 0:
            fl |= np.uint64(RX_L4_CKSUM_GOOD)
        if (meta & TP_STATUS_GSO_TCP) != 0:
            fl |= np.uint64(RX_LRO)
        m.ol_flags = fl
        out[p] = h
        nbytes += plen
    return nbytes


@kernel
def af_packet_rx_burst(dom, q, lcore, out, n):
    """Receive up to ``n`` frames into ``out[:n]`` (clamped to ``out.size`` and 1024);
    returns how many.  Never blocks and makes no system call."""
    if n > out.size:
        n = out.size
    if n > RX_MAX_BURST:
        n = RX_MAX_BURST
    if n <= 0:
        return 0
    strip = (q.cfg[RC_FLAGS] & RXF_VLAN_STRIP) != 0
    b0 = q.st[RS_BLK]
    got, segs, dropped, bad, b, pi, off, npk, released = rx_gather(q, n, strip)
    nbytes = np.int64(0)
    if got > 0:
        if pktmbuf_alloc_bulk(dom, q.cfg[RC_POOL], lcore, q.scr_mb, segs) < 0:
            q.st[RS_NOMBUF] += 1
            return 0                              # nothing consumed: the frames wait
        nbytes = rx_fill(dom, q, out, got)
    nblk = q.cfg[RC_BLOCK_NR]
    bb = b0
    for _ in range(released):                     # blocks consumed whole go back, in order
        base, w = _block(q, bb)
        store_release(w, BLK_W_STATUS, TP_STATUS_KERNEL)
        bb = bb + 1 if bb + 1 < nblk else 0
    st = q.st
    st[RS_BLK] = b
    st[RS_PKT] = pi
    st[RS_OFF] = off
    st[RS_NPK] = npk
    st[RS_BLOCKS] += released
    st[RS_PACKETS] += got
    st[RS_BYTES] += nbytes
    st[RS_TRUNCATED] += dropped
    st[RS_BAD_RING] += bad
    st[RS_ERRORS] += dropped + bad
    return got


@kernel
def af_packet_rx_wait(q, timeout_ms):
    """Block until the Rx queue has frames or ``timeout_ms`` passes (-1: forever).  Returns
    1 when frames are waiting (at once, without a system call, if they already are), 0 on
    timeout, ``-errno`` (e.g. ``-ENETDOWN`` once after the link went down)."""
    if rx_ready(q):
        return 1
    q.st[RS_WAITS] += 1
    rc = fd_poll(q.cfg[RC_FD], POLLIN | POLLERR, timeout_ms)
    if rx_ready(q):
        return 1
    if rc < 0:
        return rc
    if (rc & POLLERR) != 0:
        return -sock_error(q.cfg[RC_FD])          # reading it clears it: the next wait sleeps
    return 0
