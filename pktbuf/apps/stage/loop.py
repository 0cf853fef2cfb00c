"""The stage loop: receive a burst, let the stage decide every packet, free the drops, send the
rest with one Tx burst per destination port (each port's packets in their received order).

This file is also the **template** of every generated loop (:mod:`pktbuf.apps.stage.gen`):
the generator copies it, replacing the one line marked ``STAGE-HOOK`` by imports of the user's
stage(s) bound to ``run_stage``, and the line marked ``KINDS-HOOK`` by the mask of the port
kinds the loop serves (``KINDS``, a compile-time constant: only those kinds' burst kernels are
compiled into it; a port of another kind receives and sends nothing).  That is why its imports
are absolute.  Compiled as it is (every kind), with
:func:`~pktbuf.apps.stage.abi.noop_stage`, it is the do-nothing stage's loop, the baseline the
stage overhead is measured against.

Streams are ``(rx port, rx queue, default Tx port)``; every Tx burst goes to queue ``txq``
(one per lcore, as l3fwd assigns them).  The exits are pktbuf fwd's: the deadline
(``time.monotonic_ns`` clock), a queue stopped by an error (``R_PORT_ERROR``, at the end of the
round that saw it), or every stream's Rx queue at its end (``R_ALL_EOF``).

The do-nothing case costs one store and one compare per packet over io forwarding: ``dest`` is
prefilled with the default port, and when the stage left every packet on one valid port the
burst goes out from ``pkts`` itself, without the per-port gather.
"""
from __future__ import annotations

import numpy as np

from pktbuf._jit import kernel
from pktbuf.apps.stage.abi import (F_BUSY_CYCLES, F_RX, F_RX_BYTES, F_STAGE_DROP, F_TX,
                                   F_TX_BYTES, F_TX_DROP, R_ALL_EOF, R_DEADLINE, R_PORT_ERROR)
from pktbuf.atomics import tsc_read
from pktbuf.buf.mbuf.free import pktmbuf_free_bulk
from pktbuf.ethdev.burst import (KINDS_ALL, eth_domain, rx_burst_of, rx_queue_eof,
                                 rx_queue_error, tx_burst_of, tx_queue_error)
from pktbuf.idle import idle_backoff, now_ns

from pktbuf.apps.stage.abi import noop_stage as run_stage  # STAGE-HOOK

KINDS = KINDS_ALL  # KINDS-HOOK


@kernel(inline="always")
def _send(eth, dom, txp, txq, lcore, pk, n, cnt):
    """Send ``pk[:n]`` on ``txp``; free and count what the queue did not take.  True when the
    Tx queue was stopped by an error."""
    mb = dom.mb
    txbytes = 0
    for i in range(n):
        txbytes += np.int64(mb[pk[i]].pkt_len)
    k = tx_burst_of(KINDS, eth, txp, txq, lcore, pk, n)
    failed = False
    if k < n:
        for i in range(k, n):
            txbytes -= np.int64(mb[pk[i]].pkt_len)
        pktmbuf_free_bulk(dom, lcore, pk[k:], n - k)
        cnt[txp, F_TX_DROP] += n - k
        failed = tx_queue_error(eth, txp, txq) != 0
    cnt[txp, F_TX] += k
    cnt[txp, F_TX_BYTES] += txbytes
    return failed


@kernel
def streams_at_eof(eth, streams):
    """True once every stream's Rx queue can never deliver again."""
    for s in range(streams.shape[0]):
        if not rx_queue_eof(eth, streams[s, 0], streams[s, 1]):
            return False
    return True


@kernel
def streams_broken(eth, streams, txq):
    """True when a stream's Rx queue, or the Tx queue ``txq`` of its default port, failed."""
    for s in range(streams.shape[0]):
        if rx_queue_error(eth, streams[s, 0], streams[s, 1]) != 0 or \
                tx_queue_error(eth, streams[s, 2], txq) != 0:
            return True
    return False


