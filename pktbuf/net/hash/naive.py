"""A deliberately plain model of :mod:`.table`, for the tests: a dict, a FIFO of free slots
and a capacity rule.

* Keys map to ``(slot, data)``; positions are slot - 1.  Free slots are handed out first in,
  first out, starting with 1 .. entries in order, and a slot taken for an add that finds no
  room goes back to the *tail* -- as ``rte_hash`` (and the kernels) do, so positions can be
  compared exactly.
* Capacity: an add needs a free slot and a placement of every key into one of its two buckets
  (8 entries each), found here by an exhaustive augmenting-path search.  The kernels search
  only paths of at most 3 moves (DPDK's breadth-first search), so they may refuse an add this
  model accepts when the table is nearly full; the tests stay where the two agree (loads
  well under 90 %, or groups of keys sharing both buckets).
* The hash is CRC32-C computed bit by bit (no table, no instruction) unless a hash function
  is given.
"""
from __future__ import annotations

from collections import deque

E_NOENT, E_INVAL, E_BUSY, E_NOSPC = -2, -22, -16, -28
POLY = 0x82F63B78


def crc32c(data: bytes, init: int = 0) -> int:
    """``rte_hash_crc``: reflected CRC32-C from ``init``, no inversion, bit by bit."""
    c = init & 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ POLY if c & 1 else c >> 1
    return c


class NaiveHash:
    def __init__(self, entries: int, key_len: int, hash_func=None, init_val: int = 0,
                 no_free_on_del: bool = False):
        self.entries = entries
        self.key_len = key_len
        nb = 1 << max(0, (entries - 1).bit_length())
        self.nb = max(1, nb // 8)
        self.mask = self.nb - 1
        self.hash_func = hash_func or (lambda k: crc32c(k, init_val))
        self.no_free_on_del = no_free_on_del
        self.free = deque(range(1, entries + 1))
        self.map: dict[bytes, tuple[int, int]] = {}
        self.unfreed: set[int] = set()          # deleted, slot not yet freed
        self.where: dict[bytes, int] = {}       # key -> bucket in the model's placement
        self.load = [0] * self.nb

    def buckets(self, key: bytes) -> tuple[int, int]:
        h = self.hash_func(key) & 0xFFFFFFFF
        prim = h & self.mask
        return prim, (prim ^ (h >> 16)) & self.mask

    def _place(self, key: bytes) -> bool:
        """Room for ``key``: breadth-first search over buckets for one with a free entry,
        each step moving a key to its other bucket (an augmenting path of any length: exact
        feasibility), then the moves along the path."""
        start = list(dict.fromkeys(self.buckets(key)))
        parent: dict[int, tuple[int, bytes] | None] = {b: None for b in start}
        q = deque(start)
        while q:
            b = q.popleft()
            if self.load[b] < 8:
                while parent[b] is not None:
                    pb, o = parent[b]
                    self._move(o, b)
                    b = pb
                self._move(key, b)
                return True
            for o in [o for o, ob in self.where.items() if ob == b]:
                for a in self.buckets(o):
                    if a != b and a not in parent:
                        parent[a] = (b, o)
                        q.append(a)
        return False

    def _move(self, key: bytes, b: int) -> None:
        old = self.where.get(key)
        if old is not None:
            self.load[old] -= 1
        self.where[key] = b
        self.load[b] += 1

    # -- the verbs ---------------------------------------------------------------------------
    def add(self, key: bytes, data: int = 0) -> int:
        if key in self.map:
            slot, _ = self.map[key]
            self.map[key] = (slot, data)
            return slot - 1
        if not self.free:
            return E_NOSPC
        slot = self.free.popleft()
        if not self._place(key):
            self.free.append(slot)
            return E_NOSPC
        self.map[key] = (slot, data)
        return slot - 1

    def lookup(self, key: bytes):
        """(position, data) or (E_NOENT, 0)."""
        if key in self.map:
            slot, d = self.map[key]
            return slot - 1, d
        return E_NOENT, 0

    def delete(self, key: bytes) -> int:
        if key not in self.map:
            return E_NOENT
        slot, _ = self.map.pop(key)
        b = self.where.pop(key)
        self.load[b] -= 1
        if self.no_free_on_del:
            self.unfreed.add(slot)
        else:
            self.free.append(slot)
        return slot - 1

    def free_position(self, pos: int) -> int:
        slot = pos + 1
        if not 0 <= pos < self.entries:
            return E_INVAL
        if any(s == slot for s, _ in self.map.values()):
            return E_BUSY
        if slot not in self.unfreed:
            return E_INVAL
        self.unfreed.discard(slot)
        self.free.append(slot)
        return 0

    def count(self) -> int:
        return self.entries - len(self.free)

    def items(self):
        """{position: (key, data)}."""
        return {s - 1: (k, d) for k, (s, d) in self.map.items()}

    def reset(self) -> None:
        self.__init__(self.entries, self.key_len, self.hash_func, 0, self.no_free_on_del)
