"""The data plane of ``pktbuf fwd --workers N --distributor``: one Rx/Tx stage, N workers.

The Rx/Tx stage (:func:`dist_io_loop`, in the process that owns the ports) receives bursts,
hands them to the distributor (:mod:`pktbuf.net.distrib`: each flow to one worker, through one
single-producer/single-consumer ring per worker), takes back what the workers returned and
transmits it on the stream's Tx port.  A worker (:func:`dist_worker_loop`, a process of its
own attached to the same shared domain) takes its ring, applies the forwarding mode and
returns the packets (``rxonly``: frees them).  No packet is copied anywhere: handles move.

Packets the distributor refuses (a worker's ring is full: that worker is behind) are held and
offered again before anything more is received: the back-pressure reaches the port, whose own
queue fills and drops what it cannot hold (``imissed``), as a NIC's does when DPDK stops
polling it -- a capture file is simply read more slowly, nothing is lost.  Packets a Tx queue
does not take are freed and counted as Tx drops, as in :mod:`pktbuf.apps.fwd.loop`.  A worker whose return ring stays full
for ``HOLD_NS`` (the Rx/Tx stage stopped collecting) frees what it holds, counted as done but
not returned, so no mbuf is ever stranded in a worker's hands.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...net.distrib.kernels import (distributor_burst, distributor_return_or_free,
                                    distributor_returned_pkts, distributor_worker_burst,
                                    distributor_worker_done)
from ...ethdev.burst import eth_domain, rx_burst, rx_queue_error, tx_burst, tx_queue_error
from ...idle import idle_backoff, now_ns
from ...buf.mbuf.free import pktmbuf_free_bulk
from .loop import (F_RX, F_RX_BYTES, F_TX, F_TX_BYTES, F_TX_DROP, M_MAC, M_MACSWAP,
                   M_RXONLY, _rewrite, all_rx_eof, streams_failed)

HOLD_NS = 100_000_000
F_UNROUTED = 6      # cnt[0, F_UNROUTED]: returned packets whose port names no stream (freed)

# what dist_io_loop returns
R_DEADLINE = 0      # the slice ended
R_RX_EOF = 1        # every Rx port has reached its end and nothing came back this round
R_PORT_ERROR = 2    # a queue of a stream's port was stopped by an error (port.error() says it)


@kernel
def dist_io_loop(eth, lcore, streams, txmap, txports, d, burst, deadline_ns, rx_on, cnt, pk,
                 rk, held, nheld, idle_max_us):
    """The Rx/Tx stage, until ``deadline_ns`` (``time.monotonic_ns`` clock).

    ``streams``: int64[S, 2] (Rx port, Tx port); ``txmap``: int64[ports], the Tx port of each
    Rx port; ``txports``: the distinct Tx ports; ``d``: the distributor's state; ``rx_on``:
    0 to only take back and transmit (a stop in progress: held packets are still offered);
    ``cnt``: int64[ports, F_WORDS]; ``pk``, ``rk``: int32 scratch of at least ``burst``;
    ``held``/``nheld[0]``: the packets the distributor refused, kept across calls;
    ``idle_max_us``: :func:`pktbuf.idle.idle_backoff`'s cap (``BUSY_POLL``: pause only).
    Returns ``R_PORT_ERROR`` at the end of a round in which a stream's queue was found stopped
    by an error (the packets in flight are the caller's to take back: :meth:`stop`).
    """
    dom = eth_domain(eth)
    mb = dom.mb
    ns = streams.shape[0]
    if burst > pk.size:
        burst = pk.size
    if burst > rk.size:
        burst = rk.size
    idle = 0
    while True:
        work = 0
        failed = False
        if nheld[0] > 0:
            h = nheld[0]
            k = distributor_burst(dom, d, held, h)
            if k > 0:
                work += k
                for i in range(h - k):
                    held[i] = held[k + i]
                nheld[0] = h - k
        if rx_on != 0 and nheld[0] == 0:
            for s in range(ns):
                rxp = streams[s, 0]
                n = rx_burst(eth, rxp, 0, lcore, pk, burst)
                if n == 0:
                    if rx_queue_error(eth, rxp, 0) != 0:
                        failed = True
                    continue
                nbytes = 0
                for i in range(n):
                    nbytes += np.int64(mb[pk[i]].pkt_len)
                cnt[rxp, F_RX] += n
                cnt[rxp, F_RX_BYTES] += nbytes
                k = distributor_burst(dom, d, pk, n)
                work += n
                if k < n:                   # held; nothing more received until they went
                    for i in range(n - k):
                        held[i] = pk[k + i]
                    nheld[0] = n - k
                    break
        m = distributor_returned_pkts(d, rk, burst)
        if m > 0:
            work += m
            c = 0                           # first, any packet whose port is not a stream's
            for i in range(m):
                p = np.int64(mb[rk[i]].port)
                if p < txmap.size and txmap[p] >= 0:
                    rk[c] = rk[i]
                    c += 1
                else:
                    pk[i - c] = rk[i]
            if c < m:
                pktmbuf_free_bulk(dom, lcore, pk, m - c)
                cnt[0, F_UNROUTED] += m - c
                m = c
            for t in range(txports.size):
                txp = txports[t]
                c = 0
                txbytes = 0
                for i in range(m):
                    h = rk[i]
                    if txmap[mb[h].port] == txp:
                        pk[c] = h
                        c += 1
                        txbytes += np.int64(mb[h].pkt_len)
                if c == 0:
                    continue
                k = tx_burst(eth, txp, 0, lcore, pk, c)
                if k < c:
                    for i in range(k, c):
                        txbytes -= np.int64(mb[pk[i]].pkt_len)
                    pktmbuf_free_bulk(dom, lcore, pk[k:], c - k)
                    cnt[txp, F_TX_DROP] += c - k
                    if tx_queue_error(eth, txp, 0) != 0:
                        failed = True
                cnt[txp, F_TX] += k
                cnt[txp, F_TX_BYTES] += txbytes
        if failed:
            return R_PORT_ERROR
        if work == 0:
            if rx_on != 0 and streams_failed(eth, streams):
                return R_PORT_ERROR
            if nheld[0] == 0 and all_rx_eof(eth, streams):
                return R_RX_EOF
            idle_backoff(idle, idle_max_us)
            idle += 1
        else:
            idle = 0
        if now_ns() >= deadline_ns:
            return R_DEADLINE


@kernel
def dist_worker_loop(dom, d, w, lcore, mode, txmap, macs, peers, pk, burst, deadline_ns,
                     idle_max_us):
    """Worker ``w`` until ``deadline_ns``: take its packets, apply ``mode`` (``mac`` and
    ``macswap`` rewrite the addresses for the Tx port of the packet's Rx port), hand them
    back (``rxonly``: free them).  Returns the packets it handled.  ``idle_max_us``: as for
    :func:`dist_io_loop`."""
    mb = dom.mb
    if burst > pk.size:
        burst = pk.size
    idle = 0
    handled = 0
    while True:
        n = distributor_worker_burst(d, w, pk, burst)
        if n > 0:
            idle = 0
            handled += n
            if mode == M_RXONLY:
                pktmbuf_free_bulk(dom, lcore, pk, n)
                distributor_worker_done(d, w, n)
            else:
                if mode == M_MAC or mode == M_MACSWAP:
                    for i in range(n):
                        p = np.int64(mb[pk[i]].port)
                        if p < txmap.size and txmap[p] >= 0:
                            txp = txmap[p]
                            _rewrite(dom, pk[i], mode, macs[txp], peers[txp])
                distributor_return_or_free(dom, d, w, lcore, pk, n, HOLD_NS, idle_max_us)
        else:
            idle_backoff(idle, idle_max_us)
            idle += 1
        if now_ns() >= deadline_ns:
            return handled
