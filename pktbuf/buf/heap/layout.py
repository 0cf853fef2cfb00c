"""Memory layout of an rte_malloc-style heap: the element table and the control words.

The heap manages one contiguous memory region (a memfd :class:`~pktbuf.shm.Region`) cut into
*grains* of 64 bytes (a cache line; every block starts on one, as DPDK aligns every element to
``RTE_CACHE_LINE_SIZE``).  An *element* is a run of grains: free, or a block handed out.

Element headers are not stored in front of the data, as DPDK's ``struct malloc_elem`` is, but in
a side table indexed by grain (``elems[g]`` describes the element starting at grain ``g``;
entries of grains inside an element have ``state == ELEM_NONE``).  Why a side table:

* freeing validates a pointer by one compare-and-swap on ``elems[g].state``: a pointer that is
  not the start of a live block -- into the middle of a block, into free memory, outside the
  heap, already freed -- fails it and changes nothing, whatever bytes the user wrote;
* a block overrun cannot corrupt the heap's own bookkeeping;
* a block needs no header space, so a 64-byte request takes one grain.

The table is a lazily committed mapping (32 bytes per 64-byte grain of address space, committed
only where elements start).

``ELEM_DTYPE`` (all int32; grains, not bytes):

=========  ============================================================================
``state``  ``ELEM_NONE`` (not an element start), ``ELEM_FREE``, ``ELEM_BUSY`` (handed out),
           ``ELEM_FREEING`` (claimed by its owner: being freed or resized; not free yet)
``size``   grains in the element
``prev``   start grain of the element just below, -1 for the first
``fnext``  free-list links (grain, -1 = none) while ``ELEM_FREE``
``fprev``
``dlo``    *dirty* range ``[dlo, dhi)`` in absolute grains: bytes there may be non-zero;
``dhi``    everything else in a free element is zero.  Empty when ``dlo >= dhi``.
``cls``    the free list the element is on (-1 when not free)
=========  ============================================================================

Control words (``ctl``, int64): line 0 holds the spin lock and what only the lock holder writes
(free-list bitmap, counters); line 1 the description (read-mostly: the lcore caches' fast path
reads it without touching line 0); lines 2-5 the 32 free-list heads.

``ELEM_CACHED`` blocks are freed blocks kept (zeroed) in one lcore's cache: allocated as far
as the shared heap is concerned, free for the user (statistics count them as free).
"""
from __future__ import annotations

import numpy as np

from ...block import Layout
from ...lcore import MAX_LCORE

GRAIN_SHIFT = 6
GRAIN = 1 << GRAIN_SHIFT          # 64 bytes
MAX_GRAINS = (1 << 31) - 1        # grain indices are int32: up to 128 GiB per heap

ELEM_DTYPE = np.dtype([
    ("state", np.int32),
    ("size", np.int32),
    ("prev", np.int32),
    ("fnext", np.int32),
    ("fprev", np.int32),
    ("dlo", np.int32),
    ("dhi", np.int32),
    ("cls", np.int32),
])
assert ELEM_DTYPE.itemsize == 32

ELEM_NONE = 0
ELEM_FREE = 1
ELEM_BUSY = 2
ELEM_FREEING = 3
ELEM_CACHED = 4       # freed into an lcore's cache: zero, reusable only by that lcore

# free lists: class k holds elements of (2**(k-1), 2**k] grains (class 0: one grain)
N_CLASSES = 32

# ctl words
H_LOCK = 0
H_NONEMPTY = 1        # bit k set iff free list k is not empty
H_ALLOC_COUNT = 2     # elements handed out (BUSY or FREEING)
H_ALLOC_GRAINS = 3    # grains in them
H_FREE_GRAINS = 4     # grains in free elements
H_FREE_COUNT = 5      # free elements
H_LAST_OWNER = 6      # lock statistics only: the row that took the lock last
H_BASE = 8            # virtual address of grain 0
H_NGRAINS = 9
H_ZERO_IN_LOCK = 10   # 1: zero freed memory inside the lock (the A/B baseline)
H_MAGIC = 11
H_CACHE_GRAINS = 12   # largest block (grains) the lcore caches keep; 0: no caches
H_CACHE_BYTES = 13    # at most this many bytes per bin and lcore (and at least one block)
H_CACHE_LARGE = 14    # largest block (grains) an lcore's one large slot keeps; 0: none
H_HEADS = 16          # 32 free-list heads
HEAP_CTL_WORDS = H_HEADS + N_CLASSES

HEAP_MAGIC = 0x48454150  # "HEAP"

