"""Lcore ids for Python threads.

Kernels take the lcore whose mempool caches they use as an explicit argument; two threads must
never use the same lcore id at the same time (as in DPDK: a cache is per lcore and unlocked).
Ids are ``0 .. MAX_LCORE - 1``; ``LCORE_ANY`` (-1) means "no lcore" and bypasses the caches, so
any number of threads may use it at once.

Your own ``@njit`` loops pick their ids from 0 upwards.  The Python facade gives each Python
thread its own id automatically, from the top of the range down (127, 126, ...), so it does
not collide with yours; once the range is used up, further threads get ``LCORE_ANY`` and go
straight to the rings.  :func:`reserve_lcores` keeps ``0 .. n-1`` out of the automatic range.

A thread can choose its id instead, with :func:`bind`::

    with pktbuf.lcore.bind(3):          # facade calls of this thread use lcore 3
        pool.alloc_bulk(32)             # (an explicit lcore= argument still wins)

``bind`` refuses an id that another live thread holds -- bound explicitly or assigned
automatically -- and anything outside ``0 .. MAX_LCORE - 1`` and ``LCORE_ANY``.
"""
from __future__ import annotations

import threading

from .errors import InvalidArgument, check_count

MAX_LCORE = 128          # RTE_MAX_LCORE
LCORE_ANY = -1           # "no lcore": bypass the caches (DPDK's LCORE_ID_ANY / unregistered thread)

__all__ = ["LCORE_ANY", "MAX_LCORE", "facade_lcore", "reserve_lcores", "bind", "check_lcore",
           "LcoreBinding", "held_lcores", "set_auto_floor"]

class _Local(threading.local):
    """Per-thread: the stack of bind()s and the automatically assigned slot.  Both always
    exist (a missing thread-local attribute costs an exception, ~2 us, on every call)."""

    def __init__(self):
        self.bound: list[int] = []
        self.slot = None
        self.lc = None      # what facade_lcore returns (None: not worked out yet), kept in
                            # step with ``bound`` and ``slot`` so the usual call is one lookup


_local = _Local()
# the hottest facade paths read ``facade_local.lc`` themselves and call facade_lcore() only when
# it is None: a Python call fewer per facade call (~60 ns)
facade_local = _local
_lock = threading.Lock()
_floor = 0
# lcore id -> the thread that holds it (automatically assigned or bound); LCORE_ANY is never here
_owner: dict[int, threading.Thread] = {}


def _held_by_other(lc: int, me: threading.Thread) -> bool:
    """True if another thread that is still alive holds ``lc`` (call with ``_lock`` held).
    Ids of threads that died without releasing them are reclaimed here."""
    t = _owner.get(lc)
    if t is None or t is me:
        return False
    if not t.is_alive():
        del _owner[lc]
        return False
    return True


class _Slot:
    """Owns the automatically assigned id of a thread (released when the thread's locals die)."""

    __slots__ = ("lcore", "thread")

    def __init__(self, lcore: int, thread: threading.Thread):
        self.lcore = lcore
        self.thread = thread

    def __del__(self, _lock=_lock, _owner=_owner):
        # (the module's lock and table bound at definition: this may run while the interpreter
        # tears modules down, when their globals are already None)
        if self.lcore != LCORE_ANY:
            with _lock:
                if _owner.get(self.lcore) is self.thread:
                    del _owner[self.lcore]


def _auto_slot() -> _Slot:
    me = threading.current_thread()
    with _lock:
        lc = LCORE_ANY
        for cand in range(MAX_LCORE - 1, _floor - 1, -1):
            if not _held_by_other(cand, me) and cand not in _owner:
                lc = cand
                _owner[cand] = me
                break
    slot = _local.slot = _Slot(lc, me)
    _local.lc = None
    return slot


