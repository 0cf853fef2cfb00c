"""``eth_ring_rx_burst`` / ``eth_ring_tx_burst``: a ring port's data path.

Same signature and semantics as every port type's burst kernels (``rte_eth_rx_burst`` /
``rte_eth_tx_burst``)::

    n = eth_ring_rx_burst(dom, q, lcore, out, 32)   # out[:n] are yours
    k = eth_ring_tx_burst(dom, q, lcore, pkts, n)   # pkts[:k] are the ring's now

The ring's own producer/consumer mode applies (a queue used by one thread on each side can be
a single-producer/single-consumer ring).  ``lcore`` is unused: nothing is allocated or freed.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...rawmem import addr_view
from ...buf.ring.kernels import RING_HDR_WORDS, ring_dequeue_burst, ring_enqueue_burst
from .layout import C_HDR, C_PORT, C_SIZE, C_SLOTS, S_BYTES, S_ERRORS, S_PACKETS

__all__ = ["eth_ring_rx_burst", "eth_ring_tx_burst"]


@kernel(inline="always")
def _ring(q):
    hdr = addr_view(q.cfg[C_HDR], RING_HDR_WORDS, np.uint32)
    slots = addr_view(q.cfg[C_SLOTS], q.cfg[C_SIZE], np.int32)
    return hdr, slots


@kernel
def eth_ring_rx_burst(dom, q, lcore, out, n):
    """Dequeue up to ``n`` mbufs into ``out[:n]``; returns how many.  Their ``port`` is set
    to this port's id."""
    if n > out.size:
        n = out.size
    if n <= 0:
        return 0
    hdr, slots = _ring(q)
    k = ring_dequeue_burst(hdr, slots, out, n)
    port = q.cfg[C_PORT]
    mb = dom.mb
    nbytes = 0
    for i in range(k):
        m = mb[out[i]]
        m.port = port
        nbytes += m.pkt_len
    q.st[S_PACKETS] += k
    q.st[S_BYTES] += nbytes
    return k


@kernel
def eth_ring_tx_burst(dom, q, lcore, pkts, n):
    """Enqueue up to ``n`` mbufs from ``pkts[:n]``; returns how many (the ring owns those)."""
    if n > pkts.size:
        n = pkts.size
    if n <= 0:
        return 0
    mb = dom.mb
    nbytes = 0
    for i in range(n):            # before the enqueue: once enqueued, a consumer may free them
        nbytes += mb[pkts[i]].pkt_len
    hdr, slots = _ring(q)
    k = ring_enqueue_burst(hdr, slots, pkts, n)
    for i in range(k, n):         # still ours
        nbytes -= mb[pkts[i]].pkt_len
    q.st[S_PACKETS] += k
    q.st[S_BYTES] += nbytes
    q.st[S_ERRORS] += n - k
    return k
