"""facade_lcore keeps the thread's effective lcore cached: every bind, release and automatic
assignment must show at the next call, and the pool's free_bulk fast path must use it."""
from __future__ import annotations

import threading

import pktbuf
from pktbuf.lcore import LCORE_ANY, bind, facade_lcore


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["v"] = fn()
        except Exception as e:  # noqa: BLE001 -- re-raised in the test's thread
            box["e"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box["v"]


def test_bind_and_release_show_at_once():
    def body():
        auto = facade_lcore()
        seen = [auto, facade_lcore()]
        with bind(5):
            seen.append(facade_lcore())
            with bind(LCORE_ANY):
                seen.append(facade_lcore())
            seen.append(facade_lcore())
        seen.append(facade_lcore())
        return seen
    auto, again, five, anyc, five2, back = _in_thread(body)
    assert auto == again and (auto == LCORE_ANY or 0 <= auto < 128)
    assert (five, anyc, five2, back) == (5, LCORE_ANY, 5, auto)


def test_free_bulk_fast_path_uses_the_bound_lcore():
    pool = pktbuf.PktmbufPool(256, 64, name="lcore_cache")
    try:
        def body():
            facade_lcore()                       # cache the automatic id first
            with bind(7):
                hs = pool.alloc_bulk(32)
                before = pool.cache_count(lcore=7)   # at most 64: the free fits below 96
                pool.free_bulk(hs)               # back into lcore 7's cache
                return pool.cache_count(lcore=7) - before
        assert _in_thread(body) == 32
        assert pool.avail_count == 256
    finally:
        pool.close(force=True)
