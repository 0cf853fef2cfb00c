"""The distributor block: configuration, the Toeplitz table, the redirection table, and two
single-producer/single-consumer rings per worker (to it, and back from it), all in one piece
of memory.

A distributor is one block (:class:`~pktbuf.block.Block`, shared memory when workers are other
processes): the distributing thread is the only producer of every ring and worker ``w`` the only
consumer of ring ``w``, so the rings need no compare-and-swap -- a producer or consumer that
dies leaves at most its own ring stopped, never a half-moved head another side waits on.  The
return rings run the other way: worker ``w`` the only producer of return ring ``w``, the
distributing thread its only consumer (``rte_distributor_returned_pkts``).

Fields: ``cfg`` (below), ``st`` (the distributor's counters per worker, ``W_ENQ``/``W_FULL``)
and ``wst`` (each worker's own, ``W_DEQ``), one cache line per worker in each, so neither side
writes a line the other writes; ``lut`` (the key's Toeplitz table,
:func:`~pktbuf.net.rss.thash.thash_table_init`), ``reta`` (worker of ``hash & (size - 1)``),
``hdr``/``slots`` (the rings: worker ``w``'s header at ``hdr[w * RING_HDR_WORDS:]``, its
``ring_size`` slots at ``slots[w * ring_size:]``), ``rhdr``/``rslots`` (the return rings,
the same way), ``rr`` (the return ring the distributor reads first next time) and scratch for
one burst (written by the distributor only).
"""
from __future__ import annotations

import numpy as np

from ...block import Layout
from ...buf.ring.kernels import RING_HDR_WORDS
from ..rss.thash import TUPLE_MAX

MAX_WORKERS = 64
BURST_MAX = 1024        # packets per distributor_burst call at most (more: the call takes this many)

# cfg words
D_WORKERS = 0           # number of workers (rings)
D_RING_SIZE = 1         # slots per ring, a power of two
D_HASH = 2              # 1: hash every packet here; 0: use the mbuf's RSS hash (flag set), else 0
D_L4 = 3                # hash TCP/UDP ports too
D_MAGIC = 4
D_STOP = 5              # set by the distributing side: workers finish (they read it between slices)
D_WORDS = 8
MAGIC = 0x42525444      # "DTRB"

# st words, per worker (8 words = one cache line), written by the distributor
W_ENQ = 0               # packets handed to the worker's ring
W_FULL = 1              # packets refused because the ring was full (left with the caller)
W_RETD = 2              # packets the distributor took back from the worker's return ring
# wst words, per worker, written by that worker
W_DEQ = 0               # packets the worker took from its ring
W_DONE = 1              # packets it has finished with (freed or passed on): DEQ - DONE in hand
W_RET = 2               # packets it put in its return ring (counted in W_DONE too)
W_WORDS = 8

DISTRIB = Layout("distrib", [
    ("cfg", np.int64, D_WORDS),
    ("st", np.int64, MAX_WORKERS, (W_WORDS,)),
    ("wst", np.int64, MAX_WORKERS, (W_WORDS,)),
    ("lut", np.uint32, TUPLE_MAX, (256,)),
    ("reta", np.uint16, None),
    ("hdr", np.uint32, MAX_WORKERS * RING_HDR_WORDS),   # ring w's header at w * RING_HDR_WORDS
    ("slots", np.int32, None),
    ("rhdr", np.uint32, MAX_WORKERS * RING_HDR_WORDS),  # return ring w's header
    ("rslots", np.int32, None),
    ("rr", np.int64, 8),                     # the distributor's: next return ring to read
    ("cnt", np.int64, MAX_WORKERS + 1),      # scratch: packets per worker, then start offsets
    ("tk", np.int64, MAX_WORKERS),           # scratch: packets each worker's ring took
    ("wk", np.int32, BURST_MAX),             # scratch: worker of each packet
    ("srt", np.int32, BURST_MAX),            # scratch: the burst grouped by worker
])
"""Layout of a distributor (``reta``, ``slots`` and ``rslots`` sized when it is created)."""
