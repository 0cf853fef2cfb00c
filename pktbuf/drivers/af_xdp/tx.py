"""``af_xdp_tx_burst``: mbufs sent through an AF_XDP Tx ring, their buffers used in place.

A packet whose single direct segment is a buffer of the UMEM's pool, held by the caller alone
(``refcnt`` 1) and inside the chunk, is sent from where it is: its descriptor is the UMEM
address of its data, and the mbuf stays the port's (``OWN_TX``) until the kernel returns
that address on the completion ring.  Any other packet -- from another pool, indirect,
chained, shared -- is copied into a fresh mbuf of the UMEM's pool, as DPDK's ``net_af_xdp``
does, and the original is freed.

Per burst: drain the completion ring (each address checked against the frames on the Tx
ring, then all freed with one run-grouped ``pktmbuf_free_bulk``), fill Tx descriptors up to
the ring's free room, publish the producer (release), and when the kernel flagged the Tx ring
``NEED_WAKEUP`` (always in copy mode) kick it with ``sendto(MSG_DONTWAIT)`` -- again while it
answers ``EAGAIN`` (copy mode sends 32 frames per call), a bounded number of times.  A packet
that cannot be sent (shorter than an Ethernet header, longer than MTU + 14 (+ 4 if 802.1Q)
or than a chunk holds) is taken, freed and counted in oerrors; a handle whose frame the
kernel holds (the caller does not own it) is taken and counted, and left alone.  ``ENETDOWN``
and other kick errors are counted (``TS_KICK_ERRORS``, ``TS_LAST_ERRNO``); the descriptors
stay on the ring and go out with a later kick.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...block import block_at
from ...buf.mbuf.free import pktmbuf_free_bulk
from ...buf.mbuf.layout import F_NOT_DIRECT, NULL
from ...buf.mbuf.raw import mbuf_raw_alloc, pktmbuf_raw_reset
from ...rawmem import addr_view, copy_in_bounds, load_u8
from ...syscalls import tx_kick
from .layout import (OWN_TX, OWN_USER, R_CONS, R_DESC, R_PROD, R_SIZE, TC_COMP, TC_FD, TC_TX,
                     TC_UMEM, TS_BAD_COMP, TS_BYTES, TS_COMPLETED, TS_COMP_CONS, TS_COMP_PROD,
                     TS_COPIED, TS_ERRORS, TS_FULL, TS_INFLIGHT, TS_KICKS, TS_KICK_ERRORS,
                     TS_LAST_ERRNO, TS_NOMBUF, TS_NOT_OWNED, TS_PACKETS, TS_RUNT, TS_TOO_LONG,
                     TS_TX_CONS, TS_TX_PROD, TX_MAX_BURST, U_CHUNK, U_MAX_LEN, U_OBJ_BASE, U_POOL,
                     U_RX_OFF)
from .ring import ring_entries, ring_free, ring_load, ring_needs_wakeup, ring_publish
from .umem import umem_buf_addr, umem_release, umem_tx_frame

__all__ = ["af_xdp_tx_burst", "af_xdp_complete", "af_xdp_tx_release"]

EAGAIN = 11
EBUSY = 16
ENOBUFS = 105
ETHER_HDR_LEN = 14
ETHER_TYPE_VLAN = 0x8100
KICK_ROUNDS = 64        # sendto() calls per burst at most (32 frames each in copy mode)


@kernel(inline="always")
def _umem(q):
    return block_at(q.cfg[TC_UMEM], "af_xdp_umem")


@kernel
def af_xdp_complete(dom, q, lcore):
    """Take every address off the completion ring and free those frames; returns how many
    were freed."""
    st = q.st
    cfg = q.cfg
    cons = st[TS_COMP_CONS]
    prod = ring_load(cfg, TC_COMP, R_PROD)
    st[TS_COMP_PROD] = prod
    avail = ring_entries(prod, cons)
    if avail == 0:
        return 0
    u = _umem(q)
    base = u.cfg[U_OBJ_BASE]
    size = cfg[TC_COMP + R_SIZE]
    mask = size - 1
    ring = addr_view(cfg[TC_COMP + R_DESC], size, np.uint64)
    cap = q.scr_comp.size
    if avail > cap:
        avail = cap
    nb = 0
    bad = 0
    for i in range(avail):
        k = umem_tx_frame(u, np.int64(ring[(cons + i) & mask]), OWN_TX)
        if k < 0:
            bad += 1
            continue
        u.own[k] = OWN_USER
        q.scr_comp[nb] = np.int32(base + k)
        nb += 1
    cons = (cons + avail) & 0xFFFFFFFF
    ring_publish(cfg, TC_COMP, R_CONS, cons)
    st[TS_COMP_CONS] = cons
    st[TS_BAD_COMP] += bad
    st[TS_INFLIGHT] -= nb
    st[TS_COMPLETED] += nb
    if nb > 0:
        pktmbuf_free_bulk(dom, lcore, q.scr_comp, nb)
    return nb


@kernel(inline="always")
def _frame_len(mb, h, max_len, room):
    """Bytes packet ``h`` needs, -1 (runt) or -2 (too long)."""
    m = mb[h]
    ln = np.int64(m.pkt_len)
    if ln < ETHER_HDR_LEN or m.data_len < 1:
        return np.int64(-1)
    tagged = False
    if m.data_len >= ETHER_HDR_LEN:
        p = np.int64(m.buf_addr) + np.int64(m.data_off)
        tagged = ((np.int64(load_u8(p + 12)) << 8) | np.int64(load_u8(p + 13))) == ETHER_TYPE_VLAN
    if ln > (max_len + 4 if tagged else max_len) or ln > room:
        return np.int64(-2)
    return ln


@kernel(inline="always")
def _copy_packet(mb, h, dst, room):
    """Copy packet ``h``'s segments to ``dst`` (``room`` bytes); returns the bytes."""
    done = np.int64(0)
    seg = np.int64(h)
    while seg != NULL:
        s = mb[seg]
        c = np.int64(s.data_len)
        if c > room - done:
            c = room - done
        copy_in_bounds(dst + done, dst, room, np.int64(s.buf_addr) + np.int64(s.data_off),
                       np.int64(s.buf_addr), np.int64(s.buf_len), c)
        done += c
        seg = np.int64(s.next)
    return done


