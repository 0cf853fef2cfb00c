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
