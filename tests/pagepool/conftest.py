"""Helpers shared by the page pool tests: snapshots and a whereabouts audit of every page."""
from __future__ import annotations

import numpy as np
import pytest

from pktbuf.buf.pagepool.api import PageArena, PagePool
from pktbuf.buf.pagepool import arena as A
from pktbuf.buf.ring.kernels import CONS_TAIL, H_MASK, PROD_TAIL


def ring_contents(pool: PagePool) -> list[int]:
    """Pages in the recycle ring, oldest first (call while nobody uses the ring)."""
    h = pool.state.ring_hdr
    mask = int(h[H_MASK])
    head, tail = int(h[CONS_TAIL]), int(h[PROD_TAIL])
    n = (tail - head) & 0xFFFFFFFF
    return [int(pool.state.ring_slots[(head + i) & mask]) for i in range(n)]


def cache_contents(pool: PagePool) -> list[int]:
    return [int(x) for x in pool.state.cache[:pool.cache_count]]


def free_pages(arena: PageArena) -> list[int]:
    top = int(arena.state.ctl[A.A_FREE_TOP])
    return [int(x) for x in arena.state.free_stack[:top]]


def snapshot(*objs) -> list[np.ndarray]:
    """Copies of every array of the given arenas/pools (to prove a failed call changed nothing)."""
    out = []
    for o in objs:
        out.extend(np.array(a, copy=True) for a in o.state)
    return out


def assert_same(before, after):
    assert len(before) == len(after)
    for a, b in zip(before, after):
        assert np.array_equal(a, b)


def audit(arena: PageArena, pools: list[PagePool], user: dict[int, int], extra: set[int] = frozenset()):
    """Every page is in exactly one place and the counters agree with the places.

    ``user`` maps handed-out pages to the pool id they came from; ``extra`` are pages held
    outside any pool (released with a page reference still taken, or taken from the arena).
    """
    where: dict[int, str] = {}

    def put(p, tag):
        assert p not in where, f"page {p} is both in {where[p]} and in {tag}"
        where[p] = tag

    for p in free_pages(arena):
        put(p, "arena")
    for pool in pools:
        for p in cache_contents(pool):
            put(p, f"cache{pool.id}")
        for p in ring_contents(pool):
            put(p, f"ring{pool.id}")
    for p, pid in user.items():
        put(p, f"user{pid}")
    for p in extra:
        put(p, "extra")
    assert sorted(where) == list(range(arena.n_pages)), "some page is nowhere"
    pg = arena.state.pages
    for p, tag in where.items():
        if tag == "arena":
            assert pg[p]["refcount"] == 0 and pg[p]["pp"] == -1 and pg[p]["flags"] & A.PG_BUDDY
        else:
            assert pg[p]["refcount"] >= 1 and not pg[p]["flags"] & A.PG_BUDDY
        if tag.startswith(("cache", "ring")):
            assert pg[p]["pp_ref"] == 0
            assert pg[p]["pp"] == int(tag[5:] if tag.startswith("cache") else tag[4:])
        if tag.startswith("user"):
            assert pg[p]["pp"] == int(tag[4:]) and pg[p]["pp_ref"] >= 1
    for pool in pools:
        in_pool = sum(1 for t in where.values()
                      if t in (f"cache{pool.id}", f"ring{pool.id}", f"user{pool.id}"))
        assert pool.inflight == pool.hold_cnt - pool.release_cnt == in_pool
    assert arena.free_count == len(free_pages(arena))
    return where


@pytest.fixture
def arena():
    a = PageArena(512)
    yield a
    a.close()
