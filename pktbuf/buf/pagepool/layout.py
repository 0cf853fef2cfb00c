"""Memory layout of a page pool: its block, constants, flags and statistics names.

A pool hands out whole order-0 pages of one :mod:`arena <pktbuf.buf.pagepool.arena>`.  Its state
is a block of five arrays, :data:`PAGE_POOL`:

* ``ctl`` -- ``int64[PP_CTL_WORDS]``: line 0 is the alloc side (``alloc.count`` and
  ``pages_state_hold_cnt``, touched by the pool's own context only), line 1 the description,
  line 2 ``pages_state_release_cnt`` (atomic: pages leave the pool from any thread).
* ``cache`` -- ``int32[PP_ALLOC_CACHE_SIZE]``: the alloc cache, a LIFO of 128 pages.  Lock-free,
  hence only the pool's own context (one RX queue / NAPI instance in Linux, one thread here) may
  allocate or recycle *directly*.
* ``ring_hdr``/``ring_slots`` -- the recycle ring (Linux's ``ptr_ring``): a
  :mod:`pktbuf.buf.ring` ring, multi-producer (pages come back from any thread) and
  single-consumer (only the alloc side refills from it).  Linux serialises producers with a
  spin lock; the core ring reserves slots with one compare-and-swap per call instead, which
  is the same "one synchronisation per batch" that the bulk put relies on.
* ``stats`` -- ``int64[PP_STATS_WORDS]``: the eleven counters of ``CONFIG_PAGE_POOL_STATS``
  with Linux's names and meanings (see :data:`PP_STAT_NAMES`); the alloc ones on one cache
  line (plain adds, one context), the recycle ones on another (atomic adds where any thread
  can reach them -- Linux keeps those per CPU instead).

The kernels are in :mod:`pktbuf.buf.pagepool.kernels` (which re-exports everything here).
"""
from __future__ import annotations

import numpy as np

from ...block import Layout
from ..ring.kernels import RING_HDR_WORDS

PP_ALLOC_CACHE_SIZE = 128     # alloc cache entries
PP_ALLOC_CACHE_REFILL = 64    # refill unit = NAPI budget
XDP_BULK_QUEUE_SIZE = 16      # on-stack staging of the bulk put
PP_RING_DEFAULT = 1024        # ring size when pool_size is not given
PP_RING_MAX = 16384

# creation flags (values as Linux's)
PP_FLAG_DMA_MAP = 0x1         # map a page when it enters the pool, unmap when it leaves
PP_FLAG_ALL = PP_FLAG_DMA_MAP

# slow-path strategies
PP_REFILL_BULK = 0
PP_REFILL_SINGLE = 1

# pool life cycle
PP_ALIVE = 1
PP_DETACHED = 2     # destroyed, pages still in flight: release() again later
PP_FREED = 3        # nothing in flight; the pool is gone

# ctl words
P_COUNT = 0         # alloc.count
P_HOLD = 1          # pages_state_hold_cnt
P_DESTROY_CNT = 2
P_ID = 8
P_FLAGS = 9
P_REFILL = 10
P_STATE = 11
P_DIRECT = 12       # direct recycling allowed (cleared by destroy, as cpuid = -1 / napi = NULL)
P_POOL_SIZE = 13
P_RELEASE = 16      # pages_state_release_cnt
PP_CTL_WORDS = 24

# statistics (index into stats); names are Linux's struct page_pool_stats fields
PP_STAT_FAST = 0
PP_STAT_SLOW = 1
PP_STAT_SLOW_HIGH_ORDER = 2
PP_STAT_EMPTY = 3
PP_STAT_REFILL = 4
PP_STAT_WAIVE = 5
PP_STAT_CACHED = 8
PP_STAT_CACHE_FULL = 9
PP_STAT_RING = 10
PP_STAT_RING_FULL = 11
PP_STAT_RELEASED_REFCNT = 12
PP_STATS_WORDS = 16
PP_STAT_NAMES = ("fast", "slow", "slow_high_order", "empty", "refill", "waive",
                 "cached", "cache_full", "ring", "ring_full", "released_refcnt")
PP_STAT_INDEX = (PP_STAT_FAST, PP_STAT_SLOW, PP_STAT_SLOW_HIGH_ORDER, PP_STAT_EMPTY, PP_STAT_REFILL, PP_STAT_WAIVE,
                 PP_STAT_CACHED, PP_STAT_CACHE_FULL, PP_STAT_RING, PP_STAT_RING_FULL, PP_STAT_RELEASED_REFCNT)

PAGE_POOL = Layout("page_pool", [
    ("ctl", np.int64, PP_CTL_WORDS),
    ("cache", np.int32, PP_ALLOC_CACHE_SIZE),
    ("ring_hdr", np.uint32, RING_HDR_WORDS),
    ("ring_slots", np.int32, None),     # the recycle ring: a power of two >= its size
    ("stats", np.int64, PP_STATS_WORDS),
])
"""A page pool's block: take it from ``pool.state`` and pass it, with the arena's block, to the
kernels."""
