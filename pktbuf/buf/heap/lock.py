"""The heap lock, and its instrumented build.

Every kernel that changes the shared heap takes the heap lock (ctl word ``H_LOCK``, a
:mod:`pktbuf.spinlock`) through :func:`_lock` / :func:`_unlock`.  Their last argument,
``stats``, is a compile-time constant (the kernels that pass it are declared
``kernel(literal=("stats",))``): with ``False`` -- the release build every public kernel uses
-- they are exactly ``spin_lock`` / ``spin_unlock``; with ``True`` -- the *counted* kernels
``heap_lcore_malloc_counted`` / ``heap_lcore_free_counted`` -- they also record, in the
caller's row of the ``lockstat`` table (``layout.LS_*``): acquisitions, contended ones, owner
changes at acquire (*handoffs*: the lock's cache line, and the heap lines the holder writes,
move to another core), TSC cycles waited and spent in ``pause`` back-off, hold times, log2
histograms of wait and hold, and the cycles spent clearing freed blocks.

Rows: lcore ``r < LS_ROWS - 1`` writes row ``r``, anyone else the last row.  A row is written
by its lcore only (the handoff test reads ``H_LAST_OWNER`` under the lock), so the counting adds
no shared cache line except that word, which sits on the lock's own line.
"""
from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from ..._jit import kernel
from ...atomics import tsc_read
from ...spinlock import spin_lock, spin_lock_timed, spin_unlock
from .layout import (H_LAST_OWNER, H_LOCK, LS_ACQUIRE, LS_ANY_ROW, LS_BACKOFF_CYC, LS_CONTENDED,
                     LS_HANDOFF, LS_HIST_HOLD, LS_HIST_WAIT, LS_HOLD_CYC, LS_WAIT_CYC, LS_WORDS,
                     LS_ZERO_BYTES, LS_ZERO_CYC)


@kernel(inline="always")
def _row(lcore):
    """First word of the statistics row of ``lcore``."""
    r = np.int64(lcore) if 0 <= lcore < LS_ANY_ROW else np.int64(LS_ANY_ROW)
    return r * LS_WORDS


@kernel(inline="always")
def _bucket(cyc):
    """floor(log2(cyc)) in 0..31 (0 for cyc <= 1)."""
    if cyc <= 1:
        return np.int64(0)
    b = np.int64(63 - leading_zeros(np.uint64(cyc)))
    return b if b < 32 else np.int64(31)


@kernel(inline="always")
def _lock(heap, lcore, stats):
    """Take the heap lock; with ``stats``, count it.  Returns the TSC at ownership (0 without)."""
    if stats:
        t, wait, paused, contended = spin_lock_timed(heap.ctl, H_LOCK)
        ls = heap.lockstat
        b = _row(lcore)
        ls[b + LS_ACQUIRE] += 1
        if contended:
            ls[b + LS_CONTENDED] += 1
            ls[b + LS_WAIT_CYC] += wait
            ls[b + LS_BACKOFF_CYC] += paused
            ls[b + LS_HIST_WAIT + _bucket(wait)] += 1
        if heap.ctl[H_LAST_OWNER] != b:
            ls[b + LS_HANDOFF] += 1
            heap.ctl[H_LAST_OWNER] = b
        return t
    spin_lock(heap.ctl, H_LOCK)
    return np.int64(0)


@kernel(inline="always")
def _unlock(heap, lcore, stats, t):
    """Release the heap lock taken by :func:`_lock` at TSC ``t``."""
    if stats:
        hold = tsc_read() - t
        ls = heap.lockstat
        b = _row(lcore)
        ls[b + LS_HOLD_CYC] += hold
        ls[b + LS_HIST_HOLD + _bucket(hold)] += 1
    spin_unlock(heap.ctl, H_LOCK)


@kernel(inline="always")
def _zero_begin(stats):
    return tsc_read() if stats else np.int64(0)


@kernel(inline="always")
def _zero_end(heap, lcore, stats, t, nbytes):
    if stats:
        b = _row(lcore)
        heap.lockstat[b + LS_ZERO_CYC] += tsc_read() - t
        heap.lockstat[b + LS_ZERO_BYTES] += nbytes
