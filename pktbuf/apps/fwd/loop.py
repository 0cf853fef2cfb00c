"""The data plane of ``pktbuf fwd``: testpmd's forwarding modes over any ports.

One ``@njit`` loop over *streams* (an Rx port and the Tx port its packets go to, queue 0 of
each), through the port table's dispatching ``rx_burst`` / ``tx_burst``, so one compiled loop
serves every mix of port types.  Modes, as testpmd's:

* ``io``: forward unchanged;
* ``mac``: destination MAC = the Tx port's peer address, source = the Tx port's MAC;
* ``macswap``: swap source and destination MAC;
* ``rxonly``: receive and free;
* ``txonly``: generate testpmd's UDP frames on each stream's Tx port.

Packets a Tx queue does not take are freed and counted as Tx drops (a forwarder must not hold
them).  A queue that an error stopped for good (``rx_queue_error`` / ``tx_queue_error``: a
capture file that breaks its format, a failed write) ends the slice with ``R_PORT_ERROR`` --
never ``R_ALL_EOF``: the caller must report it, not take it for the end of the input.  The
check costs nothing on the hot path: it runs only when a burst came back empty or short.  Idle polling backs off (pause, yield, then sleeps up to ``idle_max_us``, 1 ms in
``pktbuf fwd``), or with ``idle_max_us`` = ``BUSY_POLL`` only pauses, as testpmd polls.
"""
from __future__ import annotations

import numpy as np
from numba import literally, typeof, types

from ..._jit import _widen, kernel
from ...atomics import tsc_read
from ...ethdev.burst import (eth_domain, rx_burst_of, rx_queue_eof, rx_queue_error,
                             tx_burst_of, tx_queue_error)
from ...idle import idle_backoff, now_ns
from ...buf.mbuf.free import pktmbuf_free_bulk
from ...rawmem import addr_u8
from ..txonly import txonly_alloc_burst

MODES = ("io", "mac", "macswap", "rxonly", "txonly")
M_IO, M_MAC, M_MACSWAP, M_RXONLY, M_TXONLY = range(5)
MAX_BURST = 512

# per-port counters the loop keeps (cnt[port, :])
F_RX = 0            # packets received by the forwarding streams
F_TX = 1            # packets the Tx queue took
F_TX_DROP = 2       # packets it did not take (freed)
F_RX_BYTES = 3
F_TX_BYTES = 4
F_BUSY_CYCLES = 5   # --record-core-cycles: TSC cycles of the iterations that received packets
F_WORDS = 8

# what fwd_loop returns
R_DEADLINE = 0      # the slice ended
R_ALL_EOF = 1       # every stream's Rx port has reached its end (and none failed)
R_PORT_ERROR = 2    # a queue of a stream's port was stopped by an error (port.error() says it)


@kernel(inline="always")
def _rewrite(dom, h, mode, src, dst):
    m = dom.mb[h]
    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 12)
    if mode == M_MACSWAP:
        for i in range(6):
            t = p[i]
            p[i] = p[6 + i]
            p[6 + i] = t
    else:
        for i in range(6):
            p[i] = dst[i]
            p[6 + i] = src[i]


@kernel
def all_rx_eof(eth, streams):
    """True once the Rx queue 0 of every stream's Rx port can never deliver again."""
    for s in range(streams.shape[0]):
        if not rx_queue_eof(eth, streams[s, 0], 0):
            return False
    return True


@kernel
def streams_failed(eth, streams):
    """True when the Rx or Tx queue 0 of a stream's port was stopped by an error (asked when
    a round found nothing to do: a Tx queue can fail on a write after taking a burst)."""
    for s in range(streams.shape[0]):
        if rx_queue_error(eth, streams[s, 0], 0) != 0 or \
                tx_queue_error(eth, streams[s, 1], 0) != 0:
            return True
    return False


