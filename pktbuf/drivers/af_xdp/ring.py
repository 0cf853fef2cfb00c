"""The index arithmetic of an AF_XDP ring, and the ordered accesses to the kernel's words.

``producer`` and ``consumer`` are free-running u32 counters; the entries a ring holds are
``(prod - cons) mod 2**32`` and entry ``i`` lives in slot ``i & (size - 1)``.  Each side writes
only its own index.  Memory ordering (the scheme of ``net/xdp/xsk_queue.h``): the consumer
reads the producer index with an acquire load before reading the entries, and publishes its
consumer index with a release store after it has read them; the producer writes the entries,
then publishes its index with a release store, and learns the free room from an acquire load
of the consumer index.  An acquire load also keeps LLVM from hoisting the read out of a loop.

Each side keeps its own index and a cached copy of the peer's in the queue block and
re-reads the peer's only when the cached view does not satisfy the request (libxdp's
``xsk_ring_*`` helpers do the same), so a burst makes one shared-memory read in the common
case.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_acquire, load_relaxed, store_release
from ...rawmem import addr_view
from .layout import R_FLAGS, R_SIZE, XDP_RING_NEED_WAKEUP

__all__ = ["ring_entries", "ring_free", "ring_load", "ring_publish", "ring_needs_wakeup"]

U32 = 0xFFFFFFFF


@kernel(inline="always")
def ring_entries(prod, cons):
    """Entries between a consumer index and a producer index (u32 arithmetic)."""
    return (prod - cons) & U32


@kernel(inline="always")
def ring_free(size, prod, cons):
    """Free slots for a producer at ``prod`` whose consumer is at ``cons``."""
    return size - ((prod - cons) & U32)


@kernel(inline="always")
def _word(addr):
    return addr_view(addr, 1, np.uint32)


@kernel(inline="always")
def ring_load(cfg, base, which):
    """Acquire load of the ring's ``R_PROD`` or ``R_CONS`` word (the kernel's index)."""
    return np.int64(load_acquire(_word(cfg[base + which]), 0))


@kernel(inline="always")
def ring_publish(cfg, base, which, v):
    """Release store of our index into the ring's ``R_PROD`` or ``R_CONS`` word."""
    store_release(_word(cfg[base + which]), 0, np.uint32(v & U32))


@kernel(inline="always")
def ring_needs_wakeup(cfg, base):
    """Whether the kernel flagged the ring ``XDP_RING_NEED_WAKEUP``."""
    return (np.int64(load_relaxed(_word(cfg[base + R_FLAGS]), 0)) & XDP_RING_NEED_WAKEUP) != 0


@kernel(inline="always")
def ring_mask(cfg, base):
    return cfg[base + R_SIZE] - 1

