"""Real threads: the pool's own thread allocates, another thread returns pages.

The owner thread allocates pages, writes a stamp into each, recycles every fourth directly and
hands the rest to a second thread over a ring.  That thread checks the stamp and returns the
page to the pool's recycle ring -- or, for every fifth page, takes an extra page reference
first (the pool must then release the page instead of recycling it) and drops it after.  Both
run as nogil kernels for about a second.  At the end every page must be in exactly one place,
and the counters must add up: every allocation is fast, refill or slow; every put ends in
exactly one of cached / ring / ring_full / released_refcnt.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import njit

from pktbuf.atomics import load_acquire, store_release
from pktbuf.buf.pagepool.api import PageArena, PagePool
from pktbuf.buf.pagepool import arena as A
from pktbuf.buf.pagepool import kernels as K
from pktbuf.rawmem import load_u8, store_u8
from pktbuf.buf.ring.kernels import ring_init, ring_mp_enqueue_bulk, ring_sc_dequeue_burst

from .conftest import audit


@njit(nogil=True, cache=True)
def _stamp(addr, value):
    for k in range(8):
        store_u8(addr + k, (value >> (8 * k)) & 0xFF)


@njit(nogil=True, cache=True)
def _read_stamp(addr):
    s = np.int64(0)
    for k in range(8):
        s |= np.int64(load_u8(addr + k)) << (8 * k)
    return s


@njit(nogil=True, cache=True)
def _owner(pool, arena, hdr, slots, n, flag, out):
    one = np.empty(1, np.int32)
    allocs = 0
    direct = 0
    while allocs < n:
        p = K.page_pool_alloc_pages(pool, arena)
        if p < 0:            # every page is with the peer right now: try again
            continue
        i = allocs
        allocs += 1
        _stamp(A.page_address(arena, p), np.int64(p) * 7 + i)
        _stamp(A.page_address(arena, p) + 8, np.int64(i))
        if i % 4 == 0:
            K.page_pool_put_page(pool, arena, p, True)
            direct += 1
        else:
            one[0] = p
            while ring_mp_enqueue_bulk(hdr, slots, one, 1) == 0:
                pass
    store_release(flag, 0, 1)
    out[0] = allocs
    out[1] = direct
    return 0


@njit(nogil=True, cache=True)
def _peer(pool, arena, hdr, slots, flag, out):
    buf = np.empty(32, np.int32)
    puts = 0
    released = 0
    bad = 0
    while True:
        done = load_acquire(flag, 0) != 0
        got = ring_sc_dequeue_burst(hdr, slots, buf, 32)
        if got == 0:
            if done:
                break
            continue
        for j in range(got):
            p = buf[j]
            addr = A.page_address(arena, p)
            i = _read_stamp(addr + 8)
            if _read_stamp(addr) != np.int64(p) * 7 + i:
                bad += 1
            if puts % 5 == 0:     # someone else still holds the page: it must be released
                A.get_page(arena, p)
                if K.page_pool_put_page(pool, arena, p, False) != 0:
                    bad += 1
                if A.put_page(arena, p) != 1:
                    bad += 1
                released += 1
            elif K.page_pool_put_page(pool, arena, p, False) != 0:
                bad += 1
            puts += 1
    out[0] = puts
    out[1] = released
    out[2] = bad
    return 0


@pytest.mark.parametrize("refill,pool_size", [("bulk", 1024), ("single", 64)])
def test_owner_and_peer_threads(refill, pool_size):
    arena = PageArena(300)
    pool = PagePool(arena, pool_size=pool_size, refill=refill)
    hdr = np.zeros(96, np.uint32)
    slots = np.zeros(512, np.int32)
    ring_init(hdr, slots, 511, 0)
    flag = np.zeros(8, np.int64)
    o_out = np.zeros(4, np.int64)
    p_out = np.zeros(4, np.int64)
    # warm (compile) with a tiny run first
    _owner(pool.state, arena.state, hdr, slots, 3, flag, o_out)
    _peer(pool.state, arena.state, hdr, slots, flag, p_out)
    pool.destroy()
    arena = PageArena(300)
    pool = PagePool(arena, pool_size=pool_size, refill=refill)
    flag[0] = 0

    n = 1_500_000          # allocations: about a second on this machine
    tp = threading.Thread(target=_peer, args=(pool.state, arena.state, hdr, slots, flag, p_out))
    to = threading.Thread(target=_owner, args=(pool.state, arena.state, hdr, slots, n, flag, o_out))
    tp.start()
    to.start()
    to.join()
    tp.join()

    allocs, direct = int(o_out[0]), int(o_out[1])
    puts, released, bad = (int(x) for x in p_out[:3])
    assert bad == 0
    assert allocs == n and puts == allocs - direct
    st = pool.get_stats()
    assert st["fast"] + st["refill"] + st["slow"] == allocs
    assert st["cached"] + st["cache_full"] == direct
    assert st["cached"] + st["ring"] + st["ring_full"] + st["released_refcnt"] == allocs
    assert st["released_refcnt"] == released
    assert pool.inflight == pool.hold_cnt - pool.release_cnt
    audit(arena, [pool], {})
    assert pool.destroy() == 0
    assert arena.free_count == 300
