"""Model-based test: random malloc/zmalloc/calloc/realloc/free sequences against naive.py.

After every step: no two live blocks overlap, every live block still holds what was written to
it, zmalloc/calloc memory read as zeros, bad frees raised the right error and changed nothing,
and the invariants of ``check_invariants`` hold (elements tile the heap, no adjacent free
elements, free memory outside dirty ranges is zero, every byte is free or in a live block,
statistics agree).  Heaps are clean or dirty (memory of unknown contents) and zero freed
blocks outside the lock with or without lcore caches, or inside the lock; calls run as one of
two lcores, and caches are flushed at random.
"""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pktbuf import DoubleFree, InvalidHandle, OutOfMemory
from pktbuf.buf.heap.api import GRAIN, Heap
from pktbuf.buf.heap.layout import ELEM_CACHED, ELEM_FREE
from pktbuf.shm import Region

from .conftest import assert_unchanged, check_invariants, snapshot, walk
from .naive import NaiveHeap

HEAP_GRAINS = 1024          # 64 KiB: small enough to run out
sizes = st.one_of(st.integers(1, 200), st.integers(1, 3000), st.integers(1, 40_000))
# at most the page size: placement then does not depend on where mmap put the region
aligns = st.sampled_from([0, 0, 0, 64, 128, 1024, 4096])


class HeapMachine(RuleBasedStateMachine):
    @initialize(dirty=st.booleans(), kind=st.sampled_from(["cache", "outside", "inside"]))
    def setup(self, dirty, kind):
        kw = {"cache": {}, "outside": {"cache": False}, "inside": {"zero_in_lock": True}}[kind]
        self.lcore = 0
        if dirty:
            r = Region(HEAP_GRAINS * GRAIN)
            r.array[:] = 0xC3
            self.region = r            # not the heap's: closed after it
            self.heap = Heap(region=r, **kw)
        else:
            self.heap = Heap(HEAP_GRAINS * GRAIN, **kw)
        self.model = NaiveHeap(self.heap.base, self.heap.size)
        self.stamp = 0

    def _free_elems(self):
        return [(s, n) for s, n, state, _, _ in walk(self.heap) if state == ELEM_FREE]

    def _fill(self, ptr, size):
        self.stamp = self.stamp % 250 + 1          # never 0: lost data cannot look zeroed
        v = self.heap.view(ptr, size)
        v[:] = self.stamp
        return bytes(v)

    def _new_block(self, kind, size, align, num=1):
        free = self._free_elems()
        fits = NaiveHeap.fits(free, self.heap.base, size * num, align)
        lc = self.lcore
        try:
            if kind == "malloc":
                p = self.heap.malloc(size, align, lcore=lc)
            elif kind == "zmalloc":
                p = self.heap.zmalloc(size, align, lcore=lc)
            else:
                p = self.heap.calloc(num, size, align, lcore=lc)
        except OutOfMemory:
            assert not fits, f"{kind}({size * num}, {align}) failed although a free element fits"
            return
        n = size * num
        self.model.check_block(p, n, align)
        if kind != "malloc":
            assert not self.heap.view(p, n).any(), f"{kind} returned non-zero memory"
        self.model.on_alloc(p, self._fill(p, n))

    # -- rules -----------------------------------------------------------------------------
    @rule(size=sizes, align=aligns)
    def malloc(self, size, align):
        self._new_block("malloc", size, align)

    @rule(size=sizes, align=aligns)
    def zmalloc(self, size, align):
        self._new_block("zmalloc", size, align)

    @rule(num=st.integers(1, 50), size=st.integers(1, 500))
    def calloc(self, num, size):
        self._new_block("calloc", size, 0, num)

    @precondition(lambda self: self.model.live)
    @rule(data=st.data())
    def free(self, data):
        p = data.draw(st.sampled_from(sorted(self.model.live)))
        self.heap.free(p, lcore=self.lcore)
        self.model.on_free(p)

    @rule(lcore=st.sampled_from([0, 1, -1]))
    def switch_lcore(self, lcore):
        self.lcore = lcore

    @rule(lcore=st.sampled_from([0, 1, -1]))
    def flush(self, lcore):
        self.heap.flush_cache(lcore)

    @precondition(lambda self: self.model.live)
    @rule(data=st.data(), size=sizes, align=aligns)
    def realloc(self, data, size, align):
        p = data.draw(st.sampled_from(sorted(self.model.live)))
        old = bytes(self.model.live[p])
        free = self._free_elems()
        snap = snapshot(self.heap)
        try:
            q = self.heap.realloc(p, size, align)
        except OutOfMemory:
            assert_unchanged(self.heap, snap)
            # in place was impossible, and no free element holds the new block
            assert not NaiveHeap.fits(free, self.heap.base, size, align)
            return
        keep = min(len(old), size)
        assert self.heap.view(q, keep).tobytes() == old[:keep], "realloc lost the contents"
        del self.model.live[p]
        if q != p:
            self.model.freed.add(p)
        self.model.check_block(q, size, align)
        self.model.on_alloc(q, self._fill(q, size))

    @rule(data=st.data())
    def bad_free(self, data):
        heap, model = self.heap, self.model
        cands = [heap.base - GRAIN, heap.base + heap.size, heap.base + 7, 12345]
        cands += [p + GRAIN for p, d in model.live.items() if len(d) > GRAIN]
        cands += sorted(model.freed)
        cands += [heap.base + s * GRAIN for s, _ in self._free_elems()]
        p = data.draw(st.sampled_from(cands))
        if model.free_error(p) is None:
            return                                  # it became a live block again
        # expected error: a grain-aligned address inside a free element, or the start of a
        # block held in an lcore cache, is a double free (freed before, maybe merged since);
        # anything else is not a block of this heap
        want = InvalidHandle
        if (p - heap.base) % GRAIN == 0:
            for s, n in self._free_elems():
                if heap.base + s * GRAIN <= p < heap.base + (s + n) * GRAIN:
                    want = DoubleFree
            if any(heap.base + s * GRAIN == p for s, _, state, _, _ in walk(heap)
                   if state == ELEM_CACHED):
                want = DoubleFree
        snap = snapshot(heap)
        try:
            heap.free(p, lcore=self.lcore)
        except (DoubleFree, InvalidHandle) as e:
            assert type(e) is want, f"free({p:#x}) raised {type(e).__name__}, not {want.__name__}"
        else:
            raise AssertionError(f"free({p:#x}) of a non-block succeeded")
        assert_unchanged(heap, snap)

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def heap_is_consistent(self):
        self.model.contents_ok(self.heap.region.array)
        check_invariants(self.heap, {p: len(d) for p, d in self.model.live.items()})

    def teardown(self):
        for p in list(self.model.live):
            self.heap.free(p)
        if hasattr(self, "heap"):
            self.heap.flush_cache()
            els = walk(self.heap)
            assert len(els) == 1 and els[0][2] == ELEM_FREE
            check_invariants(self.heap, {})
            self.heap.close()
        if getattr(self, "region", None) is not None:
            self.region.close()


TestHeapModel = HeapMachine.TestCase
# max_examples comes from the profile in tests/conftest.py (ci: 60, thorough: 500)
TestHeapModel.settings = settings(stateful_step_count=50, deadline=None,
                                  suppress_health_check=[HealthCheck.too_slow])