def facade_lcore() -> int:
    """The lcore id the facade uses for the calling thread: the innermost :func:`bind`, else
    the thread's automatically assigned id (assigned on first use)."""
    lc = _local.lc
    if lc is None:
        stack = _local.bound
        if stack:
            lc = stack[-1]
        else:
            slot = _local.slot
            if slot is None:
                slot = _auto_slot()
            lc = slot.lcore
        _local.lc = lc
    return lc


def check_lcore(lcore) -> int:
    """The lcore a facade call uses: ``None`` -> the calling thread's (:func:`facade_lcore`);
    otherwise an integer in ``[LCORE_ANY, MAX_LCORE - 1]`` (InvalidArgument if not)."""
    if lcore is None:
        return facade_lcore()
    return check_count(lcore, "lcore", lo=LCORE_ANY, hi=MAX_LCORE - 1)


def reserve_lcores(n: int) -> None:
    """Keep ids ``0 .. n-1`` for explicit use: the facade never assigns them to a thread
    automatically (ids already assigned stay with their threads)."""
    global _floor
    n = check_count(n, "n", lo=0, hi=MAX_LCORE)
    with _lock:
        _floor = max(_floor, n)


def set_auto_floor(n: int) -> int:
    """Set the lowest id the facade assigns automatically to ``n`` (``MAX_LCORE``: none, new
    threads get ``LCORE_ANY``); returns the previous floor, to restore it later.  Unlike
    :func:`reserve_lcores` it can lower the floor again."""
    global _floor
    n = check_count(n, "n", lo=0, hi=MAX_LCORE)
    with _lock:
        old, _floor = _floor, n
    return old


def held_lcores() -> list[int]:
    """The ids that live threads of this process hold (bound or assigned automatically), sorted.
    A shared domain claims them for this process, so no other process gets them."""
    me = threading.current_thread()
    with _lock:
        return sorted(lc for lc in list(_owner) if lc in _owner and
                      (_owner[lc] is me or _held_by_other(lc, me)))


class LcoreBinding:
    """The result of :func:`bind`: the binding is in force from the call until :meth:`release`
    (or the end of the ``with`` block)."""

    __slots__ = ("lcore", "_thread", "_released")

    def __init__(self, lcore: int, thread: threading.Thread):
        self.lcore = lcore
        self._thread = thread
        self._released = False

    def release(self) -> None:
        """End the binding (from the thread that made it)."""
        if self._released:
            return
        if threading.current_thread() is not self._thread:
            raise InvalidArgument("an lcore binding must be released by the thread that made it")
        stack = _local.bound
        # bindings nest: release this one (normally the innermost)
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] == self.lcore:
                del stack[i]
                break
        _local.lc = None
        self._released = True
        if self.lcore != LCORE_ANY and self.lcore not in stack:
            with _lock:
                slot = _local.slot
                auto = slot is not None and slot.lcore == self.lcore
                if not auto and _owner.get(self.lcore) is self._thread:
                    del _owner[self.lcore]

    def __enter__(self) -> int:
        return self.lcore

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"LcoreBinding(lcore={self.lcore}{', released' if self._released else ''})"


def bind(lcore) -> LcoreBinding:
    """Make the calling thread use ``lcore`` for its facade calls, from now until the binding
    is released (use it as a context manager).  Bindings nest.

    ``lcore`` is ``0 .. MAX_LCORE - 1`` or ``LCORE_ANY`` (no cache).  An id held by another
    live thread -- bound, or assigned automatically -- raises InvalidArgument, as does anything
    else outside that range.  The thread's automatically assigned id, if it has one, stays
    reserved for it.
    """
    lc = check_count(lcore, "lcore", lo=LCORE_ANY, hi=MAX_LCORE - 1)
    me = threading.current_thread()
    if lc != LCORE_ANY:
        with _lock:
            if _held_by_other(lc, me):
                raise InvalidArgument(f"lcore {lc} is in use by thread {_owner[lc].name!r}")
            _owner[lc] = me
    _local.bound.append(lc)
    _local.lc = None
    return LcoreBinding(lc, me)
