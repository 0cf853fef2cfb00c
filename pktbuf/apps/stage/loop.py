"""The stage loop: receive a burst, let the stage decide every packet, free the drops, queue
the rest in per-port Tx buffers (each port's packets in their received order) and send a
port's buffer when it holds a burst -- DPDK l3fwd's Tx path (``send_single_packet`` /
``send_packetsx4`` in ``l3fwd_common.h``, the ``BURST_TX_DRAIN_US`` drain of its main loops).

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

**Tx buffers.**  One per port, of one burst (``txbuf[port]``, ``txn[port]`` packets).  A
buffer is sent when it is full; a burst the stage left on one port whose buffer is empty, and
that is a full burst, is sent from ``pkts`` itself (no copy: the io-like case).  The buffers are
drained -- every one that holds something sent -- when ``drain_ns`` passed since the last timed
drain (l3fwd's ``BURST_TX_DRAIN_US`` = 100 by default, on the loop's clock, which it reads once
per round anyway), when an idle loop is about to yield or sleep (a busy-polling loop, which
only pauses, leaves it to the timer, as l3fwd does), and before every return (deadline,
port error, end of input), so the loop never returns with a packet held.  What a Tx queue does not take is freed
and counted (``F_TX_DROP``) when the buffer is sent, as l3fwd's ``send_burst`` frees it.

The do-nothing case costs one compare per packet over io forwarding, and a few loads and
compares per burst: ``dest`` holds the default port when the stage is called, and when the
stage left every full burst on one valid port with an empty buffer it goes out from
``pkts``.  Each stream has a ``dest`` row of its own (``dests[s]``), and ``dclean[s]`` says
how much of it is known to hold the default still: a row the stage left as it was (the scan
that finds one Tx port for the burst proves it) is not filled again for the next burst.
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
from pktbuf.idle import IDLE_PAUSE, idle_action, idle_backoff, now_ns

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


@kernel(inline="always")
def _buffer(eth, dom, d, txq, lcore, pk, n, txbuf, txn, burst, cnt):
    """Append ``pk[:n]`` to port ``d``'s Tx buffer, sending it each time it holds ``burst``
    packets (l3fwd's ``send_packetsx4``).  True when a Tx queue was stopped by an error."""
    row = txbuf[d]
    c = txn[d]
    failed = False
    for i in range(n):
        row[c] = pk[i]
        c += 1
        if c >= burst:
            if _send(eth, dom, d, txq, lcore, row, c, cnt):
                failed = True
            c = 0
    txn[d] = c
    return failed


@kernel
def tx_flush(eth, dom, txq, lcore, txbuf, txn, cnt, record_cycles):
    """Send what every port's Tx buffer holds (l3fwd's drain of ``qconf->tx_mbufs``); what a
    queue does not take is freed and counted in ``F_TX_DROP``.  Leaves ``txn`` all 0.  With
    ``record_cycles``, the cycles of each send are added to ``cnt[port, F_BUSY_CYCLES]`` of
    the port sent on (the Tx work of packets the Rx iterations only buffered).  True when a
    Tx queue was stopped by an error."""
    failed = False
    for d in range(txn.size):
        c = txn[d]
        if c > 0:
            t0 = tsc_read() if record_cycles else 0
            txn[d] = 0
            if _send(eth, dom, d, txq, lcore, txbuf[d], c, cnt):
                failed = True
            if record_cycles:
                cnt[d, F_BUSY_CYCLES] += tsc_read() - t0
    return failed


@kernel
def stage_loop(eth, lcore, streams, txq, burst, state, cnt, scnt, drops, dests, dclean, pk,
               txbuf, txn, deadline_ns, drain_ns, idle_max_us, record_cycles):
    """Forward through ``run_stage`` until the deadline, an error or the end of every input.

    ``streams``: int64[S, 3]; ``cnt``: int64[ports, F_WORDS] (``txbuf.shape[0]`` ports);
    ``scnt``: the stage's counters; ``drops``: int64[reasons + 1], per drop reason, the last
    slot for undeclared reasons and port ids outside the table; scratch: ``dests``:
    int32[S, >= burst], the ``dest`` row of each stream, and ``dclean``: int64[S], how many
    leading entries of each row are known to hold the stream's default port (the fill skips
    those; 0 for a row never used), ``pk``: int32[>= burst]; the Tx buffers: ``txbuf``:
    int32[ports, >= burst], ``txn``: int64[ports] the packets each holds (all 0 on entry,
    and so on every return: the loop drains them before it returns).  ``drain_ns``: the period of the timed drain.
    ``idle_max_us``: :func:`pktbuf.idle.idle_backoff`'s
    cap.  ``record_cycles``: add the TSC cycles of every stream iteration that received
    packets, from before its Rx burst to after its last Tx burst, to ``cnt[rx port,
    F_BUSY_CYCLES]``, and those of every drain that sent something to the Tx port's
    (testpmd's ``--record-core-cycles``; pktbuf fwd's count).
    """
    dom = eth_domain(eth)
    mb = dom.mb
    ns = streams.shape[0]
    maxp = min(txbuf.shape[0], txn.size)
    nr = drops.shape[0]
    burst = min(burst, pk.size, dests.shape[1], txbuf.shape[1])
    ns = min(ns, dests.shape[0], dclean.size)      # one dest row and clean count a stream
    idle = 0
    last_drain = now_ns()
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
            dest = dests[s]
            for i in range(dclean[s], n):   # what is not known to hold dflt already
                dest[i] = dflt
            dclean[s] = 0
            cnt[rxp, F_RX] += n
            cnt[rxp, F_RX_BYTES] += nbytes
            work += n
            run_stage(state, dom, rxp, pk, n, dest, scnt)
            # the common case (io, or a stage that routes a burst one way): a full burst for
            # an empty buffer goes out from pk as it is, anything else joins the buffer
            # (an OR of differences, not an early exit: LLVM vectorizes it)
            d0 = dest[0]
            diff = 0
            for i in range(1, n):
                diff |= dest[i] ^ d0
            if diff == 0 and d0 >= 0 and d0 < maxp:
                if d0 == dflt:
                    dclean[s] = n       # dest[:n] holds dflt: the next burst needs no fill
                if n >= burst and txn[d0] == 0:
                    if _send(eth, dom, d0, txq, lcore, pk, n, cnt):
                        failed = True
                elif _buffer(eth, dom, d0, txq, lcore, pk, n, txbuf, txn, burst, cnt):
                    failed = True
                if record_cycles:
                    cnt[rxp, F_BUSY_CYCLES] += tsc_read() - t0
                continue
            nd = 0
            for i in range(n):
                d = dest[i]
                if d >= 0 and d < maxp:
                    c = txn[d]
                    txbuf[d, c] = pk[i]
                    c += 1
                    if c >= burst:
                        if _send(eth, dom, d, txq, lcore, txbuf[d], c, cnt):
                            failed = True
                        c = 0
                    txn[d] = c
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
            if record_cycles:
                cnt[rxp, F_BUSY_CYCLES] += tsc_read() - t0
        if failed:
            tx_flush(eth, dom, txq, lcore, txbuf, txn, cnt, record_cycles)
            return R_PORT_ERROR
        if work == 0:
            # an idle loop about to yield or sleep drains the buffers first: its timer would
            # not run while it waits (busy polling only ever pauses: the timer drains)
            if idle_action(idle, idle_max_us) != IDLE_PAUSE:
                if tx_flush(eth, dom, txq, lcore, txbuf, txn, cnt, record_cycles):
                    return R_PORT_ERROR
            if streams_broken(eth, streams, txq):
                tx_flush(eth, dom, txq, lcore, txbuf, txn, cnt, record_cycles)
                return R_PORT_ERROR
            if streams_at_eof(eth, streams):
                if tx_flush(eth, dom, txq, lcore, txbuf, txn, cnt, record_cycles):
                    return R_PORT_ERROR
                return R_ALL_EOF
            idle_backoff(idle, idle_max_us)
            idle += 1
        else:
            idle = 0
        now = now_ns()
        if now >= deadline_ns:
            if tx_flush(eth, dom, txq, lcore, txbuf, txn, cnt, record_cycles):
                return R_PORT_ERROR
            return R_DEADLINE
        if now - last_drain >= drain_ns:
            last_drain = now
            if tx_flush(eth, dom, txq, lcore, txbuf, txn, cnt, record_cycles):
                return R_PORT_ERROR
