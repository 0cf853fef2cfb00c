"""The spin lock shared by the heap and the page arena: mutual exclusion with real threads."""
from __future__ import annotations

import threading

import numpy as np
from numba import njit

from pktbuf.spinlock import spin_is_locked, spin_lock, spin_lock_timed, spin_trylock, spin_unlock


@njit(nogil=True, cache=True)
def _count(lock, counter, n):
    """Non-atomic read-modify-write of two words under the lock: any overlap loses updates
    or makes the two words differ."""
    bad = 0
    for _ in range(n):
        spin_lock(lock, 0)
        a = counter[0]
        b = counter[8]
        if a != b:
            bad += 1
        counter[0] = a + 1
        counter[8] = b + 1
        spin_unlock(lock, 0)
    return bad


def test_lock_excludes_other_threads():
    lock = np.zeros(8, np.int64)
    counter = np.zeros(16, np.int64)
    _count(lock, counter, 10)
    counter[:] = 0
    bad = [0, 0]
    n = 1_000_000

    def run(i):
        bad[i] = _count(lock, counter, n)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == [0, 0]
    assert counter[0] == counter[8] == 2 * n
    assert lock[0] == 0


@njit(nogil=True, cache=True)
def _try(lock):
    first = spin_trylock(lock, 0)
    second = spin_trylock(lock, 0)
    held = spin_is_locked(lock, 0)
    spin_unlock(lock, 0)
    return first, second, held, spin_is_locked(lock, 0)


def test_trylock_does_not_wait_and_is_not_recursive():
    lock = np.zeros(8, np.int64)
    assert _try(lock) == (True, False, True, False)


@njit(nogil=True, cache=True)
def _count_timed(lock, counter, n, st):
    """As _count, through the measured acquisition; sums what it reports into ``st``."""
    bad = 0
    for _ in range(n):
        t, wait, paused, contended = spin_lock_timed(lock, 0)
        a = counter[0]
        b = counter[8]
        if a != b:
            bad += 1
        counter[0] = a + 1
        counter[8] = b + 1
        spin_unlock(lock, 0)
        st[0] += contended
        st[1] += wait
        st[2] += paused
        if paused > wait or (wait > 0 and not contended) or t <= 0:
            bad += 1
    return bad


def test_timed_lock_excludes_other_threads_and_reports_sane_times():
    lock = np.zeros(8, np.int64)
    counter = np.zeros(16, np.int64)
    st = np.zeros((2, 4), np.int64)
    _count_timed(lock, counter, 10, st[0])
    counter[:] = 0
    st[:] = 0
    bad = [0, 0]
    n = 300_000

    def run(i):
        bad[i] = _count_timed(lock, counter, n, st[i])

    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == [0, 0]
    assert counter[0] == counter[8] == 2 * n
    assert lock[0] == 0
    assert (st[:, 1] >= st[:, 2]).all()
