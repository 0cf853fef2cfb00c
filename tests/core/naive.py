"""A deliberately simple pure-Python model of one mbuf pool (the reference for the tests).

It mirrors DPDK's semantics, not pktbuf's code: reference counts per segment, chains as lists,
indirect segments pointing at the direct mbuf whose buffer they use.
"""


class PoolModel:
    def __init__(self, n, data_room, headroom):
        self.n = n
        self.data_room = data_room
        self.headroom = min(headroom, data_room)
        self.refcnt = {}        # allocated handle -> refcnt
        self.next = {}          # handle -> next handle or None
        self.direct = {}        # indirect handle -> direct handle
        self.data_len = {}
        self.pkt_len = {}       # heads only (meaningful)

    @property
    def free(self):
        return self.n - len(self.refcnt)

    def alloc(self, h):
        assert h not in self.refcnt, "handed out twice"
        self.refcnt[h] = 1
        self.next[h] = None
        self.data_len[h] = 0
        self.pkt_len[h] = 0

    def segments(self, h):
        out = []
        while h is not None:
            out.append(h)
            h = self.next[h]
        return out

    def _release(self, h):
        """h's last reference is gone."""
        d = self.direct.pop(h, None)
        del self.refcnt[h]
        del self.next[h]
        if d is not None:
            self.refcnt[d] -= 1
            if self.refcnt[d] == 0:
                self._release(d)

    def free_packet(self, h):
        for s in self.segments(h):
            self.refcnt[s] -= 1
            if self.refcnt[s] == 0:
                self._release(s)

    def refs_ok(self, heads):
        """Would freeing `heads` (a list, NULL = None) stay within the references the
        application holds?  References held by clones (indirect segments) are not its own."""
        cnt = {}
        for h in heads:
            if h is None:
                continue
            if h not in self.refcnt:
                return False
            for s in self.segments(h):
                cnt[s] = cnt.get(s, 0) + 1
        for s, k in cnt.items():
            clones = sum(1 for d in self.direct.values() if d == s)
            if k > self.refcnt[s] - clones:
                return False
        return True

    def clone(self, h, new):
        """new: list of fresh handles, one per segment of h."""
        segs = self.segments(h)
        for i, (s, c) in enumerate(zip(segs, new)):
            self.alloc(c)
            d = self.direct.get(s, s)
            self.direct[c] = d
            self.refcnt[d] += 1
            self.data_len[c] = self.data_len[s]
            if i:
                self.next[new[i - 1]] = c
        self.pkt_len[new[0]] = self.pkt_len[h]

    def chain(self, a, b):
        last = self.segments(a)[-1]
        self.next[last] = b
        self.pkt_len[a] += self.pkt_len[b]
        self.pkt_len[b] = self.data_len[b]

    def tailroom(self, h):
        last = self.segments(h)[-1]
        return self.data_room - self.headroom - self.data_len[last] if last not in self.direct \
            else None


class MempoolModel:
    """DPDK 26.07's mempool cache, as pktbuf implements it (pktbuf/buf/mempool/kernels.py), in
    plain Python: a FIFO ring, one stack per lcore (top = end of the list), and the
    statistics counters per lcore row (row ``max_lcore`` for calls without a cache).

    * put(n): no cache (size 0 or LCORE_ANY) -> ring.  Fits (len + n <= size) -> push.
      Else n > size/2 -> ring, cache untouched.  Else the bottom (coldest) size/2 go to
      the ring, the rest slides down, then push.
    * get(n): no cache -> n from the ring, all or nothing.  n <= len -> pop the top n as
      one block in stack order (the hottest last).  Else hand out the whole cache (bottom
      first) and, if the rest r <= size/2 and the ring has size/2, refill exactly size/2 from
      the ring and pop the top r of them (in stack order); else take r straight from the ring
      (cache then empty); if the ring has fewer than r, fail with nothing taken and the cache
      as it was.
    """

    STATS = ("put_bulk", "put_objs", "put_common_pool_bulk", "put_common_pool_objs",
             "get_common_pool_bulk", "get_common_pool_objs", "get_success_bulk",
             "get_success_objs", "get_fail_bulk", "get_fail_objs")

    def __init__(self, objs, cache_size, max_lcore=128):
        self.ring = list(objs)            # FIFO: dequeue from the front
        self.size = cache_size
        self.half = cache_size // 2
        self.max_lcore = max_lcore
        self.cache = {}                   # lcore -> list (top at the end)
        self.stats = {}                   # row -> {name: count}

    def _row(self, lcore):
        return lcore if 0 <= lcore < self.max_lcore else self.max_lcore

    def _add(self, row, **kv):
        st = self.stats.setdefault(row, dict.fromkeys(self.STATS, 0))
        for k, v in kv.items():
            st[k] += v

    def _ring_take(self, n):
        if len(self.ring) < n:
            return None
        out, self.ring = self.ring[:n], self.ring[n:]
        return out

    def put(self, objs, lcore):
        n = len(objs)
        if n == 0:
            return
        row = self._row(lcore)
        self._add(row, put_bulk=1, put_objs=n)
        if self.size == 0 or row == self.max_lcore:
            self.ring.extend(objs)
            self._add(row, put_common_pool_bulk=1, put_common_pool_objs=n)
            return
        c = self.cache.setdefault(lcore, [])
        if len(c) + n > self.size:
            if n > self.half:
                self.ring.extend(objs)
                self._add(row, put_common_pool_bulk=1, put_common_pool_objs=n)
                return
            self.ring.extend(c[:self.half])
            self._add(row, put_common_pool_bulk=1, put_common_pool_objs=self.half)
            del c[:self.half]
        c.extend(objs)

    def get(self, n, lcore):
        """The objects handed out, in order, or None (nothing taken)."""
        if n == 0:
            return []
        row = self._row(lcore)
        if self.size == 0 or row == self.max_lcore:
            out = self._ring_take(n)
            if out is None:
                self._add(row, get_fail_bulk=1, get_fail_objs=n)
                return None
            self._add(row, get_common_pool_bulk=1, get_common_pool_objs=n,
                      get_success_bulk=1, get_success_objs=n)
            return out
        c = self.cache.setdefault(lcore, [])
        if n <= len(c):
            out = c[len(c) - n:]
            del c[len(c) - n:]
            self._add(row, get_success_bulk=1, get_success_objs=n)
            return out
        out = c[:]
        rest = n - len(c)
        refill = self._ring_take(self.half) if rest <= self.half else None
        if refill is not None:
            out += refill[self.half - rest:]
            c[:] = refill[:self.half - rest]
            self._add(row, get_common_pool_bulk=1, get_common_pool_objs=self.half)
        else:
            direct = self._ring_take(rest)
            if direct is None:
                self._add(row, get_fail_bulk=1, get_fail_objs=n)
                return None
            out += direct
            c.clear()
            self._add(row, get_common_pool_bulk=1, get_common_pool_objs=rest)
        self._add(row, get_success_bulk=1, get_success_objs=n)
        return out

    def flush(self, lcore):
        c = self.cache.get(lcore)
        if c:
            self.ring.extend(c)
            c.clear()

    @property
    def avail(self):
        return len(self.ring) + sum(len(c) for c in self.cache.values())
