"""A spin lock on one word of an integer array (``rte_spinlock`` / Linux ``spinlock_t``).

The lock is the word ``ary[idx]``: 0 free, 1 held.  It lives wherever the structure it protects
lives (an ordinary array for threads, a shared mapping for processes), so a lock is just an
index, and kernels that take it stay plain functions over arrays.

Acquire is *test-and-test-and-set*: the compare-and-swap (which takes the cache line exclusive)
is only tried when an acquire load has seen the word free; while it is held the waiter reads
the line shared and executes ``pause``, doubling the number of pauses per poll up to
``_MAX_BACKOFF`` so two waiters on a two-core machine do not hammer the line in lock step.
Release is a release store.  The lock is not fair and not recursive, as ``rte_spinlock``.

Give the lock word its own cache line (the structures here put it at word 0 of a 64-byte line
that holds nothing written by other paths), otherwise every unrelated write to that line slows
down whoever spins on it.
"""
from __future__ import annotations

from ._jit import kernel
from .atomics import cas, cpu_pause, load_acquire, load_relaxed, store_release

__all__ = ["spin_lock", "spin_trylock", "spin_unlock", "spin_is_locked"]

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
def spin_unlock(ary, idx):
    """Release the lock (release store: every write made while holding it is visible first)."""
    store_release(ary, idx, 0)


@kernel(inline="always")
def spin_is_locked(ary, idx):
    """Whether the lock is held at this instant (a snapshot, for assertions and statistics)."""
    return load_acquire(ary, idx) != 0
