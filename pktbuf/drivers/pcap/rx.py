"""pcap Rx: ``pcap_rx_burst``, the kernel a data plane calls to replay a capture file.

::

    n = pcap_rx_burst(dom, rxq, lcore, out, 32)   # n packets (mbuf handles) in out[:n]
    if n == 0 and pcap_rx_eof(rxq): ...           # the file is done (not looping)

A burst works in two passes over the mapped file (:mod:`.window`): pass 1 (:mod:`.parse`;
the pcapng parser is called through its address, :mod:`.ngcall`, compiled on first use)
validates up to ``n`` records and notes where their data is; pass 2 (:func:`rx_fill`) takes
all the mbufs they need with one ``pktmbuf_alloc_bulk`` from the queue's pool, copies each
record into its mbuf (a chain when it is longer than one data room), sets ``pkt_len``,
``data_len``, ``nb_segs``, ``port`` and the Rx timestamp (dynamic field and flag, when the facade
registered them), and only then moves the cursor.  A frame of another link type that is
converted (:mod:`.linktype`) gets its Ethernet header written in front of the record's bytes.  When the pool cannot give them all, fewer
packets are taken (halving) and ``rx_nombuf`` counts the burst; the records not taken stay
unread.  No per-packet work outside compiled code, no exception: a format error stops the queue
(``st[S_ERR]``) after every valid packet before it was delivered.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...buf.mbuf.raw import pktmbuf_alloc_bulk
from .copy import copy_seg
from .layout import (BURST_MAX, C_FORMAT, C_LOOP, C_POOL, C_PORT, C_SIZE, C_TS_FLAG, C_TS_WORD,
                     C_PARSE, FMT_NONE, FMT_PCAP, S_CONVERTED, S_CUR, S_ERR, S_IBYTES, S_IPACKETS,
                     S_RX_NOMBUF, S_SKIPPED, S_SKIPPED_FRAMES, S_WIN_ADDR, S_WIN_LEN)
from .linktype import ETHER_LEN
from ...rawmem import addr_u8
from .ngcall import call_parser
from .parse import parse_pcap
from .window import win_unmap

__all__ = ["pcap_rx_burst", "pcap_rx_eof", "pcap_rx_error", "pcap_rx_close"]


@kernel(inline="always")
def _put_ether(dst, eh0, eh1):
    """The 14-byte Ethernet header packed in ``eh0`` (bytes 0..7) and ``eh1`` (8..13) at
    ``dst`` (the first segment's data: at least 64 bytes of room)."""
    p = addr_u8(dst, ETHER_LEN)
    for i in range(8):
        p[i] = (eh0 >> (8 * i)) & 0xFF
    for i in range(6):
        p[8 + i] = (eh1 >> (8 * i)) & 0xFF


@kernel
def rx_fill(dom, q, lcore, out, npk, cap):
    """Pass 2: allocate, copy, chain; commit the cursor and the counters.  Returns the count."""
    st = q.st
    cfg = q.cfg
    pid = cfg[C_POOL]
    k = npk
    while k > 0:
        if pktmbuf_alloc_bulk(dom, pid, lcore, q.scr_mb, q.scr_end[k - 1]) == 0:
            break
        k //= 2
    if k < npk:
        st[S_RX_NOMBUF] += 1
    if k == 0:
        return 0
    mb = dom.mb
    port = cfg[C_PORT]
    tsw = cfg[C_TS_WORD]
    tsf = np.uint64(cfg[C_TS_FLAG])
    wa = st[S_WIN_ADDR]
    wl = st[S_WIN_LEN]
    mbs = q.scr_mb
    s = 0
    nbytes = 0
    nconv = 0
    for i in range(k):
        caplen = q.scr_cap[i]
        src = q.scr_addr[i]
        end = q.scr_end[i]
        conv = q.scr_conv[i] != 0
        nconv += 1 if conv else 0
        head = mbs[s]
        prev = -1
        left = caplen
        nb = 0
        while s < end:
            h = mbs[s]
            s += 1
            m = mb[h]
            take = min(left, cap)
            ba = np.int64(m.buf_addr)
            dst = ba + m.data_off
            if conv and nb == 0:            # a converted frame: its header, then the record
                _put_ether(dst, q.scr_eh0[i], q.scr_eh1[i])
                copy_seg(dst + ETHER_LEN, ba, np.int64(m.buf_len), src, wa, wl,
                         take - ETHER_LEN)
                src += take - ETHER_LEN
            else:
                copy_seg(dst, ba, np.int64(m.buf_len), src, wa, wl, take)
                src += take
            m.data_len = take
            left -= take
            nb += 1
            if prev >= 0:
                mb[prev].next = h
            prev = h
        hm = mb[head]
        hm.pkt_len = caplen
        hm.nb_segs = nb
        hm.port = port
        ts = q.scr_ts[i]
        if tsw >= 0 and ts >= 0:
            hm.dynfield1[tsw] = np.uint32(ts & 0xFFFFFFFF)
            hm.dynfield1[tsw + 1] = np.uint32(ts >> 32)
            hm.ol_flags |= tsf
        out[i] = head
        nbytes += caplen
    st[S_CUR] = q.scr_next[k - 1]
    sk = q.scr_skip[k - 1]
    st[S_SKIPPED] += sk & 0xFFFFFFFF
    st[S_SKIPPED_FRAMES] += sk >> 32
    st[S_CONVERTED] += nconv
    st[S_IPACKETS] += k
    st[S_IBYTES] += nbytes
    return k


@kernel
def pcap_rx_burst(dom, q, lcore, out, n):
    """Read up to ``n`` packets of the queue's file into ``out[:n]``; returns how many (DPDK
    ``rte_eth_rx_burst``).

    ``n`` is clamped to ``out.size`` and to ``BURST_MAX``.  The mbufs come from the queue's
    pool and are the caller's.  0 at the end of the file (:func:`pcap_rx_eof`), after a
    format error (:func:`pcap_rx_error`), on a null queue (or a pcapng one without its parser's
    address: the facade sets it, :mod:`.ngcall`), or when the pool is empty
    (``rx_nombuf``; the records stay for a later burst).
    """
    if n > out.size:
        n = out.size
    if n > BURST_MAX:
        n = BURST_MAX
    cfg = q.cfg
    st = q.st
    if n <= 0 or st[S_ERR] != 0 or cfg[C_FORMAT] == FMT_NONE:
        return 0
    p = dom.pools[cfg[C_POOL]]
    cap = np.int64(p.data_room) - np.int64(p.headroom)
    if cfg[C_FORMAT] == FMT_PCAP:
        npk = parse_pcap(q, n, cap)
    elif cfg[C_PARSE] != 0:
        npk = call_parser(cfg[C_PARSE], q, n, cap)      # parse_pcapng (.ngcall)
    else:
        return 0
    if npk == 0:
        return 0
    return rx_fill(dom, q, lcore, out, npk, cap)


@kernel
def pcap_rx_eof(q):
    """True once the queue can never deliver again: the file is read to its end and not
    looping, a format error stopped it, or it is a null queue."""
    return (q.cfg[C_FORMAT] == FMT_NONE or q.st[S_ERR] != 0
            or (q.cfg[C_LOOP] == 0 and q.st[S_CUR] >= q.cfg[C_SIZE]))


@kernel
def pcap_rx_error(q):
    """The queue's format error (``V_*`` of :mod:`pktbuf.drivers.pcap.layout`), 0 if none."""
    return q.st[S_ERR]


@kernel
def pcap_rx_close(q):
    """Unmap the queue's window; the queue then delivers nothing (the facade closes the fd)."""
    win_unmap(q)
    q.cfg[C_FORMAT] = FMT_NONE