@kernel
def af_xdp_tx_burst(dom, q, lcore, pkts, n):
    """Send up to ``n`` packets from ``pkts[:n]``; returns how many were taken (on the Tx
    ring, or dropped as unsendable).  ``pkts[k:]`` stay yours."""
    if n > pkts.size:
        n = pkts.size
    if n > TX_MAX_BURST:
        n = TX_MAX_BURST
    st = q.st
    cfg = q.cfg
    if st[TS_INFLIGHT] > 0:
        af_xdp_complete(dom, q, lcore)
    if n <= 0:
        return 0
    u = _umem(q)
    mb = dom.mb
    pid = u.cfg[U_POOL]
    base = u.cfg[U_OBJ_BASE]
    nobj = u.own.size
    chunk = u.cfg[U_CHUNK]
    rx_off = u.cfg[U_RX_OFF]
    max_len = u.cfg[U_MAX_LEN]
    size = cfg[TC_TX + R_SIZE]
    mask = size - 1
    ring = addr_view(cfg[TC_TX + R_DESC], size * 2, np.uint64)
    prod = st[TS_TX_PROD]
    room = ring_free(size, prod, st[TS_TX_CONS])
    if room < n:
        st[TS_TX_CONS] = ring_load(cfg, TC_TX, R_CONS)
        room = ring_free(size, prod, st[TS_TX_CONS])
    taken = 0
    queued = 0
    nfree = 0
    copied = 0
    nbytes = np.int64(0)
    while taken < n:
        h = np.int64(pkts[taken])
        m = mb[h]
        k = h - base
        if k >= 0 and k < nobj and u.own[k] != OWN_USER:
            # a frame the kernel holds (posted for Rx, or on the Tx ring): not the caller's
            # to send; taken and counted, never freed or posted twice
            st[TS_NOT_OWNED] += 1
            st[TS_ERRORS] += 1
            taken += 1
            continue
        direct = (k >= 0 and k < nobj and m.nb_segs == 1 and m.refcnt == 1
                  and (np.uint64(m.ol_flags) & np.uint64(F_NOT_DIRECT)) == 0
                  and np.int64(m.pool) == pid
                  and np.int64(m.data_off) + np.int64(m.data_len) <= chunk)
        ln = _frame_len(mb, h, max_len, chunk if direct else chunk - rx_off)
        if ln < 0:
            st[TS_RUNT if ln == -1 else TS_TOO_LONG] += 1
            st[TS_ERRORS] += 1
            q.scr_free[nfree] = np.int32(h)
            nfree += 1
            taken += 1
            continue
        if room <= 0:
            st[TS_FULL] += 1
            break
        if direct:
            ln = np.int64(m.data_len)
            addr = umem_buf_addr(u, k) + np.int64(m.data_off)
        else:
            c = mbuf_raw_alloc(dom, pid, lcore)
            if c < 0:
                st[TS_NOMBUF] += 1
                break
            pktmbuf_raw_reset(dom, c, rx_off)
            k = c - base
            cm = mb[c]
            dst = np.int64(cm.buf_addr) + rx_off
            ln = _copy_packet(mb, h, dst, chunk - rx_off)
            addr = umem_buf_addr(u, k) + rx_off
            q.scr_free[nfree] = np.int32(h)
            nfree += 1
            copied += 1
        u.own[k] = OWN_TX
        s = (prod & mask) * 2
        ring[s] = np.uint64(addr)
        ring[s + 1] = np.uint64(ln)
        prod = (prod + 1) & 0xFFFFFFFF
        room -= 1
        queued += 1
        taken += 1
        nbytes += ln
    if queued > 0:
        ring_publish(cfg, TC_TX, R_PROD, prod)
        st[TS_TX_PROD] = prod
        st[TS_INFLIGHT] += queued
    pending = queued > 0 or ring_load(cfg, TC_TX, R_CONS) != prod
    if pending and ring_needs_wakeup(cfg, TC_TX):
        for _ in range(KICK_ROUNDS):
            st[TS_KICKS] += 1
            rc = tx_kick(cfg[TC_FD])
            if rc != -EAGAIN:
                if rc < 0 and rc != -EBUSY and rc != -ENOBUFS:
                    st[TS_KICK_ERRORS] += 1
                    st[TS_LAST_ERRNO] = -rc
                break
            af_xdp_complete(dom, q, lcore)
    st[TS_PACKETS] += queued
    st[TS_BYTES] += nbytes
    st[TS_COPIED] += copied
    if nfree > 0:
        pktmbuf_free_bulk(dom, lcore, q.scr_free, nfree)
    return taken


@kernel
def af_xdp_tx_release(dom, q, lcore):
    """After the socket is closed: every frame still on the Tx side goes back to the pool.
    Returns how many."""
    cnt = umem_release(dom, lcore, _umem(q), OWN_TX, q.scr_comp)
    q.st[TS_INFLIGHT] -= cnt
    return cnt
