"""Random sequences of alloc / free / free_bulk / clone / chain / refcnt / append, against the
pure-Python model in naive.py.  Invariants after every step: available + in use = pool size,
no object in the pool twice (the pool audit), every refcnt >= 1 and equal to the model's,
every packet's data inside its room (the sanity check), and pkt_len as the model says."""
import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pktbuf import Domain, DoubleFree, NoRoom, PktmbufPool, PoolExhausted

from .naive import PoolModel

N = 48
ROOM = 512
HEAD = 64


class MbufMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dom = Domain(max_objects=4096, max_ring_slots=8192)
        self.pool = PktmbufPool(N, 8, ROOM, headroom=HEAD, domain=self.dom)
        self.model = PoolModel(N, ROOM, HEAD)
        self.held = []          # packet references we own (a head may appear several times)

    def teardown(self):
        self.pool.free_bulk(self.held)
        assert self.pool.avail_count == N and self.pool.audit() == N
        self.pool.close()           # every example's memfd now, not all of them at the end

    @rule(k=st.integers(0, 12), staged=st.booleans())
    def alloc_bulk(self, k, staged):
        if k > self.model.free:
            try:
                self.pool.alloc_bulk(k, lcore=0)
            except PoolExhausted:
                return
            raise AssertionError("alloc_bulk succeeded with too few free mbufs")
        hs = self.pool.alloc_bulk(k, lcore=0)
        for h in hs.tolist():
            self.model.alloc(h)
            self.held.append(h)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), staged=st.booleans(), nulls=st.integers(0, 3))
    def free_bulk(self, data, staged, nulls):
        idx = data.draw(st.lists(st.integers(0, len(self.held) - 1), unique=True, max_size=10))
        heads = [self.held[i] for i in idx] + [None] * nulls
        heads = data.draw(st.permutations(heads))
        arr = np.array([-1 if h is None else h for h in heads], np.int32)
        self.pool.free_bulk(arr, lcore=0, staged=staged)
        for h in heads:
            if h is not None:
                self.model.free_packet(h)
        for i in sorted(idx, reverse=True):
            del self.held[i]

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def free_one(self, data):
        i = data.draw(st.integers(0, len(self.held) - 1))
        self.pool.mbuf(self.held[i]).free(lcore=0)
        self.model.free_packet(self.held.pop(i))

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def double_free_is_refused(self, data):
        """Free more references than held: DoubleFree, nothing changes."""
        i = data.draw(st.integers(0, len(self.held) - 1))
        h = self.held[i]
        times = self.held.count(h) + 1
        before = self.pool.avail_count
        try:
            self.pool.free_bulk([h] * times, lcore=0)
        except DoubleFree:
            assert self.pool.avail_count == before
            return
        # legal only if the model says those references exist (e.g. shared segments)
        assert self.model.refs_ok([h] * times)
        for _ in range(times):
            self.model.free_packet(h)
        self.held = [x for x in self.held if x != h]

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def clone(self, data):
        h = data.draw(st.sampled_from(self.held))
        nseg = len(self.model.segments(h))
        if any(self.model.refcnt[self.model.direct.get(s, s)] >= 1000
               for s in self.model.segments(h)):
            return
        if nseg > self.model.free:
            try:
                self.pool.mbuf(h).clone(self.pool, lcore=0)
            except PoolExhausted:
                return
            raise AssertionError("clone succeeded without enough mbufs")
        c = self.pool.mbuf(h).clone(self.pool, lcore=0)
        new = [s.handle for s in c.segments()]
        self.model.clone(h, new)
        self.held.append(c.handle)

    @precondition(lambda self: len(set(self.held)) >= 2)
    @rule(data=st.data())
    def chain(self, data):
        a, b = data.draw(st.lists(st.sampled_from(sorted(set(self.held))), min_size=2, max_size=2,
                                  unique=True))
        # only packets we own outright: one reference, no shared segment
        for p in (a, b):
            if self.held.count(p) != 1 or any(self.model.refcnt[s] != 1
                                              for s in self.model.segments(p)):
                return
        if set(self.model.segments(a)) & set(self.model.segments(b)):
            return
        self.pool.mbuf(a).chain(b)
        self.model.chain(a, b)
        self.held.remove(b)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def refcnt_up(self, data):
        h = data.draw(st.sampled_from(self.held))
        if any(self.model.refcnt[s] >= 1000 for s in self.model.segments(h)):
            return
        self.pool.mbuf(h).refcnt_update(1)
        for s in self.model.segments(h):
            self.model.refcnt[s] += 1
        self.held.append(h)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), n=st.integers(0, ROOM))
    def append(self, data, n):
        h = data.draw(st.sampled_from(self.held))
        room = self.model.tailroom(h)
        if room is None:          # last segment is indirect: data is shared, leave it
            return
        m = self.pool.mbuf(h)
        if n > room:
            try:
                m.append(n)
            except NoRoom:
                assert m.pkt_len == self.model.pkt_len[h]
                return
            raise AssertionError("append beyond the tailroom succeeded")
        m.append(n)[:] = 0xAB
        last = self.model.segments(h)[-1]
        self.model.data_len[last] += n
        self.model.pkt_len[h] += n

    @invariant()
    def accounting(self):
        p, model = self.pool, self.model
        assert p.avail_count == model.free
        assert p.avail_count + p.in_use_count == N
        assert p.audit() == model.free
        mb = self.dom.state.mb
        for h, rc in model.refcnt.items():
            assert rc >= 1
            assert int(mb[h]["refcnt"]) == rc, f"refcnt of {h}"
        for h in set(self.held):
            m = p.mbuf(h)
            m.check()
            assert m.pkt_len == model.pkt_len[h]
            assert m.nb_segs == len(model.segments(h))


TestMbufMachine = MbufMachine.TestCase
