"""Distributor kernels: ``distributor_burst`` and ``distributor_returned_pkts`` on the
distributing side, ``distributor_worker_burst`` and ``distributor_return_burst`` in each worker.

::

    k = distributor_burst(dom, d, pkts, n)          # pkts[:k] now in the workers' rings;
                                                    # pkts[k:n] refused (a ring was full), yours
    m = distributor_worker_burst(d, w, out, 32)     # worker w: out[:m] are its packets
    r = distributor_return_burst(d, w, out, m)      # worker w: out[:r] handed back
    t = distributor_returned_pkts(d, pkts, 32)      # the distributor: pkts[:t] came back

Each packet goes to worker ``reta[hash & (size - 1)]``: its RSS hash computed here (Toeplitz
over the IPv4/IPv6 + TCP/UDP tuple, :mod:`pktbuf.net.rss`) or, when the distributor was made to
trust it, the hash already in the mbuf (from a port that computed it).  A burst is grouped by
worker (a counting sort: packets of one worker keep their order, so a flow stays in order) and
each group enqueued with one single-producer burst.  A worker whose ring is full refuses the
rest of its group; those packets come back in ``pkts[k:n]`` in their original order and the
caller decides (retry, drop) -- as ``tx_burst``, nothing is dropped behind its back.  No packet
is copied: handles move, the mbufs stay where they are.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...buf.mbuf.free import pktmbuf_free_bulk
from ...idle import idle_backoff, now_ns
from ...buf.ring.kernels import (RING_HDR_WORDS, RING_QUEUE_VARIABLE, ring_count_at, ring_do_dequeue,
                                 ring_do_enqueue)
from ..rss.tuple import RX_RSS_HASH, rss_hash_bulk
from .layout import (BURST_MAX, D_HASH, D_L4, D_RING_SIZE, D_WORKERS, W_DEQ, W_DONE, W_ENQ,
                     W_FULL, W_RET, W_RETD)

__all__ = ["distributor_burst", "distributor_worker_burst", "distributor_worker_done",
           "distributor_return_or_free",
           "distributor_return_burst", "distributor_returned_pkts", "distributor_ring_count"]


_VAR = np.int64(RING_QUEUE_VARIABLE)
_SINGLE = np.bool_(True)


@kernel
def distributor_burst(dom, d, pkts, n):
    """Hand ``pkts[:n]`` (at most ``BURST_MAX``) to the workers' rings; returns how many were
    taken, with the taken ones in ``pkts[:k]`` and the refused ones in ``pkts[k:n]`` (both in
    their original order)."""
    if n > pkts.size:
        n = pkts.size
    if n > BURST_MAX:
        n = BURST_MAX
    if n <= 0:
        return 0
    cfg = d.cfg
    nw = cfg[D_WORKERS]
    if cfg[D_HASH] != 0:
        rss_hash_bulk(dom, pkts, n, d.lut, cfg[D_L4] != 0)
    mb = dom.mb
    reta = d.reta
    mask = reta.size - 1
    cnt = d.cnt
    wk = d.wk
    srt = d.srt
    for w in range(nw + 1):
        cnt[w] = 0
    flag = np.uint64(RX_RSS_HASH)
    for i in range(n):
        m = mb[pkts[i]]
        h = np.int64(m.hash) if (m.ol_flags & flag) != 0 else np.int64(0)
        w = np.int64(reta[h & mask])
        if w >= nw:                      # a table entry past the workers: worker 0
            w = 0
        wk[i] = w
        cnt[w + 1] += 1
    for w in range(nw):                  # cnt[w] = start of worker w's group
        cnt[w + 1] += cnt[w]
    for i in range(n):
        w = wk[i]
        srt[cnt[w]] = pkts[i]
        cnt[w] += 1
    # cnt[w] is now the end of group w (= the start of group w + 1); enqueue each group
    taken = 0
    start = 0
    st = d.st
    tk = d.tk
    for w in range(nw):
        end = cnt[w]
        c = end - start
        k = 0
        if c > 0:
            k = ring_do_enqueue(d.hdr, w * RING_HDR_WORDS, d.slots, w * cfg[D_RING_SIZE], srt,
                                start, c, _VAR, _SINGLE)
            st[w, W_ENQ] += k
            st[w, W_FULL] += c - k
            taken += k
        tk[w] = k
        start = end
    if taken == n:
        # pkts[:n] are all taken, in their original order already
        return n
    # the taken ones first, then the refused, each in the burst's order: a packet of worker w
    # was taken iff it is among the first tk[w] of its group (a group keeps the burst's order)
    for w in range(nw):
        cnt[w] = 0
    a = 0
    b = taken
    for i in range(n):
        w = wk[i]
        if cnt[w] < tk[w]:
            srt[a] = pkts[i]
            a += 1
        else:
            srt[b] = pkts[i]
            b += 1
        cnt[w] += 1
    for i in range(n):
        pkts[i] = srt[i]
    return taken


@kernel
def distributor_worker_burst(d, w, out, n):
    """Worker ``w``: take up to ``n`` packets from its ring into ``out[:n]``; returns the
    count (0 for a worker id the distributor does not have)."""
    if w < 0 or w >= d.cfg[D_WORKERS]:
        return 0
    if n > out.size:
        n = out.size
    if n <= 0:
        return 0
    k = ring_do_dequeue(d.hdr, w * RING_HDR_WORDS, d.slots, w * d.cfg[D_RING_SIZE], out,
                        np.int64(0), n, _VAR, _SINGLE)
    d.wst[w, W_DEQ] += k
    return k


@kernel
def distributor_worker_done(d, w, n):
    """Worker ``w`` has finished with ``n`` more packets (freed them or passed them on).  With
    the dequeue count this says how many it holds, so what a dead worker took with it is
    known (docs/scaleout.md).  Returns 0, or -22 for a worker id it does not have."""
    if w < 0 or w >= d.cfg[D_WORKERS]:
        return -22
    d.wst[w, W_DONE] += n
    return 0


@kernel
def distributor_return_burst(d, w, pkts, n):
    """Worker ``w``: hand ``pkts[:n]`` back to the distributor through its return ring (a
    pipeline's way back to the Tx stage); returns how many it took (the rest are still the
    worker's: the ring was full).  What it took counts as done.  0 for a worker id it does
    not have."""
    if w < 0 or w >= d.cfg[D_WORKERS]:
        return 0
    if n > pkts.size:
        n = pkts.size
    if n <= 0:
        return 0
    k = ring_do_enqueue(d.rhdr, w * RING_HDR_WORDS, d.rslots, w * d.cfg[D_RING_SIZE], pkts,
                        np.int64(0), n, _VAR, _SINGLE)
    d.wst[w, W_RET] += k
    d.wst[w, W_DONE] += k
    return k


@kernel
def distributor_return_or_free(dom, d, w, lcore, pkts, n, hold_ns, idle_max_us):
    """Worker ``w``: hand all of ``pkts[:n]`` back (:func:`distributor_return_burst`), waiting
    with :func:`~pktbuf.idle.idle_backoff` while the return ring is full; if it stays full
    for ``hold_ns`` (nobody collects), free the rest -- never strand them -- counted as done.
    Returns how many were freed.  ``pkts`` is reordered (the rest moved to the front)."""
    k = distributor_return_burst(d, w, pkts, n)
    waited = 0
    t0 = now_ns()
    while k < n:
        for i in range(n - k):              # the rest to the front
            pkts[i] = pkts[k + i]
        n -= k
        k = distributor_return_burst(d, w, pkts, n)
        if k < n:
            if now_ns() - t0 > hold_ns:
                pktmbuf_free_bulk(dom, lcore, pkts[k:], n - k)
                distributor_worker_done(d, w, n - k)
                return n - k
            idle_backoff(waited, idle_max_us)
            waited += 1
    return 0


@kernel
def distributor_returned_pkts(d, out, n):
    """The distributor: take up to ``n`` packets the workers handed back into ``out[:n]``,
    reading the return rings round robin from where the last call stopped (so no worker's
    returns wait behind another's); returns the count."""
    if n > out.size:
        n = out.size
    nw = d.cfg[D_WORKERS]
    size = d.cfg[D_RING_SIZE]
    got = np.int64(0)
    w = d.rr[0]
    if w < 0 or w >= nw:
        w = 0
    for _ in range(nw):
        if got >= n:
            break
        k = ring_do_dequeue(d.rhdr, w * RING_HDR_WORDS, d.rslots, w * size, out, got,
                            n - got, _VAR, _SINGLE)
        d.st[w, W_RETD] += k
        got += k
        w += 1
        if w == nw:
            w = 0
    d.rr[0] = w
    return got


@kernel
def distributor_ring_count(d, w):
    """Packets waiting in worker ``w``'s ring (-1 for a worker id it does not have)."""
    if w < 0 or w >= d.cfg[D_WORKERS]:
        return -1
    return ring_count_at(d.hdr, w * RING_HDR_WORDS)
