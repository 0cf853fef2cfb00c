"""A slow, obviously correct pure-Python page arena + page pool, for the model-based tests.

It follows the documented behaviour (Linux's, as docs/pagepool.md states it), not the kernels'
code: lists and a deque instead of arrays and a ring.  Every call returns what the kernel
returns (page id / 0 / negative code) and updates the same counters, so a random sequence of
calls can be checked step by step: same page ids, same statistics, same in-flight counts.
"""
from __future__ import annotations

from collections import deque

E_BADF, E_NOMEM, E_INVAL, E_BUSY, E_ALREADY = -9, -12, -22, -16, -114
CACHE, REFILL = 128, 64
STATS = ("fast", "slow", "slow_high_order", "empty", "refill", "waive",
         "cached", "cache_full", "ring", "ring_full", "released_refcnt")


class NaiveArena:
    def __init__(self, n):
        self.n = n
        self.free = list(range(n - 1, -1, -1))   # top of stack = end of list
        self.refcount = [0] * n
        self.pp = [-1] * n
        self.pp_ref = [0] * n
        self.dma = [False] * n
        self.stats = dict(alloc_calls=0, bulk_calls=0, pages_out=0, pages_in=0, fail=0)

    def _prep(self, p):
        self.refcount[p] = 1
        self.pp[p] = -1
        self.pp_ref[p] = 0
        self.dma[p] = False

    def alloc_page(self):
        if not self.free:
            self.stats["fail"] += 1
            return E_NOMEM
        p = self.free.pop()
        self._prep(p)
        self.stats["alloc_calls"] += 1
        self.stats["pages_out"] += 1
        return p

    def alloc_pages_bulk(self, arr):
        """Fill -1 slots of the list ``arr`` in order; returns how many were filled."""
        empty = [i for i, v in enumerate(arr) if v < 0]
        if not empty:
            return 0
        take = min(len(empty), len(self.free))
        if take == 0:
            self.stats["fail"] += 1
            return 0
        for i in empty[:take]:
            arr[i] = self.free.pop()
            self._prep(arr[i])
        self.stats["bulk_calls"] += 1
        self.stats["pages_out"] += take
        return take

    def put_page(self, p):
        if not 0 <= p < self.n:
            return E_BADF
        if self.refcount[p] <= 0:
            return E_ALREADY
        self.refcount[p] -= 1
        if self.refcount[p]:
            return 0
        self.pp[p] = -1
        self.pp_ref[p] = 0
        self.dma[p] = False
        self.free.append(p)
        self.stats["pages_in"] += 1
        return 1

    def get_page(self, p):
        if not 0 <= p < self.n:
            return E_BADF
        if self.refcount[p] <= 0:
            return E_ALREADY
        self.refcount[p] += 1
        return self.refcount[p]


