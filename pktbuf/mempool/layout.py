"""Memory layout of a *domain*: the object table, the pool table, rings, caches and statistics.

A domain is the set of arrays every mempool and mbuf kernel works on.  It is passed to kernels
as one namedtuple, :class:`DomainState`, so a user's ``@njit`` function takes it as a single
argument and handles (``int32`` indices into ``mb``) stay meaningful across all pools of the
domain -- which is what lets ``pktmbuf_free_bulk`` take an array that mixes pools, as DPDK's
does.

Every array is allocated once, at its maximum size, as a lazily committed mapping
(:func:`pktbuf.rawmem.lazy_zeros`): creating pools later never reallocates anything, so a
``DomainState`` taken once stays valid for the life of the domain.

Per pool (``pid``):

* ``pools[pid]`` -- the pool description (:data:`POOL_DTYPE`).
* ``ring_hdr[pid * RING_HDR_WORDS:]`` + ``ring_slots[ring_base : ring_base + ring_size]`` --
  the pool's ring, with the layout of :mod:`pktbuf.ring.kernels` ("ring_mp_mc" backend).
* ``cache_len[(pid * MAX_LCORE + lcore) * CACHE_LINE_WORDS]`` and
  ``cache_objs[(pid * MAX_LCORE + lcore) * CACHE_MAX_SIZE:][:cache_size]`` -- one cache per
  lcore, each length on its own cache line.
* ``stats[((pid * (MAX_LCORE + 1)) + lcore) * STAT_WORDS:]`` -- the statistics counters of
  that lcore (row ``MAX_LCORE`` collects calls made without a cache, with atomic adds because
  several threads may share it).

The arrays are flat (one dimension) on purpose: kernels index them with unsigned arithmetic
and never create views, which in Numba would cost two atomic reference-count updates each.
The facade offers shaped views (``Domain.cache_len_view`` etc.) for inspection.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..lcore import LCORE_ANY, MAX_LCORE  # noqa: F401  (defined in the base module lcore.py)

MAX_POOLS = 256          # pool ids are 16-bit in the descriptor; 0xFFFF is never used
CACHE_MAX_SIZE = 512     # RTE_MEMPOOL_CACHE_MAX_SIZE
CACHE_LINE_WORDS = 16    # int32 words per cache line

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

# statistics counters (DPDK's rte_mempool_debug_stats names)
ST_PUT_BULK = 0
ST_PUT_OBJS = 1
ST_PUT_COMMON_POOL_BULK = 2
ST_PUT_COMMON_POOL_OBJS = 3
ST_GET_COMMON_POOL_BULK = 4
ST_GET_COMMON_POOL_OBJS = 5
ST_GET_SUCCESS_BULK = 6
ST_GET_SUCCESS_OBJS = 7
ST_GET_FAIL_BULK = 8
ST_GET_FAIL_OBJS = 9
STAT_NAMES = ("put_bulk", "put_objs", "put_common_pool_bulk", "put_common_pool_objs",
              "get_common_pool_bulk", "get_common_pool_objs", "get_success_bulk",
              "get_success_objs", "get_fail_bulk", "get_fail_objs")
STAT_WORDS = 16          # int64 per row = two cache lines

# cfg words
CFG_DEBUG = 0            # non-zero: kernels run their sanity checks (see pktbuf.set_debug)
CFG_WORDS = 16

DomainState = namedtuple("DomainState", [
    "mb",          # MBUF_DTYPE[max_objs]: object headers / mbuf descriptors
    "pools",       # POOL_DTYPE[MAX_POOLS]
    "ring_hdr",    # uint32[MAX_POOLS * RING_HDR_WORDS]
    "ring_slots",  # int32[max_ring_slots]
    "cache_len",   # int32[MAX_POOLS * MAX_LCORE * CACHE_LINE_WORDS]
    "cache_objs",  # int32[MAX_POOLS * MAX_LCORE * CACHE_MAX_SIZE]
    "stats",       # int64[MAX_POOLS * (MAX_LCORE + 1) * STAT_WORDS]
    "cfg",         # int64[CFG_WORDS]
])
DomainState.__doc__ = """The arrays of a domain, passed to every mempool/mbuf kernel.

Take it from ``pool.domain.state`` (or ``pktbuf.default_domain().state``) and pass it to
your ``@njit`` functions; it never changes for the life of the domain."""
