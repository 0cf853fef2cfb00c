"""Two threads allocating and freeing on one pool through nogil kernels.

The pools are large enough for both threads' bursts plus their caches, so every allocation
must succeed: each thread counts its bursts, and the test checks that all of them ran."""
import threading
import time

import numpy as np
from numba import njit

from pktbuf import PktmbufPool
from pktbuf.kernels import (LCORE_ANY, pktmbuf_alloc_bulk, pktmbuf_append, pktmbuf_free_bulk,
                            pktmbuf_free_bulk_staged, pktmbuf_mtod, store_u8, load_u8)


@njit(cache=True, nogil=True)
def churn(dom, pid, lcore, seconds_ns, staged, tag, errors):
    """Allocate bursts, stamp each mbuf with our tag, check the stamps, free; until time's up.

    errors[0]: appends that failed; errors[1]: stamps someone else overwrote; errors[2]:
    bursts allocated (every round tries three)."""
    held = np.empty(96, np.int32)
    rounds = 0
    t_end = seconds_ns
    while True:
        for burst in (7, 32, 96):
            if pktmbuf_alloc_bulk(dom, pid, lcore, held, burst) != 0:
                continue
            errors[2] += 1
            for i in range(burst):
                a = pktmbuf_append(dom, held[i], 1)
                if a < 0:
                    errors[0] += 1
                else:
                    store_u8(a, tag)
            for i in range(burst):
                if load_u8(pktmbuf_mtod(dom, held[i])) != tag:
                    errors[1] += 1       # someone else holds this mbuf too
            if staged:
                pktmbuf_free_bulk_staged(dom, lcore, held, burst)
            else:
                pktmbuf_free_bulk(dom, lcore, held, burst)
        rounds += 1
        if rounds % 64 == 0:
            t_end -= 1
            if t_end <= 0:
                return rounds


def _run(pool, lcores, staged):
    dom, pid = pool.domain.state, pool.id
    err = np.zeros((len(lcores), 3), np.int64)
    churn(dom, pid, lcores[0], 1, staged, 0, err[0])          # compile first
    # calibrate: rounds per "tick" so the run lasts about a second
    t0 = time.perf_counter()
    churn(dom, pid, lcores[0], 20, staged, 0, err[0])
    ticks = max(1, int(20 * 1.0 / max(1e-3, time.perf_counter() - t0)))   # ~1 s
    err[:] = 0
    out = [0] * len(lcores)

    def go(k):
        out[k] = churn(dom, pid, lcores[k], ticks, staged, 1 + k, err[k])

    ts = [threading.Thread(target=go, args=(k,)) for k in range(len(lcores))]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    # each thread ran all its rounds (64 per tick), and every burst of every round succeeded
    assert out == [64 * ticks] * len(lcores), (out, ticks)
    assert (err[:, 2] == 3 * 64 * ticks).all(), err[:, 2]
    return out, err, time.perf_counter() - t0


def test_two_threads_one_pool_pool_full_at_end(domain):
    pool = PktmbufPool(512, 64, 256, domain=domain)
    for staged in (False, True):
        rounds, err, secs = _run(pool, [0, 1], staged)
        assert (err[:, :2] == 0).all(), err
        for lc in (0, 1):
            pool.cache_flush(lc)
        assert pool.avail_count == 512 and pool.audit() == 512


def test_two_threads_without_caches(domain):
    pool = PktmbufPool(256, 0, 256, domain=domain)
    rounds, err, _ = _run(pool, [LCORE_ANY, LCORE_ANY], False)
    assert (err[:, :2] == 0).all(), err
    assert pool.avail_count == 256 and pool.audit() == 256
