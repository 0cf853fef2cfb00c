"""The per-queue state that the data-path kernels work on.

One :data:`MEMIF_QUEUE` block (its arrays in one memory area) per memif queue.  The arrays are
allocated once, when the interface is created, and never replaced: on connect the facade writes
the ring address, region table and sizes into them, on disconnect it marks them down.  So a
queue taken once (``memif.rx_queue(0)``) stays valid across reconnects, and a user's ``@njit``
loop never holds a dead view.  Shared memory is reached only through the addresses in ``cfg``
and ``regions``; nothing in the tuple is a view of peer memory.

Disconnect vs data path (DPDK 22.11 unmaps while a lcore may still be inside rx/tx and
crashes; docs/memif.md, "Where DPDK 22.11 differs"): every burst enters with an atomic
increment of ``st[QS_BUSY]`` and then checks ``st[QS_UP]``; it leaves with a decrement.  Taking
a link down (:func:`queue_down`) exchanges ``QS_UP`` to 0 -- a full barrier -- and then waits
for ``QS_BUSY`` to reach 0.  Only after that does the control plane unmap anything, so a burst
either saw the link down and touched nothing, or finished before the memory went away.

A queue must be used by one thread at a time (as a DPDK queue), because its cursors and scratch
arrays are not shared-safe; different queues of one interface may run in different threads.
"""
from __future__ import annotations

import numpy as np

from ...block import Layout
from ...buf.mempool.layout import MAX_POOLS
from ..common.gate import (QS_BUSY, QS_ERR, QS_ERR_VAL, QS_UP, queue_down,  # noqa: F401
                           queue_enter, queue_fail, queue_leave, queue_up)
from .proto import MAX_LOG2_RING_SIZE, MAX_REGIONS

MAX_RING = 1 << MAX_LOG2_RING_SIZE
SCRATCH = MAX_RING
SCRATCH_MB = 4 * MAX_RING

# configuration words (cfg)
Q_KIND = 0          # K_*
Q_PATH = 1          # P_*: the copy path chosen at connect
Q_RING = 2          # address of the ring header in this process
Q_N = 3             # ring size 2**log2
Q_MASK = 4
Q_BSIZE = 5         # memif buffer size (client: its own; server: the size it expects)
Q_BUF_BASE = 6      # client copy mode: address of slot 0's buffer in region 0
Q_POOL = 7          # mempool id Rx allocates from
Q_MBUF_CAP = 8      # data room - headroom of that pool's mbufs
Q_EVENTFD = 9       # the ring's eventfd (-1 none)
Q_NREGIONS = 10
Q_PORT = 11         # value stored in mbuf.port on Rx
Q_ZC_REGION = 12    # zero-copy Rx: region index of the Rx pool
Q_FN_GENERAL = 13   # address of the general copy loop's C wrapper, this process's (.variants)
Q_FN_PATH = 14      # zero-copy: address of the zero-copy loop's C wrapper (.variants)
Q_WORDS = 16

# queue kinds: (role, direction)
K_NONE = 0
K_CLIENT_TX = 1     # C2S producer: writes head
K_CLIENT_RX = 2     # S2C receiver: owns the buffers, writes head (refill)
K_SERVER_RX = 3     # C2S receiver: writes tail
K_SERVER_TX = 4     # S2C producer: writes tail
K_CLIENT_TX_ZC = 5
K_CLIENT_RX_ZC = 6

# copy paths
P_GENERAL = 0       # any sizes: packs bytes, one comparison per copy
P_EQ = 1            # memif buffer == mbuf data room
P_LT = 2            # memif buffer <  mbuf data room
P_GT = 3            # memif buffer >  mbuf data room
PATH_NAMES = {P_GENERAL: "general", P_EQ: "eq", P_LT: "lt", P_GT: "gt"}

# queue status words (st): line 0 is written by the control plane and the burst entry/exit only
# (QS_UP, QS_BUSY, QS_ERR, QS_ERR_VAL: the burst gate, pktbuf.drivers.common.gate)
QS_LAST = 8          # cursor: next slot to consume (Rx) / next to fill (Tx), free-running
QS_HEAD = 9          # client Rx: the head we published (refill); zero-copy Tx: reclaim cursor
QS_PACKETS = 16
QS_BYTES = 17
QS_DROPS = 18        # Tx: packets not sent because the ring was full
QS_NOMBUF = 19       # Rx: bursts that found no mbufs (packets left in the ring)
QS_KICKS = 20        # eventfd writes
QS_BURSTS = 21
QS_FALLBACK = 22     # bursts that had to leave the fast path (descriptor lengths)
QS_WORDS = 24

MEMIF_QUEUE = Layout("memif_queue", [
    ("cfg", np.int64, Q_WORDS),            # configuration written at connect (see Q_*)
    ("st", np.int64, QS_WORDS),            # link flag, busy count, cursors, counters (see QS_*)
    ("regions", np.uint64, MAX_REGIONS, (2,)),   # (address in this process, size) per region
    ("slots", np.int32, MAX_RING),         # zero-copy: the mbuf that owns each slot (-1 = none)
    ("scr_addr", np.int64, SCRATCH),       # per-descriptor buffer address taken once from the ring
    ("scr_len", np.int64, SCRATCH),        # per-descriptor length (or capacity, for Tx)
    ("scr_end", np.int64, SCRATCH),        # per-packet end index into scr_addr/scr_len
    ("scr_mb", np.int32, SCRATCH_MB),      # mbufs of one Rx burst / reclaimed by zero-copy Tx
    ("pool_region", np.int32, MAX_POOLS),  # zero-copy: region index of each pool (-1 = not shared)
])
"""State of one memif queue (a block), passed to
:func:`~pktbuf.drivers.memif.datapath.memif_rx_burst` / :func:`~pktbuf.drivers.memif.datapath.memif_tx_burst`."""



def queue_alloc():
    """Fresh, down queue state (done once per queue, at interface creation)."""
    q = MEMIF_QUEUE.create()
    q.slots[:] = -1
    q.pool_region[:] = -1
    q.cfg[Q_EVENTFD] = -1
    return q


