"""Kernels of the shared domain's bookkeeping: claiming and releasing table slots across
processes (lcore ids, registry entries) with a compare-and-swap on shared memory.

The tables themselves are plain int64 arrays in the shared domain's header (see
:mod:`pktbuf.buf.domain.shared_header`); a slot holds the pid of its owner, 0 when free, ``-pid``
while a peer reclaims what a dead owner left.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import cas, load_acquire, store_release


@kernel
def slot_cas(tbl, idx, expected, desired):
    """``tbl[idx]``: if it holds ``expected``, store ``desired``; returns what was there
    (the swap happened iff that equals ``expected``)."""
    return cas(tbl, np.int64(idx), np.int64(expected), np.int64(desired))


@kernel
def slot_load(tbl, idx):
    """``tbl[idx]`` with an acquire load (what its owner published before claiming it)."""
    return load_acquire(tbl, np.int64(idx))


@kernel
def slot_store(tbl, idx, value):
    """Publish ``value`` in ``tbl[idx]`` after every earlier store (release)."""
    store_release(tbl, np.int64(idx), np.int64(value))