# Per-lcore caches of freed small blocks (int32 words; one row per lcore, see .cache).  Row:
# one line of header, then one 64-byte line per bin: bin b holds blocks of b + 1 grains,
# word 0 the count, words 1..CACHE_DEPTH the blocks' grains (a stack).
CACHE_BINS = 64                   # 1 .. 64 grains: blocks up to 4 KiB
CACHE_LINE_I32 = 16
CACHE_DEPTH = CACHE_LINE_I32 - 1  # 15 blocks per bin at most
C_LOCK = 0                        # 0 free, 1 held (owner's operations, or a flush)
C_COUNT = 1                       # blocks in this cache
C_GRAINS = 2                      # grains in them
C_LARGE = 3                       # the large slot: grain + 1 of the block it holds, 0 = empty
C_BIN0 = CACHE_LINE_I32
CACHE_ROW = C_BIN0 + CACHE_BINS * CACHE_LINE_I32
CACHE_ROWS = MAX_LCORE
CACHE_MAX_DEFAULT = CACHE_BINS * GRAIN      # 4 KiB; see docs/heap.md for why
CACHE_BYTES_DEFAULT = 16 << 10
CACHE_LARGE_DEFAULT = 1 << 20               # the large slot: one block of 4 KiB+ .. 1 MiB

# Lock statistics (int64 words per row; row r < LS_ROWS - 1 is lcore r, the last row every
# caller without an lcore).  Written only by the instrumented build of the heap's lock path
# (kernels compiled with ``stats=True``); the release build never touches them.
LS_ACQUIRE = 0        # lock acquisitions
LS_CONTENDED = 1      # ... that found the lock held at the first attempt
LS_HANDOFF = 2        # ... whose previous holder was another row (the lock line changed cores)
LS_WAIT_CYC = 3       # TSC cycles from the first attempt to owning the lock
LS_BACKOFF_CYC = 4    # ... of which in pause loops
LS_HOLD_CYC = 5       # TSC cycles from owning to releasing
LS_ZERO_CYC = 6       # TSC cycles spent clearing freed blocks (inside or outside the lock)
LS_ZERO_BYTES = 7     # bytes cleared
LS_CACHE_HIT = 8      # mallocs served by the lcore cache
LS_CACHE_PUT = 9      # frees kept in the lcore cache
LS_HIST_WAIT = 16     # 32 buckets: wait of a contended acquisition, bucket floor(log2(cycles))
LS_HIST_HOLD = 48     # 32 buckets: hold time, likewise
LS_WORDS = 80
LS_ROWS = 9
LS_ANY_ROW = LS_ROWS - 1

# heap_get_stats output (rte_malloc_socket_stats fields, bytes)
STAT_NAMES = ("heap_totalsz_bytes", "heap_freesz_bytes", "heap_allocsz_bytes",
              "greatest_free_size", "free_count", "alloc_count", "cached_bytes", "cached_count")

# heap_validate reasons (info[0])
V_OK = 0
V_SIZE = 1            # element size < 1 or past the end
V_STATE = 2           # element start with a bad state
V_PREV = 3            # prev link disagrees with the walk
V_ADJACENT_FREE = 4   # two free elements side by side
V_INTERIOR = 5        # a grain inside an element is marked as an element start
V_FREE_LIST = 6       # free lists and FREE states disagree
V_COUNTERS = 7        # counters disagree with the walk
V_DIRTY_RANGE = 8     # dirty range outside its element
V_NOT_ZERO = 9        # a non-zero byte outside the dirty range of a free element
V_BITMAP = 10         # non-empty bitmap disagrees with the lists
V_LOCKED = 11         # validate found the lock held (nobody else may run)
V_CACHE = 12          # lcore caches and CACHED elements disagree
VALIDATE_REASONS = {
    V_SIZE: "element size out of range", V_STATE: "bad element state",
    V_PREV: "prev link disagrees with the element order",
    V_ADJACENT_FREE: "two adjacent free elements", V_INTERIOR: "stray element start inside an element",
    V_FREE_LIST: "free lists disagree with the element states",
    V_COUNTERS: "counters disagree with the elements", V_DIRTY_RANGE: "dirty range outside its element",
    V_NOT_ZERO: "non-zero byte in free memory that should be zero",
    V_BITMAP: "free-list bitmap disagrees with the lists", V_LOCKED: "heap lock held",
    V_CACHE: "lcore caches disagree with the cached elements",
}

HEAP = Layout("heap", [
    ("ctl", np.int64, HEAP_CTL_WORDS),
    ("cache", np.int32, CACHE_ROWS * CACHE_ROW),
    ("lockstat", np.int64, LS_ROWS * LS_WORDS),
    ("elems", ELEM_DTYPE, None),        # one per grain of the heap's region
])
"""A heap's block (``ctl`` int64 words, ``elems`` ELEM_DTYPE per grain): take it from
``heap.state`` and pass it to the kernels in :mod:`pktbuf.buf.heap.kernels`."""
