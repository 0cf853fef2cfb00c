"""pcap Tx: ``pcap_tx_burst``, the kernel a data plane calls to write packets to a capture file.

::

    k = pcap_tx_burst(dom, txq, lcore, pkts, n)   # pkts[:k] written and freed; pkts[k:n] yours

Each packet becomes one record -- a classic pcap record (µs or ns) or a pcapng Enhanced Packet
Block (ns) -- formatted straight from its segments (a chain is gathered into one record) into
the queue's 1 MiB buffer; ``write()`` is called from the kernel when the next record does not
fit, by :func:`pcap_tx_flush`, and at the end of every burst if the queue asks for it.  The
packets taken are freed with one ``pktmbuf_free_bulk``.

* Snaplen: a packet longer than the snaplen is written cut to it, with its original length in
  the record -- what the format means by caplen < len; ``TS_TRUNCATED`` counts them.
* Timestamps: the packet's Rx timestamp when it carries one (the dynamic field and flag the
  facade registered: replaying a capture into a capture keeps its times), else the wall clock
  (``CLOCK_REALTIME``, read once per burst).
* A failed ``write()`` stops the queue: the records in the buffer are lost (``oerrors``), the
  errno is kept in ``st[TS_ERRNO]`` and later bursts take nothing.
* A drop queue (a port without Tx files) counts the packets and frees them, as DPDK's does.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...buf.mbuf.free import pktmbuf_free_bulk
from ...buf.mbuf.layout import NULL
from ...rawmem import fill_in_bounds
from ._sys import realtime_ns, sys_errno, sys_write
from .copy import copy_seg
from .format import BT_EPB, EPB_LEN, NS, PCAP_REC_LEN, pad4, wr32
from .layout import (T_FD, T_FLUSH_BURST, T_FORMAT, T_NANO, T_SNAPLEN, T_TS_FLAG, T_TS_WORD,
                     TFMT_DROP, TFMT_PCAP, TS_ERRNO, TS_FILL, TS_OBYTES, TS_OERRORS,
                     TS_OPACKETS, TS_RECS, TS_TRUNCATED, TS_WRITES)

__all__ = ["pcap_tx_burst", "pcap_tx_flush", "pcap_tx_error"]

EINTR = 4
EIO = 5


@kernel
def pcap_tx_error(q):
    """The errno of the write that stopped the queue (it takes nothing since), 0 if none."""
    return q.st[TS_ERRNO]


@kernel
def pcap_tx_flush(q):
    """Write the buffered records to the file: 0, or ``-errno`` (the queue has then failed and
    the buffered records are counted in ``oerrors``)."""
    st = q.st
    if st[TS_ERRNO] != 0:
        return -st[TS_ERRNO]
    fill = st[TS_FILL]
    base = np.int64(q.buf.ctypes.data)
    off = 0
    while off < fill:
        r = sys_write(q.cfg[T_FD], base + off, fill - off)
        if r > 0:
            off += r
            continue
        e = sys_errno() if r < 0 else EIO
        if r < 0 and e == EINTR:
            continue
        st[TS_ERRNO] = e
        st[TS_OERRORS] += st[TS_RECS]
        st[TS_FILL] = 0
        st[TS_RECS] = 0
        return -e
    if fill > 0:
        st[TS_WRITES] += 1
    st[TS_FILL] = 0
    st[TS_RECS] = 0
    return 0


@kernel(inline="always")
def _gather(mb, h, dst, base, size, caplen):
    """Copy the first ``caplen`` bytes of packet ``h`` (all its segments) to ``dst``, which lies
    in ``[base, base + size)``; zeroes what a chain shorter than its ``pkt_len`` lacks."""
    left = caplen
    seg = np.int64(h)
    while left > 0 and seg != NULL:
        m = mb[seg]
        take = min(np.int64(m.data_len), left)
        ba = np.int64(m.buf_addr)
        copy_seg(dst, base, size, ba + m.data_off, ba, np.int64(m.buf_len), take)
        dst += take
        left -= take
        seg = np.int64(m.next)
    if left > 0:
        fill_in_bounds(dst, base, size, 0, left)


@kernel(inline="always")
def _pcap_time(ts, nano):
    """A classic pcap record's (seconds, fraction) of ``ts`` ns (a time before the epoch, which
    the format cannot hold, is written as 0).  Unsigned, so each division by its constant is
    one multiplication, without floor division's sign fix-up."""
    u = np.uint64(max(ts, 0))
    sec = u // np.uint64(NS)
    r = u - sec * np.uint64(NS)
    return np.int64(sec), np.int64(r if nano else r // np.uint64(1000))


@kernel
def pcap_tx_burst(dom, q, lcore, mbufs, n):
    """Write up to ``n`` packets of ``mbufs[:n]``; returns how many were taken (DPDK
    ``rte_eth_tx_burst``): ``mbufs[:k]`` now belong to the queue (already freed), the rest are
    still the caller's.  0 once a write has failed (``st[TS_ERRNO]``)."""
    if n > mbufs.size:
        n = mbufs.size
    cfg = q.cfg
    st = q.st
    if n <= 0 or st[TS_ERRNO] != 0:
        return 0
    mb = dom.mb
    fmt = cfg[T_FORMAT]
    k = 0
    nbytes = 0
    if fmt == TFMT_DROP:
        for i in range(n):
            nbytes += np.int64(mb[mbufs[i]].pkt_len)
        k = n
    else:
        buf = q.buf
        base = np.int64(buf.ctypes.data)
        size = np.int64(buf.size)
        snap = cfg[T_SNAPLEN]
        nano = cfg[T_NANO] != 0
        tsw = cfg[T_TS_WORD]
        tsf = np.uint64(cfg[T_TS_FLAG]) if tsw >= 0 else np.uint64(0)
        now = np.int64(-1)
        now_sec = np.int64(0)       # _pcap_time(now): once per burst, not per record
        now_frac = np.int64(0)
        # the fill level and counters live in locals: stores into the byte buffer may alias
        # st[], which would otherwise be reloaded and stored around every record
        o = st[TS_FILL]
        recs = st[TS_RECS]
        cut = 0
        for i in range(n):
            h = mbufs[i]
            m = mb[h]
            plen = np.int64(m.pkt_len)
            caplen = min(plen, snap)
            if fmt == TFMT_PCAP:
                rec = PCAP_REC_LEN + caplen
            else:
                rec = EPB_LEN + pad4(caplen)
            if o + rec > size:
                st[TS_FILL] = o
                st[TS_RECS] = recs
                if pcap_tx_flush(q) != 0:
                    o = 0
                    recs = 0
                    break
                o = 0
                recs = 0
            sec = now_sec
            frac = now_frac
            if (m.ol_flags & tsf) != 0:
                ts = (np.int64(m.dynfield1[tsw + 1]) << 32) | np.int64(m.dynfield1[tsw])
                if fmt == TFMT_PCAP:
                    sec, frac = _pcap_time(ts, nano)
            else:
                if now < 0:
                    now = realtime_ns()
                    now_sec, now_frac = _pcap_time(now, nano)
                ts = now
                sec = now_sec
                frac = now_frac
            if fmt == TFMT_PCAP:
                wr32(buf, o, sec)
                wr32(buf, o + 4, frac)
                wr32(buf, o + 8, caplen)
                wr32(buf, o + 12, plen)
                _gather(mb, h, base + o + PCAP_REC_LEN, base, size, caplen)
            else:
                wr32(buf, o, BT_EPB)
                wr32(buf, o + 4, rec)
                wr32(buf, o + 8, 0)                 # interface 0
                wr32(buf, o + 12, ts >> 32)
                wr32(buf, o + 16, ts & 0xFFFFFFFF)
                wr32(buf, o + 20, caplen)
                wr32(buf, o + 24, plen)
                _gather(mb, h, base + o + 28, base, size, caplen)
                pad = pad4(caplen) - caplen
                if pad > 0:
                    fill_in_bounds(base + o + 28 + caplen, base, size, 0, pad)
                wr32(buf, o + rec - 4, rec)
            if caplen < plen:
                cut += 1
            o += rec
            recs += 1
            nbytes += plen
            k += 1
        st[TS_FILL] = o
        st[TS_RECS] = recs
        st[TS_TRUNCATED] += cut
        if cfg[T_FLUSH_BURST] != 0 and k > 0:
            pcap_tx_flush(q)
    if k > 0:
        pktmbuf_free_bulk(dom, lcore, mbufs, k)
        st[TS_OPACKETS] += k
        st[TS_OBYTES] += nbytes
    return k
