"""The queue block of a ring port: which ring, the port id, the counters.

A ring port's queue is one :mod:`pktbuf.buf.ring` ring of mbuf handles.  Sending enqueues the
handles (the mbufs change owner, nothing is copied); receiving dequeues them.  As in DPDK's
``net_ring``, a queue pair may use one ring for both directions (a loopback: what the port
sends, it receives), or two ports may share rings (what one sends, the other receives).
"""
from __future__ import annotations

import numpy as np

from ...block import Layout

# configuration words (cfg)
C_HDR = 0           # address of the ring's header (uint32[RING_HDR_WORDS])
C_SLOTS = 1         # address of its slots (int32[C_SIZE])
C_SIZE = 2          # number of slots (a power of two)
C_PORT = 3          # port id written into received mbufs
C_WORDS = 8

# counters (st), plain increments: one thread per queue, as in DPDK
S_PACKETS = 0       # Rx: packets received / Tx: packets enqueued
S_BYTES = 1         # their pkt_len summed
S_ERRORS = 2        # Tx: packets the ring had no room for (DPDK's net_ring counts them as errors)
S_WORDS = 8

ETH_RING_QUEUE = Layout("eth_ring_queue", [
    ("cfg", np.int64, C_WORDS),
    ("st", np.int64, S_WORDS),
])
"""One queue of a ring port, passed to :func:`~pktbuf.drivers.ring.burst.eth_ring_rx_burst` /
:func:`~pktbuf.drivers.ring.burst.eth_ring_tx_burst`."""
