"""This process's call table: the addresses of out-of-line kernels that compiled code calls
through a slot instead of by name.

Why: a kernel called by name is linked into its caller's compiled code -- and, with it,
optimised and turned into machine code again in every kernel that calls the caller, up to the
loops at the top (a port's burst, the forwarder's loop, a stage).  For the rare paths of a hot
kernel (``pktmbuf_free_bulk``'s chained packets, its pools taking turns, its debug-mode dry
run) that repeated work was most of the cold compile time of the commands, for code that the
commands' packets mostly never run.  Called through a slot, such a path is compiled once, in
its own cache entry, and its callers carry one indirect call.

How: the table is ``NSLOTS`` 64-bit words of this process's memory, made known to LLVM's JIT
linker under the symbol :data:`SYMBOL` (llvmlite's ``add_symbol``, as Numba does for its own
C helpers).  Compiled code names the symbol, not an address, so machine code loaded from the
cache finds the table of the process that loads it.  A slot holds the address of a kernel's C
wrapper (``@kernel(cfunc=True)``), written by Python (:func:`install`) before any kernel that
calls through it runs -- for the free paths, whenever this process creates or attaches a
domain; a kernel that finds its slot empty returns ``E_NOSYS`` and does nothing.

The slots are numbered here, once for every process and every cached kernel: a number is
part of the compiled code that uses it.
"""
from __future__ import annotations

import ctypes

from llvmlite import binding as ll
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .block import BlockType

__all__ = ["SYMBOL", "NSLOTS", "install", "installed", "slot_address", "call_address3",
           "call_address5", "FREE_ALTERNATING", "FREE_CHECK", "FREE_PREFREE", "FREE_CHAINS"]

SYMBOL = "pktbuf_calltable_v1"
NSLOTS = 16

# the slots (pktbuf.buf.mbuf.free fills them: FREE_CHAINS last, so a kernel that finds it
# filled finds the others filled too)
FREE_ALTERNATING = 0        # _free_alternating: runs of one, two pools taking turns
FREE_CHECK = 1              # _debug_free_check: the debug-mode dry run of a free
FREE_PREFREE = 2            # pktmbuf_prefree_seg: a shared or indirect mbuf in a bulk free
FREE_CHAINS = 3             # _free_chains: DPDK's staged walk from the first chained packet

_TABLE = (ctypes.c_uint64 * NSLOTS)()
ll.add_symbol(SYMBOL, ctypes.addressof(_TABLE))


def install(slot: int, address: int) -> None:
    """Point ``slot`` at the C wrapper at ``address`` (this process's)."""
    if not 0 <= slot < NSLOTS:
        raise IndexError(f"call table slot {slot} outside [0, {NSLOTS})")
    _TABLE[slot] = int(address)


def installed(slot: int) -> int:
    """The address in ``slot`` (0: none)."""
    return int(_TABLE[slot])


@intrinsic
def slot_address(typingctx, slot):
    """In compiled code: the address in ``slot`` of this process's call table (0: none)."""
    if not isinstance(slot, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        mod = builder.module
        gv = mod.globals.get(SYMBOL)
        if gv is None:
            gv = ir.GlobalVariable(mod, ir.ArrayType(i64, NSLOTS), SYMBOL)
            gv.linkage = "external"
        idx = context.cast(builder, args[0], sig.args[0], types.int64)
        return builder.load(builder.gep(gv, [ir.Constant(i64, 0), idx]))

    return types.int64(slot), codegen


def _c_arg(context, builder, t, v):
    """An argument as the C wrapper takes it: a block as its pointer, an integer as an int64,
    a contiguous 1-D array as the address of its data."""
    i64 = ir.IntType(64)
    if isinstance(t, BlockType):
        return v
    if isinstance(t, types.Integer):
        return context.cast(builder, v, t, types.int64)
    data = cgutils.create_struct_proxy(t)(context, builder, value=v).data
    return builder.ptrtoint(data, i64)


def _ok_arg(t) -> bool:
    return (isinstance(t, (BlockType, types.Integer))
            or (isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C"))


def _call(context, builder, sig, args):
    vals = [_c_arg(context, builder, t, v) for t, v in zip(sig.args[1:], args[1:])]
    fnty = ir.FunctionType(ir.IntType(64), [v.type for v in vals])
    fn = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64),
                          fnty.as_pointer())
    return builder.call(fn, vals)


@intrinsic
def call_address3(typingctx, address, a, b, c):
    """In compiled code: the int64 kernel whose C wrapper is at ``address``, called with
    ``(a, b, c)`` -- blocks, integers (as int64) and contiguous 1-D arrays (as the address of
    their data, which is what the kernel takes in their place)."""
    if not (isinstance(address, types.Integer) and all(map(_ok_arg, (a, b, c)))):
        return None
    return types.int64(address, a, b, c), _call


@intrinsic
def call_address5(typingctx, address, a, b, c, d, e):
    """:func:`call_address3` with five arguments."""
    if not (isinstance(address, types.Integer) and all(map(_ok_arg, (a, b, c, d, e)))):
        return None
    return types.int64(address, a, b, c, d, e), _call
