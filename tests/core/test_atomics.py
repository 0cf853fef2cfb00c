"""Atomics: semantics, two real threads, and two real processes on shared memory."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from numba import njit

from pktbuf.atomics import (cas, exchange, fence, fetch_add, fetch_and, fetch_or, fetch_sub,
                            field_cas, field_fetch_add, field_load_acquire, field_store_release,
                            load_acquire, load_relaxed, store_release, store_relaxed, cpu_pause,
                            compiler_barrier)
from pktbuf.shm import Region

REC = np.dtype([("a", np.uint64), ("refcnt", np.uint16), ("b", np.int32)], align=True)


@njit(cache=True, nogil=True)
def _semantics(a, r):
    out = np.zeros(16, np.int64)
    out[0] = cas(a, 0, 0, 5)          # succeeds, returns old 0
    out[1] = cas(a, 0, 0, 7)          # fails, returns current 5
    out[2] = a[0]
    out[3] = fetch_add(a, 1, 10)
    out[4] = fetch_sub(a, 1, 3)
    out[5] = a[1]
    out[6] = fetch_or(a, 2, 0b1010)
    out[7] = fetch_and(a, 2, 0b0110)
    out[8] = a[2]
    out[9] = exchange(a, 3, 42)
    store_release(a, 4, 99)
    store_relaxed(a, 5, 98)
    out[10] = load_acquire(a, 4) + load_relaxed(a, 5)
    out[11] = field_fetch_add(r, 1, "refcnt", -1)
    out[12] = field_cas(r, 1, "refcnt", 0xFFFF, 3)
    field_store_release(r, 2, "refcnt", 9)
    out[13] = field_load_acquire(r, 1, "refcnt") * 100 + field_load_acquire(r, 2, "refcnt")
    fence()
    compiler_barrier()
    cpu_pause()
    return out


def test_semantics():
    a = np.zeros(8, np.int64)
    a[3] = 1
    r = np.zeros(3, REC)
    out = _semantics(a, r)
    assert out[0] == 0 and out[1] == 5 and out[2] == 5
    assert out[3] == 0 and out[4] == 10 and out[5] == 7
    assert out[6] == 0 and out[7] == 0b1010 and out[8] == 0b0010
    assert out[9] == 1 and a[3] == 42
    assert out[10] == 197
    assert out[11] == 0 and r[1]["refcnt"] == 3      # 0 - 1 wrapped to 0xFFFF, then CAS to 3
    assert out[12] == 0xFFFF
    assert out[13] == 309


@njit(cache=True, nogil=True)
def _hammer(a, n):
    """n atomic increments of a[0], and n increments of a[1] by a CAS loop."""
    for _ in range(n):
        fetch_add(a, 0, 1)
        while True:
            old = load_acquire(a, 1)
            if cas(a, 1, old, old + 1) == old:
                break
            cpu_pause()


def test_two_threads_lose_no_update():
    a = np.zeros(2, np.int64)
    _hammer(a, 10)
    a[:] = 0
    n = 2_000_000
    ts = [threading.Thread(target=_hammer, args=(a, n)) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert a[0] == 2 * n and a[1] == 2 * n


@njit(cache=True, nogil=True)
def _spin_until(a, idx, value):
    """Spin on an acquire load: a plain load would be hoisted out of the loop and never end."""
    spins = 0
    while load_acquire(a, idx) != value:
        cpu_pause()
        spins += 1
    return spins


def test_acquire_load_sees_other_thread():
    a = np.zeros(4, np.int64)
    _spin_until(a, 0, 0)
    done = []
    t = threading.Thread(target=lambda: done.append(_spin_until(a, 0, 7)))
    t.start()
    import time
    time.sleep(0.05)
    store_release_py(a, 0, 7)
    t.join(5)
    assert not t.is_alive() and done


@njit(cache=True)
def store_release_py(a, i, v):
    store_release(a, i, v)


CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from pktbuf.shm import Region
    from tests.core.test_atomics import _hammer
    fd, n = int(sys.argv[1]), int(sys.argv[2])
    r = Region.attach(fd, 4096)
    a = r.array[:16].view(np.int64)
    _hammer(a, n)
""")


def test_two_processes_on_shared_memory():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    region = Region(4096, "atomics-test", seal=False)
    a = region.array[:16].view(np.int64)
    _hammer(a, 1)                      # compile (and cache) before the child starts
    a[:] = 0
    os.set_inheritable(region.fd, True)
    n = 500_000
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(root=root), str(region.fd), str(n)],
                             pass_fds=(region.fd,))
    _hammer(a, n)
    assert child.wait(timeout=120) == 0
    assert a[0] == 2 * n and a[1] == 2 * n
    region.close()


def test_typing_errors_are_clear():
    @njit
    def bad(x):
        return cas(x, 0, 0, 1)

    with pytest.raises(Exception, match="integer dtype"):
        bad(np.zeros(2, np.float64))