class NaivePool:
    def __init__(self, arena: NaiveArena, pid: int, ring_size=1024, refill="bulk", dma=False):
        self.a = arena
        self.id = pid
        self.ring_size = ring_size
        self.refill_mode = refill
        self.dma_map = dma
        self.cache = []             # LIFO, top = end
        self.ring = deque()
        self.stats = dict.fromkeys(STATS, 0)
        self.hold = 0
        self.release = 0
        self.alive = True
        self.direct_ok = True
        self.freed = False
        self.destroy_cnt = 0

    # -- entering / leaving -----------------------------------------------------------------
    def _enter(self, p):
        self.a.pp[p] = self.id
        if self.dma_map:
            self.a.dma[p] = True

    def _leave(self, p):
        self.a.dma[p] = False
        self.a.pp[p] = -1
        self.a.pp_ref[p] = 0
        self.release += 1

    def _return(self, p):
        self._leave(p)
        self.a.put_page(p)

    def _owned(self, p):
        return 0 <= p < self.a.n and self.a.pp[p] == self.id

    # -- alloc --------------------------------------------------------------------------------
    def alloc(self):
        if self.cache:
            p = self.cache.pop()
            self.stats["fast"] += 1
        else:
            if not self.alive:
                return E_INVAL
            if not self.ring:
                self.stats["empty"] += 1
                p = self._slow()
                if p < 0:
                    return p
            else:
                got = [self.ring.popleft() for _ in range(min(REFILL, len(self.ring)))]
                self.cache = got
                p = self.cache.pop()
                self.stats["refill"] += 1
        self.a.pp_ref[p] = 1
        return p

    def _slow(self):
        if self.refill_mode == "bulk":
            arr = [-1] * REFILL
            got = self.a.alloc_pages_bulk(arr)
            if got == 0:
                return E_NOMEM
            pages = [p for p in arr if p >= 0]
            for p in pages:
                self._enter(p)
            self.hold += len(pages)
            self.stats["slow"] += 1
            self.cache = pages
            return self.cache.pop()
        p = self.a.alloc_page()
        if p < 0:
            return E_NOMEM
        self._enter(p)
        self.hold += 1
        self.stats["slow"] += 1
        return p

    # -- free ---------------------------------------------------------------------------------
    def _ring_put(self, batch):
        room = self.ring_size - len(self.ring)
        fit = batch[:room]
        self.ring.extend(fit)
        self.stats["ring"] += len(fit)
        if len(fit) < len(batch):
            self.stats["ring_full"] += 1
            for p in batch[len(fit):]:
                self._return(p)

    def _direct(self, p):
        if len(self.cache) < CACHE:
            self.cache.append(p)
            self.stats["cached"] += 1
            return True
        self.stats["cache_full"] += 1
        return False

    def _put_unrefed(self, p, allow_direct):
        if self.a.refcount[p] != 1:
            self.stats["released_refcnt"] += 1
            self._return(p)
            return
        if allow_direct and self.direct_ok and self._direct(p):
            return
        self._ring_put([p])

    def put(self, p, allow_direct=False):
        if not self._owned(p):
            return E_BADF
        if self.a.pp_ref[p] <= 0:
            return E_ALREADY
        self.a.pp_ref[p] -= 1
        if self.a.pp_ref[p] == 0:
            self._put_unrefed(p, allow_direct)
        return 0

    def put_bulk(self, pages, allow_direct=False):
        for p in pages:
            if not self._owned(p):
                return E_BADF
        for p in set(pages):
            if pages.count(p) > self.a.pp_ref[p]:
                return E_ALREADY
        last = []
        for p in pages:
            self.a.pp_ref[p] -= 1
            if self.a.pp_ref[p] == 0:
                last.append(p)
        stage = []
        direct = allow_direct and self.direct_ok
        for p in last:
            if self.a.refcount[p] != 1:
                self.stats["released_refcnt"] += 1
                self._return(p)
                continue
            if direct and self._direct(p):
                continue
            stage.append(p)
            if len(stage) == 16:
                self._ring_put(stage)
                stage = []
        if stage:
            self._ring_put(stage)
        return 0

    def release_page(self, p):
        if not self._owned(p):
            return E_BADF
        if self.a.pp_ref[p] != 1:
            return E_ALREADY if self.a.pp_ref[p] <= 0 else E_BUSY
        self._leave(p)
        return 0

    def ref_page(self, p):
        if not self._owned(p):
            return E_BADF
        if self.a.pp_ref[p] <= 0:
            return E_ALREADY
        self.a.pp_ref[p] += 1
        return self.a.pp_ref[p]

    # -- shutdown -----------------------------------------------------------------------------
    @property
    def inflight(self):
        return self.hold - self.release

    def destroy(self):
        if self.alive:
            self.alive = False
            self.direct_ok = False
        return self.release_retry()

    def release_retry(self):
        if self.freed:
            return 0
        if self.destroy_cnt == 0:
            cache, self.cache = self.cache, []
            for p in cache:
                self._return(p)
            for p in range(self.a.n):
                if self.a.pp[p] == self.id:
                    self.a.dma[p] = False
        self.destroy_cnt += 1
        while self.ring:
            self._return(self.ring.popleft())
        if self.inflight == 0:
            self.freed = True
        return self.inflight
