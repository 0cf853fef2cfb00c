"""The queue block of one vring pktbuf drives as a virtio front end, and its failure codes.

One :data:`VIRTIO_USER_QUEUE` block per vring.  Everything the back end can write (the used
ring, the descriptors and avail ring it can also overwrite) lives in the shared ring memory
(:mod:`.rings`); everything the kernels *trust* lives here, in private memory: which mbuf a
descriptor holds (``slot_mb``), how many descriptors a Tx chain took and their private links
(``chain_len``, ``dnext``), the free descriptor stack.  So a hostile back end can corrupt
packet bytes it was given, never pktbuf's bookkeeping: a used entry is honoured only if its id
names a descriptor pktbuf made available and has not yet had back.
"""
from __future__ import annotations

import numpy as np

from ...block import Layout
from ..common.gate import QS_BUSY, QS_ERR, QS_ERR_VAL, QS_UP  # noqa: F401
from ..vhost.layout import Q_AVAIL, Q_DESC, Q_N, Q_USED  # noqa: F401 (words 0-3, below)
from ..vhost.proto import MAX_REGIONS

MAX_QUEUE_SIZE = 32768   # ring entries per vring (the split ring's limit, virtio 1.1 §2.6;
                         # DPDK's back end accepts as many)
REFILL_CHUNK = 256       # Rx: mbufs one bulk allocation of a refill takes
IND_MAX = 16             # Tx: entries of one indirect table (the header and 15 segments)

# configuration words (cfg), written by the control thread while the queue is down
# words 0-3 (Q_DESC, Q_AVAIL, Q_USED, Q_N: the ring areas in the shared ring memory, the ring
# size) are the back end's, imported above, so both sides read a ring through one set of views
Q_MASK = 4
Q_HDR = 5                # virtio-net header bytes (10 or 12)
Q_MRG = 6                # MRG_RXBUF negotiated
Q_KICKFD = 7             # the kick eventfd, -1 none
Q_POOL = 8               # Rx: the pool buffers are posted from
Q_PORT = 9               # Rx: mbuf.port of received packets
Q_NREG = 10              # regions of the memory table (for the Tx check)
Q_HDRS = 11              # Tx: host address of the header slots (16 bytes per descriptor)
Q_VRING = 12
Q_RX_BATCH = 13          # Rx: refill once this many descriptors are free
Q_IN_ORDER = 14          # IN_ORDER negotiated: Tx chains come back in the order posted
Q_PACKED = 15            # RING_PACKED negotiated: Q_AVAIL / Q_USED are the event areas
Q_CALLFD = 16            # Rx: the call eventfd (virtio_user_rx_wait sleeps on it), -1 none
Q_EVENT_IDX = 17         # EVENT_IDX negotiated: kicks follow avail_event, calls used_event
Q_IND = 18               # Tx, INDIRECT_DESC negotiated: host address of the indirect tables
                         # (IND_MAX entries per descriptor / buffer id), 0 none
Q_WORDS = 20

# status words (st); QS_UP, QS_BUSY, QS_ERR, QS_ERR_VAL are the burst gate's
QS_AVAIL_IDX = 2         # next avail index this side publishes (free-running u16)
QS_USED_SEEN = 3         # next used index this side reads
QS_FREE = 4              # free descriptors (the top of ``free``)
QS_INFLIGHT = 5          # chains (Tx) / buffers (Rx) the back end holds
QS_NEXT_DESC = 6         # Tx with IN_ORDER: the next descriptor (chains are consecutive)
# packed rings: QS_AVAIL_IDX / QS_USED_SEEN are slots (0..N-1), with these wrap counters;
# ``free`` is then a stack of buffer ids (top QS_IDS) and QS_FREE counts free descriptors
QS_AVAIL_WRAP = 7
QS_USED_WRAP = 8
QS_IDS = 9
QS_WAITS = 12            # virtio_user_rx_wait calls that slept in poll()
QS_PACKETS = 16
QS_BYTES = 17
QS_MISSED = 18           # Tx: packets not taken (ring full)
QS_NOMBUF = 19           # Rx: refills that found no mbufs
QS_ERRORS = 20           # Tx: packets dropped (memory not shared); Rx: frames dropped (empty)
QS_KICKS = 21
QS_BURSTS = 22
QS_WORDS = 24

# used-ring violations: the queue fails, the link goes down with the reason
V_USED_IDX = 1
V_USED_ID = 2
V_USED_LEN = 3
V_NUM_BUFFERS = 4
V_USED_WRAP = 5
V_REASONS = {
    V_USED_IDX: "used index ahead of what was made available",
    V_USED_ID: "used id not a descriptor the back end holds (out of range, never given, "
               "or returned twice)",
    V_USED_LEN: "used length past the buffer, or shorter than the virtio-net header",
    V_NUM_BUFFERS: "num_buffers zero or more than the buffers the back end holds",
    V_USED_WRAP: "packed descriptor flags neither available nor used for the wrap counter",
}


def reason(code: int, val: int) -> str:
    return f"{V_REASONS.get(int(code), f'ring failure {code}')} ({int(val)})"


VIRTIO_USER_QUEUE = Layout("virtio_user_queue", [
    ("cfg", np.int64, Q_WORDS),
    ("st", np.int64, QS_WORDS),
    ("regions", np.int64, MAX_REGIONS, (2,)),     # (host address, size) of each shared region
    ("slot_mb", np.int32, MAX_QUEUE_SIZE),        # mbuf a descriptor holds (Tx: at the head;
                                                  # packed: by buffer id)
    ("slot_cap", np.int32, MAX_QUEUE_SIZE),       # Rx: bytes the buffer was posted with
    ("chain_len", np.int32, MAX_QUEUE_SIZE),      # Tx: descriptors of the chain at a head / id
    ("dnext", np.int32, MAX_QUEUE_SIZE),          # Tx: private next links of a chain
    ("free", np.int32, MAX_QUEUE_SIZE),           # free descriptor stack
    ("scr_mb", np.int32, MAX_QUEUE_SIZE),         # scratch: bulk alloc / free
    ("order", np.int32, MAX_QUEUE_SIZE),          # Tx: the head posted at avail slot s
])
"""State of one vring of a virtio-user port, passed to
:func:`~pktbuf.drivers.virtio_user.rx.virtio_user_rx_burst` /
:func:`~pktbuf.drivers.virtio_user.tx.virtio_user_tx_burst`."""
