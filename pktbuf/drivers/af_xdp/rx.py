"""``af_xdp_rx_burst``: received frames taken from an AF_XDP Rx ring as mbufs, no copy.

The frames the kernel receives into are mbuf buffers of the pool the UMEM is built on.  The
fill ring is kept stocked with ``RC_TARGET`` frames (fill ring + Rx ring): a refill takes the
mbufs it needs from the pool with one ``pktmbuf_alloc_bulk`` (at least ``FILL_BATCH``), marks
each ``OWN_FILL`` and writes its buffer's UMEM address, then publishes the fill producer with a
release store.

A burst reads the kernel's Rx producer (acquire; only when the cached view is short), and for
each descriptor finds the mbuf from the address -- the address checked (:mod:`.umem`): a
buffer start of the pool, an offset and length inside the chunk, a frame the kernel holds --
sets ``data_off`` (the kernel's 256-byte XDP headroom and the UMEM headroom),
``data_len``/``pkt_len`` and ``port``, and hands it over.  Then it publishes the Rx consumer
(release) and refills.  A descriptor that fails the check is counted (``RS_BAD_DESC``,
ierrors); if it named a frame we posted, that mbuf goes back to the pool, so none is lost.

An empty Rx ring costs one load, plus a ``recvfrom(MSG_DONTWAIT)`` when busy polling is on
(DPDK's ``busy_budget``) or the kernel flagged the fill ring ``NEED_WAKEUP``.

Coalescing (``RC_COALESCE_NS`` > 0, off by default): the kernel publishes Rx frames as it
receives them, so a receiver that polls often takes them one or two per burst and pays the
burst's fixed cost (the cache lines the kernel wrote) for each.  With coalescing a burst that
finds fewer than ``RC_BATCH`` frames leaves them in the ring until the first of them has
waited ``RC_COALESCE_NS`` -- the trade an AF_PACKET V3 block ring makes with its retire timer:
a bounded added latency for fewer, fuller bursts.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...block import block_at
from ...idle import now_ns
from ...buf.mbuf.free import pktmbuf_free_bulk
from ...buf.mbuf.raw import pktmbuf_alloc_bulk
from ...rawmem import addr_view
from ...syscalls import POLLIN, fd_poll, rx_kick
from .layout import (FILL_BATCH, OWN_FILL, OWN_USER, RC_BATCH, RC_COALESCE_NS, RC_FD, RC_FILL,
                     RC_FLAGS, RC_PORT, RC_RX, RC_TARGET, RC_UMEM, RS_BAD_DESC, RS_BURSTS, RS_BYTES,
                     RS_ERRORS, RS_FILLED, RS_FILL_CONS, RS_FILL_FULL, RS_FILL_PROD, RS_HELD_SINCE,
                     RS_NOMBUF, RS_PACKETS, RS_POSTED, RS_RX_CONS, RS_RX_PROD, RS_WAITS, RS_WAKEUPS,
                     RXF_BUSY_POLL, RX_MAX_BURST, R_CONS, R_DESC, R_PROD, R_SIZE, U_OBJ_BASE,
                     U_POOL)
from .ring import ring_entries, ring_free, ring_load, ring_needs_wakeup, ring_publish
from .umem import umem_buf_addr, umem_release, umem_rx_frame

__all__ = ["af_xdp_rx_burst", "af_xdp_fill", "af_xdp_rx_wait", "af_xdp_rx_count",
           "af_xdp_rx_release"]

E_NOENT = -2
E_NOSPC = -28


@kernel(inline="always")
def _umem(q):
    return block_at(q.cfg[RC_UMEM], "af_xdp_umem")


@kernel
def af_xdp_fill(dom, q, lcore, n):
    """Post up to ``n`` more frames to the fill ring (fewer if it has less room, or if that
    would hold more than ``RC_TARGET`` frames); returns how many, ``-ENOSPC`` when the fill
    ring has no room at all, ``-ENOENT`` when the pool cannot give them (nothing posted)."""
    st = q.st
    cfg = q.cfg
    size = cfg[RC_FILL + R_SIZE]
    prod = st[RS_FILL_PROD]
    room = ring_free(size, prod, st[RS_FILL_CONS])
    if room < n:
        st[RS_FILL_CONS] = ring_load(cfg, RC_FILL, R_CONS)
        room = ring_free(size, prod, st[RS_FILL_CONS])
    want = cfg[RC_TARGET] - st[RS_POSTED]
    if n > want:
        n = want
    if n > q.scr.size:
        n = np.int64(q.scr.size)
    if n > room:
        n = room
    if n <= 0:
        if room <= 0:
            st[RS_FILL_FULL] += 1
            return E_NOSPC
        return 0
    u = _umem(q)
    if pktmbuf_alloc_bulk(dom, u.cfg[U_POOL], lcore, q.scr, n) < 0:
        st[RS_NOMBUF] += 1
        return E_NOENT
    base = u.cfg[U_OBJ_BASE]
    mask = size - 1
    ring = addr_view(cfg[RC_FILL + R_DESC], size, np.uint64)
    for i in range(n):
        k = np.int64(q.scr[i]) - base
        u.own[k] = OWN_FILL
        ring[(prod + i) & mask] = np.uint64(umem_buf_addr(u, k))
    prod = (prod + n) & 0xFFFFFFFF
    ring_publish(cfg, RC_FILL, R_PROD, prod)
    st[RS_FILL_PROD] = prod
    st[RS_POSTED] += n
    st[RS_FILLED] += n
    return n


@kernel(inline="always")
def _refill(dom, q, lcore):
    """Top the fill ring up once ``FILL_BATCH`` frames are missing (never one by one: each
    refill moves the ring's producer line to this CPU and back)."""
    miss = q.cfg[RC_TARGET] - q.st[RS_POSTED]
    if miss >= FILL_BATCH:
        af_xdp_fill(dom, q, lcore, miss)


@kernel
def af_xdp_rx_burst(dom, q, lcore, out, n):
    """Receive up to ``n`` frames into ``out[:n]`` (clamped to ``out.size`` and 1024);
    returns how many.  Never blocks."""
    if n > out.size:
        n = out.size
    if n > RX_MAX_BURST:
        n = RX_MAX_BURST
    if n <= 0:
        return 0
    st = q.st
    cfg = q.cfg
    cons = st[RS_RX_CONS]
    avail = ring_entries(st[RS_RX_PROD], cons)
    if avail < n:
        st[RS_RX_PROD] = ring_load(cfg, RC_RX, R_PROD)
        avail = ring_entries(st[RS_RX_PROD], cons)
    if avail == 0:
        _refill(dom, q, lcore)
        if (cfg[RC_FLAGS] & RXF_BUSY_POLL) != 0 or ring_needs_wakeup(cfg, RC_FILL):
            st[RS_WAKEUPS] += 1
            rx_kick(cfg[RC_FD])
        return 0
    if avail > n:
        avail = n
    hold = cfg[RC_COALESCE_NS]
    if hold > 0:
        if avail < cfg[RC_BATCH]:
            t = now_ns()
            since = st[RS_HELD_SINCE]
            if since == 0:
                st[RS_HELD_SINCE] = t
                return 0
            if t - since < hold:
                return 0
        st[RS_HELD_SINCE] = 0
    u = _umem(q)
    mb = dom.mb
    base = u.cfg[U_OBJ_BASE]
    port = cfg[RC_PORT]
    size = cfg[RC_RX + R_SIZE]
    mask = size - 1
    ring = addr_view(cfg[RC_RX + R_DESC], size * 2, np.uint64)
    got = 0
    bad = 0
    nbad_mb = 0
    nbytes = np.int64(0)
    for i in range(avail):
        s = ((cons + i) & mask) * 2
        addr = np.int64(ring[s])
        ln = np.int64(ring[s + 1] & np.uint64(0xFFFFFFFF))
        k, off = umem_rx_frame(u, addr, ln, OWN_FILL)
        if k < 0:
            bad += 1
            # a frame we did post, named with a bad length or offset: back to the pool
            k2, _o = umem_rx_frame(u, addr & 0xFFFFFFFFFFFF, np.int64(1), OWN_FILL)
            if k2 >= 0:
                u.own[k2] = OWN_USER
                q.scr[nbad_mb] = np.int32(base + k2)
                nbad_mb += 1
            continue
        u.own[k] = OWN_USER
        h = base + k
        m = mb[h]
        m.data_off = off
        m.data_len = ln
        m.pkt_len = ln
        m.port = port
        out[got] = h
        got += 1
        nbytes += ln
    cons = (cons + avail) & 0xFFFFFFFF
    ring_publish(cfg, RC_RX, R_CONS, cons)
    st[RS_RX_CONS] = cons
    st[RS_POSTED] -= got + nbad_mb
    st[RS_PACKETS] += got
    st[RS_BURSTS] += 1
    st[RS_BYTES] += nbytes
    st[RS_BAD_DESC] += bad
    st[RS_ERRORS] += bad
    if nbad_mb > 0:
        pktmbuf_free_bulk(dom, lcore, q.scr, nbad_mb)
    _refill(dom, q, lcore)
    return got


@kernel
def af_xdp_rx_count(q):
    """Frames waiting in the Rx ring (``rte_eth_rx_queue_count``)."""
    return ring_entries(ring_load(q.cfg, RC_RX, R_PROD), q.st[RS_RX_CONS])


@kernel
def af_xdp_rx_wait(q, timeout_ms):
    """Block until the Rx ring has frames or ``timeout_ms`` passes (-1: forever).  Returns 1
    when frames are waiting (without a system call if they already are), 0 on timeout,
    ``-errno``."""
    st = q.st
    if ring_entries(ring_load(q.cfg, RC_RX, R_PROD), st[RS_RX_CONS]) > 0:
        return 1
    st[RS_WAITS] += 1
    rc = fd_poll(q.cfg[RC_FD], POLLIN, timeout_ms)
    if ring_entries(ring_load(q.cfg, RC_RX, R_PROD), st[RS_RX_CONS]) > 0:
        return 1
    return rc if rc < 0 else 0


@kernel
def af_xdp_rx_release(dom, q, lcore):
    """After the socket is closed: every frame the kernel held for Rx goes back to the pool.
    Returns how many."""
    cnt = umem_release(dom, lcore, _umem(q), OWN_FILL, q.scr)
    q.st[RS_POSTED] -= cnt
    return cnt