@kernel
def stage_loop(eth, lcore, streams, txq, burst, state, cnt, scnt, drops, dest, pk, txbuf, txn,
               touched, deadline_ns, idle_max_us, record_cycles):
    """Forward through ``run_stage`` until the deadline, an error or the end of every input.

    ``streams``: int64[S, 3]; ``cnt``: int64[ports, F_WORDS] (``txbuf.shape[0]`` ports);
    ``scnt``: the stage's counters; ``drops``: int64[reasons + 1], per drop reason, the last
    slot for undeclared reasons and port ids outside the table; scratch: ``dest``, ``pk``:
    int32[>= burst], ``txbuf``: int32[ports, >= burst], ``txn``, ``touched``: int64[ports]
    (``txn`` all 0 on entry, and so on exit).  ``idle_max_us``: :func:`pktbuf.idle.idle_backoff`'s
    cap.  ``record_cycles``: add the TSC cycles of every stream iteration that received
    packets, from before its Rx burst to after its last Tx burst, to ``cnt[rx port,
    F_BUSY_CYCLES]`` (testpmd's ``--record-core-cycles``; pktbuf fwd's count).
    """
    dom = eth_domain(eth)
    mb = dom.mb
    ns = streams.shape[0]
    maxp = txbuf.shape[0]
    nr = drops.shape[0]
    burst = min(burst, pk.size, dest.size, txbuf.shape[1])
    idle = 0
    while True:
        work = 0
        failed = False
        for s in range(ns):
            rxp = streams[s, 0]
            rxq = streams[s, 1]
            dflt = streams[s, 2]
            t0 = tsc_read() if record_cycles else 0
            n = rx_burst_of(KINDS, eth, rxp, rxq, lcore, pk, burst)
            if n == 0:
                if rx_queue_error(eth, rxp, rxq) != 0:
                    failed = True
                continue
            nbytes = 0
            for i in range(n):
                nbytes += np.int64(mb[pk[i]].pkt_len)
                dest[i] = dflt
            cnt[rxp, F_RX] += n
            cnt[rxp, F_RX_BYTES] += nbytes
            work += n
            run_stage(state, dom, rxp, pk, n, dest, scnt)
            # the common case (io, or a stage that routes a burst one way): send pk as it is
            # (an OR of differences, not an early exit: LLVM vectorizes it)
            d0 = dest[0]
            diff = 0
            for i in range(1, n):
                diff |= dest[i] ^ d0
            if diff == 0 and d0 >= 0 and d0 < maxp:
                if _send(eth, dom, d0, txq, lcore, pk, n, cnt):
                    failed = True
                if record_cycles:
                    cnt[rxp, F_BUSY_CYCLES] += tsc_read() - t0
                continue
            nt = 0
            nd = 0
            for i in range(n):
                d = dest[i]
                if d >= 0 and d < maxp:
                    c = txn[d]
                    if c == 0:
                        touched[nt] = d
                        nt += 1
                    txbuf[d, c] = pk[i]
                    txn[d] = c + 1
                else:
                    r = -1 - d
                    if d >= 0 or r >= nr - 1:
                        r = nr - 1
                    drops[r] += 1
                    # dest[:nd] becomes the list of drops: nd <= i, and dest[i] is read already
                    dest[nd] = pk[i]
                    nd += 1
            if nd > 0:
                pktmbuf_free_bulk(dom, lcore, dest, nd)
                cnt[rxp, F_STAGE_DROP] += nd
            for t in range(nt):
                d = touched[t]
                c = txn[d]
                txn[d] = 0
                if _send(eth, dom, d, txq, lcore, txbuf[d], c, cnt):
                    failed = True
            if record_cycles:
                cnt[rxp, F_BUSY_CYCLES] += tsc_read() - t0
        if failed:
            return R_PORT_ERROR
        if work == 0:
            if streams_broken(eth, streams, txq):
                return R_PORT_ERROR
            if streams_at_eof(eth, streams):
                return R_ALL_EOF
            idle_backoff(idle, idle_max_us)
            idle += 1
        else:
            idle = 0
        if now_ns() >= deadline_ns:
            return R_DEADLINE
