"""A spin lock on one word of an integer array (``rte_spinlock`` / Linux ``spinlock_t``).

The lock is the word ``ary[idx]``: 0 free, 1 held.  It lives wherever the structure it protects
lives (an ordinary array for threads, a shared mapping for processes), so a lock is just an
index, and kernels that take it stay plain functions over arrays.

Acquire is *test-and-test-and-set*: the compare-and-swap (which takes the cache line exclusive)
is only tried when an acquire load has seen the word free; while it is held the waiter reads
the line shared and executes ``pause``, doubling the number of pauses per poll up to
``_MAX_BACKOFF`` so two waiters on a two-core machine do not hammer the line in lock step.
Release is a release store.  The lock is not fair and not recursive, as ``rte_spinlock``.

:func:`spin_lock_timed` is the same acquisition instrumented with TSC reads (how long it
waited, how much of that in ``pause`` loops, whether it found the lock held); it is a separate
function, so callers that do not use it pay nothing.

Give the lock word its own cache line (the structures here put it at word 0 of a 64-byte line
that holds nothing written by other paths), otherwise every unrelated write to that line slows
down whoever spins on it.
"""
from __future__ import annotations

from ._jit import kernel
import numpy as np

from .atomics import cas, cpu_pause, load_acquire, load_relaxed, store_release, tsc_read

__all__ = ["spin_lock", "spin_trylock", "spin_unlock", "spin_is_locked", "spin_lock_timed"]

_MAX_BACKOFF = 64


@kernel(inline="always")
def spin_trylock(ary, idx):
    """Take the lock if it is free; True if taken.  Never waits."""
    return load_relaxed(ary, idx) == 0 and cas(ary, idx, 0, 1) == 0


@kernel(inline="always")
def spin_lock(ary, idx):
    """Take the lock, spinning (with ``pause`` back-off) while another holder has it."""
    if cas(ary, idx, 0, 1) == 0:        # uncontended: one atomic, as rte_spinlock_lock
        return
    backoff = 1
    while True:
        while load_acquire(ary, idx) != 0:
            for _ in range(backoff):
                cpu_pause()
            if backoff < _MAX_BACKOFF:
                backoff <<= 1
        if cas(ary, idx, 0, 1) == 0:
            return


@kernel(inline="always")
def spin_lock_timed(ary, idx):
    """:func:`spin_lock`, measured: returns ``(t_owned, wait, paused, contended)`` -- the TSC
    when the lock was taken, the cycles from the first attempt to then, the cycles of those
    spent in ``pause`` loops, and whether the first attempt found the lock held."""
    t0 = tsc_read()
    if cas(ary, idx, 0, 1) == 0:
        return t0, np.int64(0), np.int64(0), False
    backoff = 1
    paused = np.int64(0)
    while True:
        while load_acquire(ary, idx) != 0:
            p0 = tsc_read()
            for _ in range(backoff):
                cpu_pause()
            paused += tsc_read() - p0
            if backoff < _MAX_BACKOFF:
                backoff <<= 1
        if cas(ary, idx, 0, 1) == 0:
            t1 = tsc_read()
            return t1, t1 - t0, paused, True


@kernel(inline="always")
def spin_unlock(ary, idx):
    """Release the lock (release store: every write made while holding it is visible first)."""
    store_release(ary, idx, 0)


@kernel(inline="always")
def spin_is_locked(ary, idx):
    """Whether the lock is held at this instant (a snapshot, for assertions and statistics)."""
    return load_acquire(ary, idx) != 0
