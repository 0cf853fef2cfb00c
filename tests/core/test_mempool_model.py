"""Random get/put/flush sequences on a Mempool, against the naive model of DPDK 26.07's cache
(naive.MempoolModel): which objects come out and in which order, every lcore's cache and the
ring object for object, and every statistics counter per lcore row."""
import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pktbuf import Domain, DoubleFree, InvalidHandle, LCORE_ANY, Mempool, PoolExhausted
from pktbuf.buf.mempool.layout import MAX_LCORE, STAT_NAMES
from pktbuf.buf.ring.kernels import CONS_TAIL, H_MASK, PROD_TAIL

from .naive import MempoolModel

LCORES = [0, 1, 2, LCORE_ANY]


def ring_contents(pool):
    h = pool.domain.ring_hdr_view(pool.id)
    mask = int(h[H_MASK])
    head, tail = int(h[CONS_TAIL]), int(h[PROD_TAIL])
    slots = pool.domain.state.ring_slots[pool._ring_base:pool._ring_base + pool._ring_size]
    return [int(slots[(head + i) & mask]) for i in range((tail - head) & 0xFFFFFFFF)]


class MempoolMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dom = Domain(max_objects=4096, max_ring_slots=8192)
        self.pool = None

    @initialize(n=st.integers(8, 80), cache=st.sampled_from([0, 1, 2, 7, 8, 16, 32]))
    def make(self, n, cache):
        cache = min(cache, n)
        self.pool = Mempool(n, 16, cache, domain=self.dom)
        # populating enqueues every object straight into the ring, in order, and counts no
        # statistics (as DPDK's rte_mempool_populate_*)
        self.model = MempoolModel(range(self.pool.obj_base, self.pool.obj_base + n), cache,
                                  MAX_LCORE)
        self.held = []

    def sizes(self, most):
        """Counts around the cache's half and whole size (where the algorithm changes
        branch), up to ``most``."""
        s, h = self.model.size, self.model.half
        near = sorted({min(most, max(0, x)) for x in (h - 1, h, h + 1, s - 1, s, s + 1, 2 * s, 1)})
        return st.one_of(st.sampled_from(near), st.integers(0, most))

    @rule(data=st.data(), lcore=st.sampled_from(LCORES))
    def get(self, data, lcore):
        k = data.draw(self.sizes(self.pool.n + 2))
        want = self.model.get(k, lcore) if k <= self.pool.n else None
        try:
            got = self.pool.get_bulk(k, lcore=lcore).tolist()
        except PoolExhausted:
            assert want is None, f"get({k}) failed; the model gave {want}"
            return
        assert got == want, (k, lcore, got, want)
        self.held.extend(got)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), lcore=st.sampled_from(LCORES))
    def put(self, data, lcore):
        k = data.draw(self.sizes(len(self.held)))
        objs = data.draw(st.permutations(self.held))[:k]
        self.pool.put_bulk(np.array(objs, np.int32), lcore=lcore)
        self.model.put(objs, lcore)
        for o in objs:
            self.held.remove(o)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), lcore=st.sampled_from([0, 1]))
    def put_small(self, data, lcore):
        """Small puts (1 .. size/2) fill a cache until it overflows: the flush branch."""
        k = data.draw(st.integers(1, max(1, min(len(self.held), self.model.half))))
        objs = self.held[-k:]
        self.pool.put_bulk(objs, lcore=lcore)
        self.model.put(objs, lcore)
        del self.held[-k:]

    @rule(data=st.data(), lcore=st.sampled_from(LCORES))
    def bad_put(self, data, lcore):
        """A put naming an object twice, or one the pool already has: refused, nothing moves."""
        free = sorted(set(range(self.pool.obj_base, self.pool.obj_base + self.pool.n))
                      - set(self.held))
        choices = []
        if self.held:
            choices.append(("dup", [self.held[0], self.held[0]]))
        if free:
            choices.append(("free", self.held[:1] + [data.draw(st.sampled_from(free))]))
        choices.append(("foreign", self.held[:1] + [self.pool.obj_base + self.pool.n + 5]))
        _, objs = data.draw(st.sampled_from(choices))
        before = (ring_contents(self.pool), self.pool.stats())
        try:
            self.pool.put_bulk(objs, lcore=lcore)
        except (DoubleFree, InvalidHandle):
            assert (ring_contents(self.pool), self.pool.stats()) == before
            return
        raise AssertionError(f"bad put {objs} was accepted")

    @rule(lcore=st.sampled_from(LCORES))
    def flush(self, lcore):
        self.pool.cache_flush(lcore)
        self.model.flush(lcore)

    @invariant()
    def same_as_the_model(self):
        if self.pool is None:
            return
        p, m = self.pool, self.model
        assert ring_contents(p) == m.ring
        for lc in LCORES[:-1]:
            n = p.cache_count(lc)
            assert p.domain.cache_objs_view()[p.id, lc, :n].tolist() == m.cache.get(lc, []), lc
        rows = p.domain.stats_view()[p.id, :, :len(STAT_NAMES)]
        for row in range(MAX_LCORE + 1):
            want = m.stats.get(row, dict.fromkeys(STAT_NAMES, 0))
            assert dict(zip(STAT_NAMES, rows[row].tolist())) == want, row
        assert p.avail_count == m.avail == p.n - len(self.held)
        assert p.audit() == m.avail

    def teardown(self):
        if self.pool is not None:
            if self.held:
                self.pool.put_bulk(self.held, lcore=LCORE_ANY)
            self.pool.close()


TestMempoolModel = MempoolMachine.TestCase
