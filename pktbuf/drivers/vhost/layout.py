"""Split-virtqueue layout (virtio 1.1 §2.6) and the per-queue state block of a vhost port.

Ring areas, as the front end lays them out in its memory (all little-endian):

* descriptor table, 16 bytes per entry: ``u64 addr, u32 len, u16 flags, u16 next`` -- read by
  the kernels as two ``u64`` words, the second split into len / flags / next;
* avail: ``u16 flags, u16 idx, u16 ring[N], u16 used_event`` -- a ``u16`` array;
* used: ``u16 flags, u16 idx, {u32 id, u32 len}[N], u16 avail_event`` -- a ``u16`` array for
  the words and a ``u32`` array for the entries (entry ``s`` at ``u32`` index ``1 + 2 s``).

One :data:`VHOST_QUEUE` block per vring that pktbuf serves.  It is allocated once with the port
and never replaced: the control thread writes the translated ring addresses and the region
table into it when a ring starts and marks it down when it stops, so a queue block taken once
stays valid across reconnects.  Peer memory is reached only through the addresses in ``cfg``
and ``regions``.
"""
from __future__ import annotations

import numpy as np

from ...block import Layout
from ..common.gate import QS_BUSY, QS_ERR, QS_ERR_VAL, QS_UP  # noqa: F401
from .proto import MAX_REGIONS

# descriptor flags
DESC_F_NEXT = 1
DESC_F_WRITE = 2
DESC_F_INDIRECT = 4
DESC_SIZE = 16
AVAIL_F_NO_INTERRUPT = 1
USED_F_NO_NOTIFY = 1

# u16 word indices in avail / used
A16_FLAGS = 0
A16_IDX = 1
A16_RING = 2            # ring[s] at 2 + s; used_event at 2 + N
U16_FLAGS = 0
U16_IDX = 1

IDX_MASK = 0xFFFF

# packed rings (virtio 1.1 §2.7): descriptor flags, event suppression flags
PACKED_F_AVAIL = 1 << 7
PACKED_F_USED = 1 << 15
EVENT_F_ENABLE = 0
EVENT_F_DISABLE = 1
EVENT_F_DESC = 2

# limits pktbuf sets itself (docs/vhost.md)
MAX_PIECES = 1024       # host-contiguous pieces of one packet (DPDK: 256, BUF_VECTOR_MAX)
MAX_BUFS = 1024         # guest Rx buffers one packet may take (mergeable)
MAX_FRAME = 65536       # frame bytes after the header a guest may send
SCRATCH_MB = 1024       # mbufs one received frame may take

# configuration words (cfg), written by the control thread while the queue is down
Q_DESC = 0              # host address of the descriptor table
Q_AVAIL = 1
Q_USED = 2
Q_N = 3
Q_MASK = 4
Q_HDR = 5               # virtio-net header bytes (10 or 12)
Q_MRG = 6               # MRG_RXBUF negotiated
Q_EVENT_IDX = 7         # EVENT_IDX negotiated
Q_INDIRECT = 8          # INDIRECT_DESC negotiated
Q_CALLFD = 9            # the call eventfd, -1 none
Q_POOL = 10             # mempool id Rx allocates from
Q_MBUF_CAP = 11         # data room of that pool's mbufs
Q_PORT = 12             # mbuf.port of received packets
Q_NREG = 13             # regions in use
Q_VRING = 14            # the vring's index (for reasons)
Q_PACKED = 15           # RING_PACKED negotiated: Q_AVAIL / Q_USED are the event areas
Q_KICKFD = 16           # the kick eventfd (vhost_rx_wait sleeps on it), -1 none
Q_WORDS = 20

# status words (st): QS_UP, QS_BUSY, QS_ERR, QS_ERR_VAL are the burst gate's
# (pktbuf.drivers.common.gate)
QS_LAST_AVAIL = 8       # next avail index to read (free-running u16)
QS_USED_IDX = 9         # next used index to write (free-running u16)
QS_PACKETS = 16
QS_BYTES = 17
QS_MISSED = 18          # Tx: packets not taken (no room in the guest's buffers)
QS_NOMBUF = 19          # Rx: bursts that found no mbufs (the chain stays in the ring)
QS_ERRORS = 20          # Rx: chains dropped (no frame after the header, or oversize)
QS_CALLS = 21           # call eventfd writes
QS_BURSTS = 22
QS_AVAIL_WRAP = 12      # packed: the wrap counter of QS_LAST_AVAIL
QS_USED_WRAP = 13       # packed: the wrap counter of QS_USED_IDX
QS_WAITS = 14           # vhost_rx_wait calls that slept in poll()
QS_WORDS = 24

# validation failures: the ring is failed, the link goes down with the reason
V_AVAIL_IDX = 1
V_HEAD = 2
V_NEXT = 3
V_LOOP = 4
V_WRITE = 5
V_ADDR = 6
V_INDIRECT = 7
V_INDIRECT_LEN = 8
V_NESTED = 9
V_PIECES = 10
V_BUFS = 11
V_REASONS = {
    V_AVAIL_IDX: "avail index ahead of the last one read by more than the ring size",
    V_HEAD: "chain head index past the ring",
    V_NEXT: "descriptor next index past its table",
    V_LOOP: "descriptor chain longer than its table (a loop)",
    V_WRITE: "descriptor WRITE flag the wrong way for this ring",
    V_ADDR: "descriptor address range outside the memory table",
    V_INDIRECT: "indirect descriptor not negotiated or with NEXT set",
    V_INDIRECT_LEN: "indirect table length not a multiple of 16, zero, or longer than the ring",
    V_NESTED: "indirect descriptor inside an indirect table",
    V_PIECES: f"packet spread over more than {MAX_PIECES} pieces",
    V_BUFS: f"packet needs more than {MAX_BUFS} buffers",
}


def reason(code: int, val: int) -> str:
    return f"{V_REASONS.get(int(code), f'ring failure {code}')} ({int(val)})"


VHOST_QUEUE = Layout("vhost_queue", [
    ("cfg", np.int64, Q_WORDS),
    ("st", np.int64, QS_WORDS),
    ("regions", np.uint64, MAX_REGIONS, (3,)),     # (gpa, size, host address) per region
    ("pc_addr", np.int64, MAX_PIECES),             # one packet's pieces: host address
    ("pc_len", np.int64, MAX_PIECES),              # and length
    ("buf_head", np.int64, MAX_BUFS),              # guest Rx: the chains of one packet
    ("buf_cap", np.int64, MAX_BUFS),               # and their capacities
    ("hdr", np.uint8, 64),                         # the virtio-net header written to the guest
    ("scr_mb", np.int32, SCRATCH_MB),              # the mbufs of one received frame
])
"""State of one vring pktbuf serves, passed to
:func:`~pktbuf.drivers.vhost.rx.vhost_rx_burst` / :func:`~pktbuf.drivers.vhost.tx.vhost_tx_burst`."""
