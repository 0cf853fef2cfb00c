"""Lcore ids for Python threads.

Kernels take the lcore whose mempool caches they use as an explicit argument; two threads must
never use the same lcore id at the same time (as in DPDK).  Your own ``@njit`` loops pick their
ids from 0 upwards.  The Python facade gives each Python thread its own id automatically, from
the top of the range down (127, 126, ...), so it does not collide with yours; once the range is
used up, further threads get ``LCORE_ANY`` and go straight to the rings.
"""
from __future__ import annotations

import threading

MAX_LCORE = 128          # RTE_MAX_LCORE
LCORE_ANY = -1           # "no lcore": bypass the caches (DPDK's LCORE_ID_ANY / unregistered thread)

__all__ = ["LCORE_ANY", "MAX_LCORE", "facade_lcore", "reserve_lcores"]

_local = threading.local()
_lock = threading.Lock()
_next = MAX_LCORE - 1
_floor = 0
_free: list[int] = []


class _Slot:
    """Owns one lcore id for the life of a thread (returned when the thread's locals die)."""

    __slots__ = ("lcore",)

    def __init__(self, lcore: int):
        self.lcore = lcore

    def __del__(self):
        if self.lcore != LCORE_ANY:
            with _lock:
                _free.append(self.lcore)


def facade_lcore() -> int:
    """The lcore id of the calling Python thread (assigned on first use)."""
    slot = getattr(_local, "slot", None)
    if slot is None:
        global _next
        with _lock:
            if _free:
                lc = _free.pop()
            elif _next >= _floor:
                lc = _next
                _next -= 1
            else:
                lc = LCORE_ANY
        slot = _local.slot = _Slot(lc)
    return slot.lcore


def reserve_lcores(n: int) -> None:
    """Keep ids ``0 .. n-1`` for explicit use: the facade never hands them to a thread."""
    global _floor
    with _lock:
        _floor = max(_floor, int(n))
