"""The queue blocks of an AF_XDP port and the ``linux/if_xdp.h`` values the kernels use.

An AF_XDP socket has four single-producer/single-consumer rings shared with the kernel, each
a ``producer`` and a ``consumer`` u32 (free-running), a ``flags`` u32 and ``size`` entries
(a power of two) at offsets the kernel reports (``XDP_MMAP_OFFSETS``):

* fill (u64 UMEM addresses, user -> kernel): frames the kernel may receive into;
* Rx (``struct xdp_desc`` {u64 addr, u32 len, u32 options}, kernel -> user): received frames;
* Tx (``xdp_desc``, user -> kernel): frames to send;
* completion (u64 addresses, kernel -> user): sent frames, the Tx ``addr`` unchanged.

In unaligned-chunk mode an address's low 48 bits are a base and its high 16 bits an offset
added to it (``XSK_UNALIGNED_BUF_OFFSET_SHIFT``): the kernel returns an Rx frame as
``fill address | (headroom + 256) << 48``.

The UMEM block holds what both directions of one socket need: the pool geometry and one
ownership byte per mbuf of the pool (``OWN_*``) -- which frames the kernel holds, so every
address it hands back is checked against what was given to it.
"""
from __future__ import annotations

import numpy as np

from ...block import Layout

XDP_PACKET_HEADROOM = 256
XDP_RING_NEED_WAKEUP = 1
ADDR_MASK = (1 << 48) - 1                # XSK_UNALIGNED_BUF_ADDR_MASK
OFFSET_SHIFT = 48                        # XSK_UNALIGNED_BUF_OFFSET_SHIFT

# -- a ring's words in a queue's cfg: producer, consumer, flags and descriptor addresses, size
R_PROD = 0
R_CONS = 1
R_FLAGS = 2
R_DESC = 3
R_SIZE = 4
R_WORDS = 5

# -- the UMEM block -----------------------------------------------------------------------------
U_POOL = 0              # pool id of the mbufs whose buffers are the UMEM's frames
U_OBJ_BASE = 1          # first handle of that pool
U_NB_OBJ = 2            # its size
U_STRIDE = 3            # object stride in the region
U_PRIV = 4              # private area in front of each buffer: buffer k is at k*stride + priv
U_CHUNK = 5             # chunk_size: the bytes of a buffer the kernel may use
U_RX_OFF = 6            # where received data starts in a buffer (UMEM headroom + 256)
U_MAX_LEN = 7           # the longest frame Tx accepts (MTU + 14)
U_WORDS = 8

OWN_USER = 0            # the mbuf is not the kernel's
OWN_FILL = 1            # posted to the fill ring (or received, not yet taken from the Rx ring)
OWN_TX = 2              # on the Tx ring, not yet completed

AF_XDP_UMEM = Layout("af_xdp_umem", [
    ("cfg", np.int64, U_WORDS),
    ("own", np.uint8, None),             # per mbuf of the pool: OWN_*
])
"""The UMEM of one socket: pool geometry and who holds each frame."""

# -- Rx queue ------------------------------------------------------------------------------------
RC_FD = 0
RC_FILL = 1             # the fill ring's R_* words
RC_RX = RC_FILL + R_WORDS
RC_UMEM = RC_RX + R_WORDS  # address of the AF_XDP_UMEM block
RC_PORT = RC_UMEM + 1
RC_TARGET = RC_PORT + 1    # frames to keep posted (fill ring + Rx ring)
RC_FLAGS = RC_TARGET + 1   # RXF_*
RC_BATCH = RC_FLAGS + 1    # with RC_COALESCE_NS: frames that are delivered without waiting
RC_COALESCE_NS = RC_BATCH + 1  # hold a short ring back up to this long (0: never)
RC_WORDS = 24

RXF_BUSY_POLL = 1       # recvfrom() on an empty Rx ring (busy_budget > 0)

RS_PACKETS = 0
RS_BYTES = 1
RS_ERRORS = 2           # ierrors: Rx descriptors that were not valid
RS_NOMBUF = 3           # refills that found the pool empty
RS_BAD_DESC = 4         # Rx descriptors naming no frame we posted, or a length that overruns it
RS_FILL_PROD = 5        # our fill-ring producer index (published with a release store)
RS_FILL_CONS = 6        # the kernel's fill consumer, as last read
RS_RX_CONS = 7          # our Rx consumer index
RS_RX_PROD = 8          # the kernel's Rx producer, as last read
RS_POSTED = 9           # frames the kernel holds for Rx (fill ring + Rx ring)
RS_FILL_FULL = 10       # refills that found no room in the fill ring
RS_WAKEUPS = 11         # recvfrom() calls
RS_WAITS = 12           # af_xdp_rx_wait calls that slept in poll()
RS_FILLED = 13          # frames posted to the fill ring, in all
RS_BURSTS = 14          # bursts that delivered frames
RS_HELD_SINCE = 15      # coalescing: when a short ring was first held back (ns), 0 = not
RS_WORDS = 16

RX_MAX_BURST = 1024
FILL_BATCH = 64         # the fill ring is refilled in bulk, at least this many at a time

AF_XDP_RXQ = Layout("af_xdp_rxq", [
    ("cfg", np.int64, RC_WORDS),
    ("st", np.int64, RS_WORDS),
    ("scr", np.int32, None),             # mbufs of a refill / bad frames of a burst
])
"""One Rx queue (one socket's fill and Rx rings), for
:func:`~pktbuf.drivers.af_xdp.rx.af_xdp_rx_burst`."""

# -- Tx queue ------------------------------------------------------------------------------------
TC_FD = 0
TC_TX = 1               # the Tx ring's R_* words
TC_COMP = TC_TX + R_WORDS
TC_UMEM = TC_COMP + R_WORDS
TC_PORT = TC_UMEM + 1
TC_WORDS = 16

TS_PACKETS = 0
TS_BYTES = 1
TS_ERRORS = 2           # oerrors: packets taken and dropped (too long, too short)
TS_TX_PROD = 3          # our Tx producer index
TS_TX_CONS = 4          # the kernel's Tx consumer, as last read
TS_COMP_CONS = 5        # our completion consumer index
TS_COMP_PROD = 6        # the kernel's completion producer, as last read
TS_INFLIGHT = 7         # frames on the Tx ring or sent and not completed
TS_COPIED = 8           # packets copied into a UMEM frame (not in the UMEM, indirect, chained)
TS_NOMBUF = 9           # bursts that stopped for want of a UMEM frame to copy into
TS_FULL = 10            # bursts that stopped at a full Tx ring
TS_KICKS = 11           # sendto() calls
TS_KICK_ERRORS = 12     # sendto() errors other than EAGAIN/EBUSY/ENOBUFS (e.g. ENETDOWN)
TS_LAST_ERRNO = 13
TS_BAD_COMP = 14        # completion addresses naming no frame on the Tx ring
TS_TOO_LONG = 15
TS_RUNT = 16
TS_COMPLETED = 17
TS_NOT_OWNED = 18       # handles of frames the kernel holds, refused
TS_WORDS = 24

TX_MAX_BURST = 1024

AF_XDP_TXQ = Layout("af_xdp_txq", [
    ("cfg", np.int64, TC_WORDS),
    ("st", np.int64, TS_WORDS),
    ("scr_free", np.int32, TX_MAX_BURST),   # packets of a burst to free (copied, dropped)
    ("scr_comp", np.int32, None),           # completed frames to free
])
"""One Tx queue (one socket's Tx and completion rings), for
:func:`~pktbuf.drivers.af_xdp.tx.af_xdp_tx_burst`."""
