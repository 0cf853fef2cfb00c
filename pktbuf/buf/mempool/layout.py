"""Memory layout of a *domain*: the object table, the pool table, rings, caches and statistics.

A domain is one :class:`~pktbuf.block.Block` (kind ``"domain"``): every mempool kernel takes it
as its first argument, ``dom``, and reaches the arrays below as ``dom.<name>``.  Handles
(``int32`` indices into the object table) are meaningful across all pools of a domain, which is
what lets ``pktmbuf_free_bulk`` take an array that mixes pools, as DPDK's does.

Every array has its maximum size from the start and its pages are committed on first touch:
creating pools never moves anything, so a handle taken once (``pool.domain.state``) stays
valid for the life of the domain.  The block lives in a memfd placed in the domain's address
window (see :mod:`pktbuf.shm`), so another process can map it at the same address.

Per pool (``pid``):

* ``pools[pid]`` -- the pool description (:data:`POOL_DTYPE`).
* ``obj[obj_base : obj_base + size]`` -- the pool's object headers (:data:`OBJHDR_DTYPE`, 128
  bytes each; the mbuf layer views the same table as mbuf descriptors, ``dom.mb``).
* ``ring_hdr[pid * RING_HDR_WORDS:]`` + ``ring_slots[ring_base : ring_base + ring_size]`` --
  the pool's ring, with the layout of :mod:`pktbuf.buf.ring.kernels` ("ring_mp_mc" backend).
* ``cache_len[(pid * MAX_LCORE + lcore) * CACHE_LINE_WORDS]`` and
  ``cache_objs[(pid * MAX_LCORE + lcore) * CACHE_MAX_SIZE:][:cache_size]`` -- one cache per
  lcore, each length on its own cache line (with the cache's busy word, ``CACHE_W_BUSY``).
* ``stats[((pid * (MAX_LCORE + 1)) + lcore) * STAT_WORDS:]`` -- the statistics counters of
  that lcore (row ``MAX_LCORE`` collects calls made without a cache, with atomic adds because
  several threads may share it).

The arrays are flat (one dimension): kernels index them with unsigned arithmetic.  The facade
offers shaped views (``Domain.cache_len_view`` etc.) for inspection.
"""
from __future__ import annotations

import numpy as np

from ...block import Layout
from ...lcore import LCORE_ANY, MAX_LCORE  # noqa: F401  (defined in the base module lcore.py)
from ..ring.kernels import RING_HDR_WORDS

MAX_POOLS = 256          # pool ids are 16-bit in the object header; 0xFFFF is never used
CACHE_MAX_SIZE = 512     # RTE_MEMPOOL_CACHE_MAX_SIZE
CACHE_LINE_WORDS = 16    # int32 words per cache line
# word 0 of an lcore's cache line is the cache length; word CACHE_W_BUSY says which operation
# the owner is inside while the ring and the cache disagree (0: none).  The slow paths set it
# before touching the ring and clear it with the same 64-bit store that publishes the new
# length, so a process killed in between leaves the old length and the operation's name, and
# whoever reclaims the cache knows which slots are still its own (docs/multiprocess.md)
CACHE_W_BUSY = 1
CACHE_BUSY_FLUSH_HALF = 1    # put: the bottom size/2 objects are going to the ring
CACHE_BUSY_REFILL = 2        # get: the ring is refilling the cache's bottom size/2 slots
CACHE_BUSY_FLUSH = 3         # cache_flush: the whole cache is going to the ring

# pool flags
POOL_F_USED = 0x1
POOL_F_SP_PUT = 0x2      # RTE_MEMPOOL_F_SP_PUT: single-producer ring
POOL_F_SC_GET = 0x4      # RTE_MEMPOOL_F_SC_GET: single-consumer ring
POOL_F_MBUF = 0x8        # objects are packet mbufs (pktmbuf pool)

POOL_DTYPE = np.dtype([
    ("flags", np.uint32),
    ("size", np.uint32),         # number of objects
    ("obj_base", np.int32),      # first handle; the pool owns [obj_base, obj_base + size)
    ("cache_size", np.uint32),   # per-lcore cache size (0 = no cache)
    ("ring_base", np.int64),     # offset of the ring's slots in ring_slots
    ("ring_size", np.uint32),    # power of two > size
    ("elt_size", np.uint32),     # object stride in the data region
    ("data_room", np.uint16),    # mbuf pools: buf_len of every mbuf
    ("headroom", np.uint16),     # mbuf pools: data_off after reset, min(HEADROOM, data_room)
    ("priv_size", np.uint16),    # mbuf pools: private area in front of each buffer
    ("_pad", np.uint16),
    ("region_addr", np.uint64),  # virtual address of the pool's data region
    ("region_size", np.uint64),
], align=True)

# object header: what the mempool knows of each object.  128 bytes, so that the mbuf layer can
# view the same table as mbuf descriptors; the four fields sit where struct rte_mbuf (and
# pktbuf's MBUF_DTYPE) has buf_addr, buf_iova, pool and state.
OBJHDR_DTYPE = np.dtype({
    "names": ["buf_addr", "buf_iova", "pool", "state"],
    "formats": [np.uint64, np.uint64, np.uint16, np.uint16],
    "offsets": [0, 8, 56, 58],
    "itemsize": 128,
})
OBJ_FREE = 0             # state: in its pool (ring or a cache)
OBJ_ALLOC = 0xA110       # state: handed out
POOL_NONE = 0xFFFF       # pool id of an object of no live pool

# statistics counters (DPDK's rte_mempool_debug_stats names)
STAT_PUT_BULK = 0
STAT_PUT_OBJS = 1
STAT_PUT_COMMON_POOL_BULK = 2
STAT_PUT_COMMON_POOL_OBJS = 3
STAT_GET_COMMON_POOL_BULK = 4
STAT_GET_COMMON_POOL_OBJS = 5
STAT_GET_SUCCESS_BULK = 6
STAT_GET_SUCCESS_OBJS = 7
STAT_GET_FAIL_BULK = 8
STAT_GET_FAIL_OBJS = 9
STAT_NAMES = ("put_bulk", "put_objs", "put_common_pool_bulk", "put_common_pool_objs",
              "get_common_pool_bulk", "get_common_pool_objs", "get_success_bulk",
              "get_success_objs", "get_fail_bulk", "get_fail_objs")
STAT_WORDS = 16          # int64 per row = two cache lines

# cfg words
CFG_DEBUG = 0            # non-zero: kernels run their sanity checks (see pktbuf.set_debug)
CFG_WORDS = 16

DOMAIN = Layout("domain", [
    ("cfg", np.int64, CFG_WORDS),
    ("pools", POOL_DTYPE, MAX_POOLS),
    ("ring_hdr", np.uint32, MAX_POOLS * RING_HDR_WORDS),
    ("cache_len", np.int32, MAX_POOLS * MAX_LCORE * CACHE_LINE_WORDS),
    ("cache_objs", np.int32, MAX_POOLS * MAX_LCORE * CACHE_MAX_SIZE),
    ("stats", np.int64, MAX_POOLS * (MAX_LCORE + 1) * STAT_WORDS),
    ("obj", OBJHDR_DTYPE, None, (), 4096),     # max_objects, chosen per domain
    ("ring_slots", np.int32, None),            # max_ring_slots, chosen per domain
])
"""The layout of a domain block; ``DOMAIN.create({"obj": n, "ring_slots": m})`` makes one."""
