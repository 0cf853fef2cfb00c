"""rte_ring semantics, wrap-around, threads, and two processes on a shared ring."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

from pktbuf import InvalidArgument, Ring
from pktbuf.buf.ring import kernels as K

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def arr(*v):
    return np.array(v, np.int32)


def test_bulk_is_all_or_nothing_burst_is_as_many_as_fit():
    r = Ring(5)
    assert r.capacity == 5 and r.size == 8
    assert r.enqueue_bulk(arr(1, 2, 3, 4)) == 4
    assert r.enqueue_bulk(arr(5, 6)) == 0 and len(r) == 4       # would exceed: nothing
    assert r.enqueue_burst(arr(5, 6, 7)) == 1 and len(r) == 5   # only one fits
    assert r.full() and r.free_count == 0
    assert r.dequeue_bulk(6).size == 0 and len(r) == 5
    assert r.dequeue_burst(3).tolist() == [1, 2, 3]
    assert r.dequeue_bulk(2).tolist() == [4, 5]
    assert r.empty() and r.dequeue() is None


def test_power_of_two_mode_holds_size_minus_one():
    r = Ring(8, exact=False)
    assert r.capacity == 7
    assert r.enqueue_burst(np.arange(10, dtype=np.int32)) == 7
    with pytest.raises(InvalidArgument):
        Ring(6, exact=False)


@pytest.mark.parametrize("start", [0xFFFFFFF0, 0xFFFFFFFF, 0x7FFFFFFF])
def test_free_running_indices_wrap_at_2_32(start):
    r = Ring(16)
    for i in (K.PROD_HEAD, K.PROD_TAIL, K.CONS_HEAD, K.CONS_TAIL):
        r.hdr[i] = start
    seen = []
    for k in range(10):
        vals = np.arange(k * 7, k * 7 + 7, dtype=np.int32)
        assert r.enqueue_bulk(vals) == 7
        assert len(r) == 7
        seen += r.dequeue_bulk(7).tolist()
    assert seen == list(range(70))
    assert int(r.hdr[K.PROD_HEAD]) == (start + 70) & 0xFFFFFFFF


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 20), st.booleans()), max_size=60))
def test_matches_a_fifo_model(ops):
    r = Ring(13)
    model = []
    nxt = 0
    for enq, n, bulk in ops:
        if enq:
            vals = np.arange(nxt, nxt + n, dtype=np.int32)
            got = r.enqueue_bulk(vals) if bulk else r.enqueue_burst(vals)
            want = (n if len(model) + n <= 13 else 0) if bulk else min(n, 13 - len(model))
            assert got == want
            model += list(range(nxt, nxt + got))
            nxt += n
        else:
            out = r.dequeue_bulk(n) if bulk else r.dequeue_burst(n)
            want = (n if n <= len(model) else 0) if bulk else min(n, len(model))
            assert out.tolist() == model[:want]
            model = model[want:]
        assert len(r) == len(model)


def test_single_producer_consumer_modes():
    r = Ring(64, sp=True, sc=True)
    assert r.flags & K.RING_F_SP_ENQ and r.flags & K.RING_F_SC_DEQ
    assert r.enqueue_bulk(np.arange(64, dtype=np.int32)) == 64
    assert r.dequeue_bulk(64).tolist() == list(range(64))


@njit(cache=True, nogil=True)
def _mpmc_worker(hdr, slots, iters, start):
    """Take bursts out and put them back; also inject `start..` once and remove it at the end."""
    buf = np.empty(32, np.int32)
    total = np.int64(0)
    for _ in range(iters):
        got = K.ring_mc_dequeue_burst(hdr, slots, buf, 32)
        total += got
        k = 0
        while k < got:
            k += K.ring_do_enqueue(hdr, 0, slots, 0, buf, k, got - k, 1, False)
    return total


def test_mpmc_threads_lose_and_duplicate_nothing():
    r = Ring(1000)
    vals = np.arange(1000, dtype=np.int32)
    assert r.enqueue_bulk(vals) == 1000
    _mpmc_worker(r.hdr, r.slots, 1, 0)
    ts = [threading.Thread(target=_mpmc_worker, args=(r.hdr, r.slots, 300_000, 0)) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(r.dequeue_bulk(1000).tolist()) == list(range(1000))


PRODUCER = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from pktbuf import Ring
    from tests.core.test_ring import _produce
    r = Ring.attach(int(sys.argv[1]), int(sys.argv[2]))
    _produce(r.hdr, r.slots, int(sys.argv[3]), int(sys.argv[4]))
""")


@njit(cache=True, nogil=True)
def _produce(hdr, slots, first, count):
    buf = np.empty(16, np.int32)
    v = first
    end = first + count
    while v < end:
        n = min(16, end - v)
        for i in range(n):
            buf[i] = v + i
        k = 0
        while k < n:
            got = K.ring_do_enqueue(hdr, 0, slots, 0, buf, k, n - k, 1, False)
            if got == 0:
                K.cpu_pause()
            k += got
        v += n


@njit(cache=True, nogil=True)
def _consume(hdr, slots, total, seen):
    buf = np.empty(64, np.int32)
    got_all = 0
    while got_all < total:
        got = K.ring_mc_dequeue_burst(hdr, slots, buf, 64)
        for i in range(got):
            seen[buf[i]] += 1
        got_all += got
        if got == 0:
            K.cpu_pause()
    return got_all


def test_two_processes_share_a_ring():
    r = Ring(256, shared=True)
    seen = np.zeros(200_000, np.int64)
    _produce(r.hdr, r.slots, 0, 1)          # compile and cache before children start
    _consume(r.hdr, r.slots, 1, seen)
    seen[:] = 0
    os.set_inheritable(r.fd, True)
    kids = [subprocess.Popen([sys.executable, "-c", PRODUCER.format(root=ROOT), str(r.fd),
                              str(r.nbytes), str(i * 100_000), "100000"], pass_fds=(r.fd,))
            for i in range(2)]
    try:
        assert _consume(r.hdr, r.slots, 200_000, seen) == 200_000
        for k in kids:
            assert k.wait(timeout=120) == 0
    finally:
        for k in kids:
            if k.poll() is None:
                k.kill()
    assert (seen == 1).all(), "a value was lost or delivered twice"
    assert len(r) == 0
    r.close()


def test_attach_rejects_memory_that_is_not_a_ring():
    from pktbuf.shm import Region
    reg = Region(4096, "not-a-ring")
    with pytest.raises(ValueError):
        Ring.attach(os.dup(reg.fd), 4096)
    reg.close()


@pytest.mark.parametrize("bad", [-1, 0, 2 ** 31, 1.5, "3", True])
def test_bad_counts(bad):
    with pytest.raises(InvalidArgument):
        Ring(bad)
    r = Ring(8)
    if isinstance(bad, int) and not isinstance(bad, bool) and bad >= 0:
        assert r.dequeue_bulk(bad).size == 0     # more than the ring holds: DPDK semantics
    else:
        with pytest.raises(InvalidArgument):
            r.dequeue_bulk(bad)
    with pytest.raises((InvalidArgument, ValueError)):
        r.enqueue_bulk(np.array([1.5]))