@kernel(literal=("kinds",))
def fwd_loop(eth, lcore, pid, streams, mode, burst, macs, peers, hdrs, pkt_len,
             deadline_ns, cnt, pk, record_cycles, idle_max_us, kinds):
    """Forward until ``deadline_ns`` (``time.monotonic_ns`` clock), until a stream's Rx or Tx
    queue is stopped by an error (``R_PORT_ERROR``, at the end of the round in which it was
    seen: every packet received before it has been sent on), or, unless generating, until
    every stream's Rx port is at its end (``R_ALL_EOF``).

    ``streams``: int64[S, 2] (Rx port, Tx port); ``macs``/``peers``: uint8[ports, 6], each
    port's MAC and its peer's; ``hdrs``: uint8[ports, 42], the txonly headers per Tx port;
    ``pid``: the pool txonly allocates from; ``cnt``: int64[ports, F_WORDS]; ``pk``: an int32
    scratch array of at least ``burst``.  ``record_cycles``: add the TSC cycles of every
    stream iteration that received (or, txonly, sent) packets to ``cnt[rx port,
    F_BUSY_CYCLES]`` -- from before the Rx burst to after the Tx burst, as testpmd's
    ``--record-core-cycles`` counts them.  ``idle_max_us``: :func:`pktbuf.idle.idle_backoff`'s
    cap (``BUSY_POLL``: never yield or sleep).  ``kinds``: the mask of the port kinds the
    streams' ports have (:func:`pktbuf.ethdev.burst.kinds_mask`, ``KINDS_ALL`` for any): the
    loop is compiled once per mask, with the burst kernels of those kinds only.
    """
    literally(kinds)
    dom = eth_domain(eth)
    mb = dom.mb
    ns = streams.shape[0]
    if burst > pk.size:
        burst = pk.size
    idle = 0
    while True:
        work = 0
        failed = False
        for s in range(ns):
            rxp = streams[s, 0]
            txp = streams[s, 1]
            t0 = tsc_read() if record_cycles else 0
            if mode == M_TXONLY:
                if txonly_alloc_burst(dom, pid, lcore, pk, burst, hdrs[txp], pkt_len) != 0:
                    continue
                n = burst
            else:
                n = rx_burst_of(kinds, eth, rxp, 0, lcore, pk, burst)
                if n == 0:
                    if rx_queue_error(eth, rxp, 0) != 0:
                        failed = True
                    continue
                nbytes = 0
                for i in range(n):
                    nbytes += np.int64(mb[pk[i]].pkt_len)
                cnt[rxp, F_RX] += n
                cnt[rxp, F_RX_BYTES] += nbytes
                if mode == M_RXONLY:
                    pktmbuf_free_bulk(dom, lcore, pk, n)
                    work += n
                    if record_cycles:
                        cnt[rxp, F_BUSY_CYCLES] += tsc_read() - t0
                    continue
                if mode == M_MAC or mode == M_MACSWAP:
                    for i in range(n):
                        _rewrite(dom, pk[i], mode, macs[txp], peers[txp])
            work += n
            txbytes = 0
            for i in range(n):
                txbytes += np.int64(mb[pk[i]].pkt_len)
            k = tx_burst_of(kinds, eth, txp, 0, lcore, pk, n)
            if k < n:
                for i in range(k, n):
                    txbytes -= np.int64(mb[pk[i]].pkt_len)
                pktmbuf_free_bulk(dom, lcore, pk[k:], n - k)
                cnt[txp, F_TX_DROP] += n - k
                if tx_queue_error(eth, txp, 0) != 0:
                    failed = True
            cnt[txp, F_TX] += k
            cnt[txp, F_TX_BYTES] += txbytes
            if record_cycles:
                cnt[rxp, F_BUSY_CYCLES] += tsc_read() - t0
        if failed:
            return R_PORT_ERROR
        if work == 0:
            if streams_failed(eth, streams):
                return R_PORT_ERROR
            if mode != M_TXONLY and all_rx_eof(eth, streams):
                return R_ALL_EOF
            idle_backoff(idle, idle_max_us)
            idle += 1
        else:
            idle = 0
        if now_ns() >= deadline_ns:
            return R_DEADLINE


def fwd_loop_entry(*args):
    """Call ``fwd_loop(*args)`` (compiling or loading it) and return its entry point for these
    argument types, the port-kind mask as the literal it is compiled for: calling the entry
    point skips the dispatcher, which would otherwise type the arguments, fail on the mask
    and retry with it as a literal on every call (tens of milliseconds).  Returns
    ``(result, entry)``; ``entry`` is None if it cannot be found (call ``fwd_loop``)."""
    key = tuple(_widen(typeof(a)) for a in args[:-1]) + (types.literal(int(args[-1])),)
    ov = fwd_loop.overloads.get(key)
    if ov is None:
        # compiled (or loaded) for the literal mask at once: a dispatcher call would first
        # type the whole loop with the mask as an int64, fail at ``literally`` and only then
        # compile it with the literal -- two typings of the loop, ~0.7 CPU s cold
        try:
            fwd_loop.compile(key)
        except Exception:                 # noqa: BLE001 -- the plain call reports it
            return fwd_loop(*args), None
        ov = fwd_loop.overloads.get(key)
    if ov is None:
        return fwd_loop(*args), None
    return ov.entry_point(*args), ov.entry_point


@kernel
def tsc_now():
    """The TSC now (for calibrating --record-core-cycles' cycles against seconds)."""
    return tsc_read()
