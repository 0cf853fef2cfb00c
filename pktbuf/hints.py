"""Code-generation hints for kernels, written as intrinsics over llvmlite.

:func:`select_likely` is ``a if cond else b`` for a condition that is nearly always true, as C's
``__builtin_expect``: the select carries branch weights, so LLVM's code generation makes it a
branch (predicted taken) rather than a conditional move.

Why it matters: when ``cond`` depends on a load that misses the cache (an LPM table entry, say),
a conditional move makes the store of its result wait for the load, and every instruction it
adds waits with it in the scheduler.  In a loop of independent lookups, the number of those
waiting instructions is what bounds how many lookups are in flight at once.  A predicted
branch lets the result be computed as soon as the load arrives without holding its condition
in the scheduler.  A mispredicted one costs a flush, so the hint is only for conditions that
are true nearly always in real use (an LPM hit: a router has a default route).

The weights survive LLVM's folding of a later select on the same condition only when the
caller keeps the value as it is (``out[i] = select_likely(...)``); a caller that converts it
again (``r if r >= 0 else K``) gets a new select without them.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["select_likely"]

_WEIGHTS = (2000, 1)      # as clang's __builtin_expect: 2000 to 1


@intrinsic
def select_likely(typingctx, cond, a, b):
    """``a if cond else b`` (``a`` and ``b`` integers, unified to the wider type), ``cond``
    nearly always true."""
    if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
        return None
    if not isinstance(cond, (types.Boolean, types.Integer)):
        return None
    ret = typingctx.unify_pairs(a, b)
    if not isinstance(ret, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        c, x, y = args
        c = context.cast(builder, c, sig.args[0], types.boolean)
        x = context.cast(builder, x, sig.args[1], sig.return_type)
        y = context.cast(builder, y, sig.args[2], sig.return_type)
        sel = builder.select(c, x, y)
        mod = builder.module
        i32 = ir.IntType(32)
        md = mod.add_metadata([ir.MetaDataString(mod, "branch_weights"),
                               ir.Constant(i32, _WEIGHTS[0]), ir.Constant(i32, _WEIGHTS[1])])
        sel.set_metadata("prof", md)
        return sel

    return ret(cond, a, b), codegen
