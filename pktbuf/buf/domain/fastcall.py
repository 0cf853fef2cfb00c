"""Calling compiled kernels from Python without Numba's per-call type dispatch.

A ``Dispatcher`` call works out the Numba type of every argument before it can pick the
compiled version.  A facade call site always passes the same types -- a block, Python ints and
bools, int32 arrays it has validated -- so it resolves the compiled entry point on its first
call and then calls it directly, skipping the typing.  An entry point does not check types: use a ``FastCall`` only at call
sites whose argument types never change.
"""
from __future__ import annotations

from numba import typeof

from ..._jit import _widen


class FastCall:
    """``fc(*args)``: ``dispatcher(*args)`` through the entry point compiled for the first
    call's argument types."""

    __slots__ = ("disp", "entry")

    # ``entry`` is public: the hottest facade call sites call ``(fc.entry or fc)(...)``, which
    # skips this method's own frame once the entry point is known (a Python call and an
    # argument tuple fewer, about 0.1 us)

    def __init__(self, dispatcher):
        self.disp = dispatcher
        self.entry = None

    def __call__(self, *args):
        ep = self.entry
        if ep is not None:
            return ep(*args)
        out = self.disp(*args)                          # compiles or loads from the cache
        ov = self.disp.overloads.get(tuple(_widen(typeof(a)) for a in args))
        if ov is not None:
            self.entry = ov.entry_point
        return out
