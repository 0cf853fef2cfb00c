"""A pure-Python reference for the heap's *contract* (not its placement policy).

It tracks the live blocks and the bytes each must hold, and decides what every call must do:
which calls succeed, which pointers are errors and of which kind, what a block reads as after
zmalloc/calloc/realloc, and what the statistics must say.  Where the answer depends on
placement (whether a request of n bytes fits), it asks the heap's element table through an
independent walk (``fits``), so "out of memory" is only accepted when no free element could
hold the block.
"""
from __future__ import annotations

import numpy as np

GRAIN = 64


def grains(n: int) -> int:
    return (n + GRAIN - 1) // GRAIN


class NaiveHeap:
    def __init__(self, base: int, size: int):
        self.base = base
        self.size = size
        self.live: dict[int, bytearray] = {}     # address -> expected content (requested size)
        self.freed: set[int] = set()             # addresses freed and not handed out again

    # -- queries ---------------------------------------------------------------------------
    def usable(self, ptr: int) -> int:
        return grains(len(self.live[ptr])) * GRAIN

    def allocated_bytes(self, usable_sizes: dict[int, int]) -> int:
        return sum(usable_sizes[p] for p in self.live)

    @staticmethod
    def fits(free_elems: list[tuple[int, int]], base: int, size: int, align: int) -> bool:
        """Whether some free element (start grain, grains) can hold ``size`` bytes aligned."""
        s = grains(size)
        al = max(align, GRAIN)
        for start, n in free_elems:
            a = start + n - s
            if a < start:
                continue
            addr = (base + a * GRAIN) // al * al
            if (addr - base) // GRAIN >= start:
                return True
        return False

    # -- the contract ----------------------------------------------------------------------
    def check_block(self, ptr: int, size: int, align: int) -> None:
        """A new block: inside the heap, aligned, overlapping no live block."""
        assert ptr % max(align, GRAIN) == 0
        assert self.base <= ptr and ptr + size <= self.base + self.size
        end = ptr + grains(size) * GRAIN
        for q, data in self.live.items():
            qend = q + grains(len(data)) * GRAIN
            assert end <= q or qend <= ptr, f"block {ptr:#x} overlaps live block {q:#x}"

    def on_alloc(self, ptr: int, content: bytes) -> None:
        self.live[ptr] = bytearray(content)
        self.freed.discard(ptr)

    def on_free(self, ptr: int) -> None:
        del self.live[ptr]
        self.freed.add(ptr)

    def free_error(self, ptr: int) -> str | None:
        """None if free(ptr) must succeed; else 'double' or 'invalid'."""
        if ptr == 0 or ptr in self.live:
            return None
        return "double" if ptr in self.freed else "invalid"

    def contents_ok(self, region_array: np.ndarray) -> None:
        for p, data in self.live.items():
            off = p - self.base
            got = region_array[off:off + len(data)].tobytes()
            assert got == bytes(data), f"block {p:#x} lost its contents"
