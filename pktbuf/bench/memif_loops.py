"""The jitted loops of the memif benchmark: everything that runs per packet.

Each loop is plain ``@njit`` code over the public kernels, as an application would write it.
The generator step is testpmd ``txonly``'s (:func:`pktbuf.apps.txonly.txonly_alloc_burst`:
headers written, payload not), the receiver's is ``rxonly``'s (receive, free), so a pktbuf
pair and a testpmd pair do the same work per packet.  Counters go to an ``int64`` array
(``CNT_*`` of :mod:`pktbuf.apps.counters`); idle loops back off (``idle_backoff``).
"""
from __future__ import annotations

from .._jit import kernel
from ..apps.counters import CNT_DROPS, CNT_RX, CNT_TX
from ..apps.txonly import txonly_alloc_burst
from ..idle import IDLE_SLEEP_MAX_US, idle_backoff, now_ns
from ..buf.mbuf.free import pktmbuf_free_bulk
from ..drivers.memif.datapath import memif_link_up, memif_rx_burst, memif_tx_burst
from ..rawmem import stack_i32

BURST = 32


@kernel
def loopback_loop(dom, pid, lcore, txq, rxq, hdr, pkt_len, iters):
    """``iters`` rounds of: generate a burst, ``memif_tx_burst`` on ``txq``, ``memif_rx_burst``
    on ``rxq``, free.  Returns the packets received (the caller divides its time by them), or
    -1 if the pool ran dry."""
    tx = stack_i32(32)
    rx = stack_i32(32)
    got = 0
    for _ in range(iters):
        if txonly_alloc_burst(dom, pid, lcore, tx, BURST, hdr, pkt_len) != 0:
            return -1
        k = memif_tx_burst(dom, txq, lcore, tx, BURST)
        if k < BURST:
            pktmbuf_free_bulk(dom, lcore, tx[k:], BURST - k)
        r = memif_rx_burst(dom, rxq, lcore, rx, BURST)
        pktmbuf_free_bulk(dom, lcore, rx, r)
        got += r
    return got


@kernel
def sender_loop(dom, pid, lcore, txq, hdr, pkt_len, deadline_ns, cnt):
    """testpmd ``txonly``: generate bursts into ``txq`` until the deadline; what the ring does
    not take is freed and counted (a generator never waits on a full ring)."""
    tx = stack_i32(32)
    idle = 0
    while now_ns() < deadline_ns:
        if txonly_alloc_burst(dom, pid, lcore, tx, BURST, hdr, pkt_len) != 0:
            idle_backoff(idle, IDLE_SLEEP_MAX_US)
            idle += 1
            continue
        k = memif_tx_burst(dom, txq, lcore, tx, BURST)
        cnt[CNT_TX] += k
        if k < BURST:
            pktmbuf_free_bulk(dom, lcore, tx[k:], BURST - k)
            cnt[CNT_DROPS] += BURST - k
        if k == 0:
            idle_backoff(idle, IDLE_SLEEP_MAX_US)
            idle += 1
        else:
            idle = 0


@kernel
def sink_loop(dom, lcore, rxq, deadline_ns, until_down, cnt):
    """testpmd ``rxonly``: receive and free everything arriving on ``rxq`` until the deadline
    (or, with ``until_down``, until the link goes down -- the sender has drained the ring)."""
    rx = stack_i32(32)
    idle = 0
    while now_ns() < deadline_ns:
        r = memif_rx_burst(dom, rxq, lcore, rx, BURST)
        if r:
            pktmbuf_free_bulk(dom, lcore, rx, r)
            cnt[CNT_RX] += r
            idle = 0
        else:
            if until_down and not memif_link_up(rxq):
                return
            idle_backoff(idle, IDLE_SLEEP_MAX_US)
            idle += 1


@kernel
def echo_loop(dom, lcore, rxq, txq, deadline_ns, until_down, cnt):
    """The far end of a round trip: send back everything received (what the Tx ring does not
    take is freed and counted as dropped)."""
    pk = stack_i32(32)
    idle = 0
    while now_ns() < deadline_ns:
        r = memif_rx_burst(dom, rxq, lcore, pk, BURST)
        if r == 0:
            if until_down and not memif_link_up(rxq):
                return
            idle_backoff(idle, IDLE_SLEEP_MAX_US)
            idle += 1
            continue
        idle = 0
        k = memif_tx_burst(dom, txq, lcore, pk, r)
        if k < r:
            pktmbuf_free_bulk(dom, lcore, pk[k:], r - k)
            cnt[CNT_DROPS] += r - k
        cnt[CNT_RX] += r
        cnt[CNT_TX] += k


@kernel
def pingpong_loop(dom, pid, lcore, txq, rxq, hdr, pkt_len, window, deadline_ns, drain, cnt):
    """Round trip: keep up to ``window`` packets in flight, count the ones that come back.
    With ``drain``, send nothing more and only receive until nothing is in flight (or the
    deadline)."""
    tx = stack_i32(32)
    rx = stack_i32(32)
    idle = 0
    while now_ns() < deadline_ns:
        inflight = cnt[CNT_TX] - cnt[CNT_RX]
        if drain and inflight <= 0:
            return
        sent = False
        if not drain and inflight + BURST <= window and \
                txonly_alloc_burst(dom, pid, lcore, tx, BURST, hdr, pkt_len) == 0:
            k = memif_tx_burst(dom, txq, lcore, tx, BURST)
            if k < BURST:
                pktmbuf_free_bulk(dom, lcore, tx[k:], BURST - k)
                cnt[CNT_DROPS] += BURST - k
            cnt[CNT_TX] += k
            sent = k > 0
        r = memif_rx_burst(dom, rxq, lcore, rx, BURST)
        if r:
            pktmbuf_free_bulk(dom, lcore, rx, r)
            cnt[CNT_RX] += r
            idle = 0
        elif not sent:
            idle_backoff(idle, IDLE_SLEEP_MAX_US)
            idle += 1


def warm() -> None:
    """Compile (or load) every loop here, before child processes would compile them at once."""
    from ..buf.domain.pools import PktmbufPool
    from ..apps.counters import counters
    from ..apps.txonly import udp_headers
    from ..drivers.memif.queue import queue_alloc
    pool = PktmbufPool(64, 0, name="bench-warm")
    q = queue_alloc()
    cnt = counters()
    hdr = udp_headers(64, bytes(6), bytes(6))
    dom = pool.domain.state
    loopback_loop(dom, pool.id, 0, q, q, hdr, 64, 0)
    sender_loop(dom, pool.id, 0, q, hdr, 64, 0, cnt)
    sink_loop(dom, 0, q, 0, False, cnt)
    echo_loop(dom, 0, q, q, 0, False, cnt)
    pingpong_loop(dom, pool.id, 0, q, q, hdr, 64, 64, 0, False, cnt)
    pool.close()
