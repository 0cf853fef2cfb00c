"""``af_packet_tx_burst``: mbufs copied into a TPACKET_V3 Tx ring, sent with one ``sendto``.

The Tx ring is ``frame_nr`` fixed frames; the kernel sends them in ring order from its own
head and stops at the first frame not marked ``TP_STATUS_SEND_REQUEST``, so the burst fills
frames in order from its cursor.  Per packet: check the frame is ours again
(``TP_STATUS_AVAILABLE``, or ``WRONG_FORMAT`` for a frame the kernel refused -- read with
acquire ordering, the timestamp bits masked as DPDK does), copy the segments to frame + 48
(putting ``vlan_tci`` in after the MAC addresses if ``TX_VLAN`` is set), write ``tp_len``,
then store ``SEND_REQUEST`` with release ordering.  After the burst one
``sendto(fd, NULL, 0, MSG_DONTWAIT)`` asks the kernel to send them; every packet taken is
then freed with one ``pktmbuf_free_bulk`` (the ring holds copies).

What a burst takes: packets from the front until one finds its frame still the kernel's
(``TS_FULL``; it and the rest stay the caller's).  A packet that cannot be sent as it is --
shorter than an Ethernet header, or longer than the link's MTU allows (MTU + 14, + 4 when
802.1Q-tagged, as the kernel counts) or than a frame holds (frame size - 48) -- is taken,
freed and counted in ``oerrors`` (``TS_RUNT``, ``TS_TOO_LONG``), never truncated.
``ENOBUFS``/``EAGAIN`` from ``sendto`` leave the frames marked for the next kick; other errors (``ENETDOWN`` on a link that is down) are
counted in ``TS_KICK_ERRORS`` -- the frames stay marked and go out on a later kick once the
link is back, and a ring that stays full makes the bursts take nothing.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_acquire, store_release
from ...buf.mbuf.free import pktmbuf_free_bulk
from ...buf.mbuf.layout import NULL
from ...rawmem import addr_view, copy_in_bounds, load_u8, store_u8
from ...syscalls import tx_kick
from .layout import (ETHER_HDR_LEN, ETHER_TYPE_VLAN, PKT_W_LEN, PKT_W_NEXT,
                     PKT_W_SNAPLEN, PKT_W_STATUS, TC_BLOCK_SIZE, TC_FD, TC_FPB, TC_FRAME_NR,
                     TC_FRAME_SIZE, TC_MAX_LEN, TC_RING, TP_STATUS_AVAILABLE,
                     TP_STATUS_SEND_REQUEST, TP_STATUS_TS_MASK, TP_STATUS_WRONG_FORMAT,
                     TS_BYTES, TS_ERRORS, TS_FULL, TS_HEAD, TS_KICK_ERRORS, TS_KICKS,
                     TS_LAST_ERRNO, TS_PACKETS, TS_RUNT, TS_TOO_LONG, TX_DATA_OFF, TX_VLAN,
                     VLAN_HLEN)

__all__ = ["af_packet_tx_burst"]

ENOBUFS = 105
EAGAIN = 11


@kernel(inline="always")
def _frame(q, f):
    fsz = q.cfg[TC_FRAME_SIZE]
    fpb = q.cfg[TC_FPB]
    a = q.cfg[TC_RING] + (f // fpb) * q.cfg[TC_BLOCK_SIZE] + (f % fpb) * fsz
    return a, addr_view(a, fsz // 4, np.uint32)


@kernel(inline="always")
def tx_frame_len(mb, h, max_len, room):
    """The bytes packet ``h`` takes in a frame (``vlan_tci`` inserted if ``TX_VLAN``), or -1
    (too short) / -2 (too long: more than ``max_len`` + a tag if tagged, or than ``room``)."""
    m = mb[h]
    ln = np.int64(m.pkt_len)
    ins = (np.uint64(m.ol_flags) & np.uint64(TX_VLAN)) != 0
    tagged = ins
    if not tagged and m.data_len >= ETHER_HDR_LEN:
        p = np.int64(m.buf_addr) + np.int64(m.data_off)
        et = (np.int64(load_u8(p + 12)) << 8) | np.int64(load_u8(p + 13))
        tagged = et == ETHER_TYPE_VLAN      # the kernel allows 4 more bytes for 802.1Q only
    if ln < ETHER_HDR_LEN or m.data_len < (ETHER_HDR_LEN if ins else 1):
        return np.int64(-1)
    if ins:
        ln += VLAN_HLEN
    if ln > (max_len + VLAN_HLEN if tagged else max_len) or ln > room:
        return np.int64(-2)
    return ln


@kernel(inline="always")
def tx_copy_packet(mb, h, dst, room, ln):
    """Copy packet ``h``'s segments (and its tag when ``TX_VLAN``) to ``dst``, at most
    ``ln`` bytes into a frame area of ``room`` bytes; returns the bytes written."""
    m = mb[h]
    done = np.int64(0)
    ins = (np.uint64(m.ol_flags) & np.uint64(TX_VLAN)) != 0
    tci = np.int64(m.vlan_tci)
    seg = np.int64(h)
    first = True
    while seg != NULL and done < ln:
        s = mb[seg]
        src = np.int64(s.buf_addr) + np.int64(s.data_off)
        c = np.int64(s.data_len)
        if first and ins:
            copy_in_bounds(dst, dst, room, src, np.int64(s.buf_addr), np.int64(s.buf_len), 12)
            store_u8(dst + 12, ETHER_TYPE_VLAN >> 8)
            store_u8(dst + 13, ETHER_TYPE_VLAN & 0xFF)
            store_u8(dst + 14, tci >> 8)
            store_u8(dst + 15, tci & 0xFF)
            done = 16
            src += 12
            c -= 12
        first = False
        if c > ln - done:
            c = ln - done
        copy_in_bounds(dst + done, dst, room, src, np.int64(s.buf_addr), np.int64(s.buf_len), c)
        done += c
        seg = np.int64(s.next)
    return done


@kernel
def af_packet_tx_burst(dom, q, lcore, pkts, n):
    """Send up to ``n`` packets from ``pkts[:n]``; returns how many were taken (copied into
    the ring, or dropped as unsendable -- freed either way).  ``pkts[k:]`` stay yours."""
    if n > pkts.size:
        n = pkts.size
    if n <= 0:
        return 0
    mb = dom.mb
    fnr = q.cfg[TC_FRAME_NR]
    room = q.cfg[TC_FRAME_SIZE] - TX_DATA_OFF
    max_len = q.cfg[TC_MAX_LEN]
    st = q.st
    head = st[TS_HEAD]
    taken = 0
    queued = 0
    nbytes = np.int64(0)
    full = False
    while taken < n:
        h = np.int64(pkts[taken])
        ln = tx_frame_len(mb, h, max_len, room)
        if ln < 0:
            st[TS_RUNT if ln == -1 else TS_TOO_LONG] += 1
            st[TS_ERRORS] += 1
            taken += 1
            continue
        a, w = _frame(q, head)
        fs = np.int64(load_acquire(w, PKT_W_STATUS)) & ~np.int64(TP_STATUS_TS_MASK)
        if fs != TP_STATUS_AVAILABLE and fs != TP_STATUS_WRONG_FORMAT:
            full = True
            break
        ln = tx_copy_packet(mb, h, a + TX_DATA_OFF, room, ln)
        w[PKT_W_NEXT] = 0
        w[PKT_W_SNAPLEN] = ln
        w[PKT_W_LEN] = ln
        store_release(w, PKT_W_STATUS, TP_STATUS_SEND_REQUEST)
        head = head + 1 if head + 1 < fnr else 0
        queued += 1
        taken += 1
        nbytes += ln
    st[TS_HEAD] = head
    if full:
        st[TS_FULL] += 1
    if queued > 0 or full:              # a full ring may hold frames an earlier kick left
        st[TS_KICKS] += 1
        rc = tx_kick(q.cfg[TC_FD])
        if rc < 0 and rc != -ENOBUFS and rc != -EAGAIN:
            st[TS_KICK_ERRORS] += 1
            st[TS_LAST_ERRNO] = -rc
    st[TS_PACKETS] += queued
    st[TS_BYTES] += nbytes
    if taken > 0:
        pktmbuf_free_bulk(dom, lcore, pkts, taken)
    return taken
