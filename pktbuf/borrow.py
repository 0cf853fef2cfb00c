"""Borrowed array views: keep Numba's reference counting off the hot path.

Every NumPy array inside compiled code carries a pointer to its reference-counted *meminfo*.
Numba increments that count when a function starts using an array argument and decrements it
when done; it removes the pair again only when the function's control flow is simple.  A kernel
with an early ``return`` and a call to another kernel keeps them: two atomic read-modify-writes
per array per call (measured here: a two-array kernel called in a loop costs ~35 ns instead of
~1 ns; a 1-object ring enqueue + dequeue ~140 ns of which about two thirds is this).  With
several threads on one structure it is worse: every call of every thread writes the same
meminfo cache lines, which then bounce between the cores as a lock word would.

:func:`borrow` returns the same array (same data, shape, strides) with a NULL meminfo, so no
reference counting is done on it at all.  A kernel that rebinds its arguments to borrowed views
on its first line::

    @kernel
    def heap_free(heap, ptr):
        heap = borrow(heap)
        ...

does no reference counting for them, nor does any kernel it passes them to.  This is safe
because the caller holds its own reference to every array for the whole call; a borrowed view
must never outlive the call (never return it or store it).

``borrow`` takes an array or a tuple / namedtuple of arrays (other members pass through).
"""
from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["borrow"]


def _borrow_array(context, builder, aryty, val):
    ary = context.make_array(aryty)(context, builder, val)
    out = context.make_array(aryty)(context, builder)
    for f in ("nitems", "itemsize", "data", "shape", "strides"):
        setattr(out, f, getattr(ary, f))
    out.meminfo = cgutils.get_null_value(out.meminfo.type)
    out.parent = cgutils.get_null_value(out.parent.type)
    return out._getvalue()


@intrinsic
def borrow(typingctx, obj):
    """``obj`` (an array, or a tuple/namedtuple of arrays) without reference counting."""
    if isinstance(obj, types.Array):
        def codegen(context, builder, sig, args):
            return _borrow_array(context, builder, sig.args[0], args[0])

        return obj(obj), codegen
    if isinstance(obj, types.BaseTuple):
        def codegen(context, builder, sig, args):
            tupty = sig.args[0]
            out = args[0]
            for i, ty in enumerate(tupty):
                if isinstance(ty, types.Array):
                    v = builder.extract_value(args[0], i)
                    out = builder.insert_value(out, _borrow_array(context, builder, ty, v), i)
                # anything else is copied by value with the tuple
            return out

        return obj(obj), codegen
    return None
