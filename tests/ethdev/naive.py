"""A plain model of a ring port: each ring a FIFO of handles with a capacity."""
from __future__ import annotations

from collections import deque


class NaiveRingPort:
    def __init__(self, capacity: int):
        self.q = deque()
        self.capacity = capacity
        self.ipackets = self.opackets = self.oerrors = 0

    def tx(self, handles) -> int:
        k = min(len(handles), self.capacity - len(self.q))
        self.q.extend(handles[:k])
        self.opackets += k
        self.oerrors += len(handles) - k
        return k

    def rx(self, n: int) -> list:
        out = [self.q.popleft() for _ in range(min(n, len(self.q)))]
        self.ipackets += len(out)
        return out
