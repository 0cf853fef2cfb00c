"""Model-based test: random call sequences against the pure-Python reference (naive.py).

Two pools share one small arena (so it runs out), one with a tiny recycle ring (so it
overflows).  After every step the real arena and pools must agree with the model exactly:
the same return values and errors, the same pages in the same order in the cache, the ring and
the arena's free stack, the same per-page references/owner/mapping, the same statistics, and
in flight = hold - release = pages of the pool that are anywhere but the arena.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pktbuf import PktbufError
from pktbuf.buf.pagepool.api import PP_FLAG_DMA_MAP, PageArena, PagePool
from pktbuf.buf.pagepool import arena as A

from . import naive
from .conftest import audit, cache_contents, free_pages, ring_contents

N_PAGES = 150


def code_of(fn, *args):
    """The facade call's result, or the negative code of the error it raised."""
    try:
        r = fn(*args)
    except PktbufError as e:
        return int(e.code)
    return 0 if r is None else r


class PagePoolMachine(RuleBasedStateMachine):
    @initialize(refill_a=st.sampled_from(["bulk", "single"]),
                refill_b=st.sampled_from(["bulk", "single"]))
    def setup(self, refill_a, refill_b):
        self.arena = PageArena(N_PAGES)
        self.m_arena = naive.NaiveArena(N_PAGES)
        self.pools = [PagePool(self.arena, pool_size=8, refill=refill_a, flags=PP_FLAG_DMA_MAP),
                      PagePool(self.arena, refill=refill_b)]
        self.models = [naive.NaivePool(self.m_arena, self.pools[0].id, 8, refill_a, dma=True),
                       naive.NaivePool(self.m_arena, self.pools[1].id, 1024, refill_b)]
        self.seen: list[int] = []       # every page id handed out so far (candidates)
        self.extra: dict[int, int] = {}  # page -> references we hold outside any pool

    def _page(self, data):
        if self.seen and data.draw(st.integers(0, 9)) > 0:
            return data.draw(st.sampled_from(self.seen))
        return data.draw(st.integers(-3, N_PAGES + 3))

    # -- rules -----------------------------------------------------------------------------
    @rule(i=st.integers(0, 1), n=st.integers(1, 70))
    def alloc(self, i, n):
        for _ in range(n):
            got = code_of(self.pools[i].alloc_page)
            want = self.models[i].alloc()
            assert got == want
            if got >= 0 and got not in self.seen:
                self.seen.append(got)
            if got < 0:
                break

    @rule(i=st.integers(0, 1), data=st.data(), direct=st.booleans())
    def put(self, i, data, direct):
        p = self._page(data)
        assert code_of(self.pools[i].put_page, p, direct) == self.models[i].put(p, direct)

    @rule(i=st.integers(0, 1), data=st.data(), direct=st.booleans())
    def put_bulk(self, i, data, direct):
        k = data.draw(st.integers(0, 40))
        pages = [self._page(data) for _ in range(k)]
        assert code_of(self.pools[i].put_page_bulk, pages, direct) == \
            self.models[i].put_bulk(pages, direct)

    @rule(i=st.integers(0, 1), data=st.data())
    def release_page(self, i, data):
        p = self._page(data)
        rc = code_of(self.pools[i].release_page, p)
        assert rc == self.models[i].release_page(p)
        if rc == 0:
            self.extra[p] = self.extra.get(p, 0) + 1

    @rule(i=st.integers(0, 1), data=st.data())
    def ref_page(self, i, data):
        p = self._page(data)
        assert code_of(self.pools[i].ref_page, p) == self.models[i].ref_page(p)

    @rule(data=st.data())
    def arena_get(self, data):
        p = self._page(data)
        rc = code_of(self.arena.get_page, p)
        assert rc == self.m_arena.get_page(p)
        if rc > 0:
            self.extra[p] = self.extra.get(p, 0) + 1

    @precondition(lambda self: self.extra)
    @rule(data=st.data())
    def arena_put(self, data):
        p = data.draw(st.sampled_from(sorted(self.extra)))
        rc = code_of(self.arena.put_page, p)
        assert rc == self.m_arena.put_page(p)
        assert rc >= 0
        self.extra[p] -= 1
        if not self.extra[p]:
            del self.extra[p]

    @rule(i=st.integers(0, 1))
    def destroy(self, i):
        assert self.pools[i].destroy() == self.models[i].destroy()

    @precondition(lambda self: any(m.destroy_cnt for m in self.models))
    @rule(i=st.integers(0, 1))
    def release(self, i):
        if self.models[i].destroy_cnt:
            assert self.pools[i].release() == self.models[i].release_retry()

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def same_state(self):
        ar, ma = self.arena, self.m_arena
        assert free_pages(ar) == ma.free
        assert ar.stats() == ma.stats
        pg = ar.state.pages
        assert pg["refcount"].tolist() == ma.refcount
        assert pg["pp"].tolist() == ma.pp
        assert pg["pp_ref"].tolist() == ma.pp_ref
        assert ((pg["flags"] & A.PG_DMA_MAPPED) != 0).tolist() == ma.dma
        for pool, m in zip(self.pools, self.models):
            assert cache_contents(pool) == m.cache
            assert ring_contents(pool) == list(m.ring)
            assert pool.get_stats() == m.stats
            assert (pool.hold_cnt, pool.release_cnt, pool.inflight) == (m.hold, m.release, m.inflight)
            assert pool.freed == m.freed

    @invariant()
    def every_page_somewhere_once(self):
        ma = self.m_arena
        user = {p: ma.pp[p] for p in range(N_PAGES) if ma.pp_ref[p] > 0}
        held = {p for p in range(N_PAGES)
                if ma.refcount[p] > 0 and ma.pp[p] == -1}
        audit(self.arena, self.pools, user, extra=held)

    def teardown(self):
        if hasattr(self, "arena"):      # its memfd, not a later garbage collection's business
            self.arena.close()


TestPagePoolModel = PagePoolMachine.TestCase
# max_examples comes from the profile in tests/conftest.py (ci: 60, thorough: 500)
TestPagePoolModel.settings = settings(stateful_step_count=40, deadline=None,
                                  suppress_health_check=[HealthCheck.too_slow])


def test_model_agrees_on_a_fixed_scenario():
    """A deterministic run through every path, so a failure here is easy to read."""
    ar, ma = PageArena(100), naive.NaiveArena(100)
    pool = PagePool(ar, pool_size=4)
    m = naive.NaivePool(ma, pool.id, 4)
    got = [pool.alloc_page() for _ in range(70)]
    assert got == [m.alloc() for _ in range(70)]
    ar.get_page(got[5])
    ma.get_page(got[5])
    pool.put_page_bulk(got[:30], allow_direct=True)
    m.put_bulk(got[:30], allow_direct=True)
    for p in got[30:40]:
        pool.put_page(p)
        m.put(p)
    assert pool.get_stats() == m.stats
    assert ring_contents(pool) == list(m.ring) and cache_contents(pool) == m.cache
    assert pool.destroy() == m.destroy()
    assert free_pages(ar) == ma.free
    assert np.array_equal(ar.state.pages["refcount"], ma.refcount)
    ar.close()
