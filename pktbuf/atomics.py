"""CPU atomics for Numba, written as intrinsics over llvmlite.

Numba has no atomics of its own.  These intrinsics emit LLVM's ``cmpxchg``, ``atomicrmw``,
atomic ``load``/``store`` and ``fence`` on one element of a NumPy array, so they can be used on
arrays that live in ordinary memory (threads) or in a shared mapping (processes).  They compile
inside ``@njit(cache=True)`` code like any other call.

Why the acquire load matters: LLVM may hoist a plain array load out of a loop when nothing in the
loop writes that array, so ``while ary[i] != x: pass`` spins forever on a stale register.  An
atomic load cannot be hoisted; every read of an index written by another thread or process goes
through :func:`load_acquire` (or :func:`load_relaxed` where no ordering is needed, e.g. a
statistic).

Every function takes ``(ary, idx, ...)``: ``ary`` is an integer array of any dimension and
``idx`` an integer (1-d arrays) or a tuple of integers.  The ``field_*`` variants act on one
integer field of a structured (record) array: ``field_fetch_add(mbufs, h, "refcnt", -1)``.

Orderings follow C11: ``cas`` and the read-modify-write operations are ``acq_rel`` (sequentially
consistent on x86 anyway), loads are ``acquire`` or ``monotonic`` ("relaxed"), stores ``release``
or ``monotonic``.
"""
from __future__ import annotations

import platform

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

__all__ = [
    "cas", "exchange", "fetch_add", "fetch_sub", "fetch_or", "fetch_and",
    "load_acquire", "load_relaxed", "store_release", "store_relaxed",
    "field_cas", "field_fetch_add", "field_load_acquire", "field_store_release",
    "fence", "fence_acquire", "fence_release", "compiler_barrier", "cpu_pause", "tsc_read",
]

_RMW_ORDER = "acq_rel"


# ---------------------------------------------------------------------------------------------
# pointer helpers (code generation only)

def _check_array(ary, what):
    if not isinstance(ary, types.Array):
        raise TypingError(f"{what}: first argument must be a NumPy array, got {ary}")


def _check_int_array(ary, what):
    _check_array(ary, what)
    if not isinstance(ary.dtype, types.Integer):
        raise TypingError(f"{what}: array must have an integer dtype, got {ary.dtype}")


def _check_index(ary, idx, what):
    if isinstance(idx, types.Integer):
        n = 1
    elif isinstance(idx, types.BaseTuple) and all(isinstance(t, types.Integer) for t in idx):
        n = len(idx)
    else:
        raise TypingError(f"{what}: index must be an integer or a tuple of integers, got {idx}")
    if n != ary.ndim:
        raise TypingError(f"{what}: {ary.ndim}-d array indexed with {n} indices")


def _element_ptr(context, builder, aryty, aryval, idxty, idxval):
    """Pointer to ary[idx]; negative indices are not wrapped (callers pass valid indices).

    Bounds are checked where Numba checks its own indexing -- with ``NUMBA_BOUNDSCHECK=1`` (or
    ``boundscheck=True``) -- so an atomic out of range raises IndexError there too."""
    ary = context.make_array(aryty)(context, builder, aryval)
    if isinstance(idxty, types.BaseTuple):
        raw = cgutils.unpack_tuple(builder, idxval, len(idxty))
        inds = [context.cast(builder, v, t, types.intp) for v, t in zip(raw, idxty)]
    else:
        inds = [context.cast(builder, idxval, idxty, types.intp)]
    return cgutils.get_item_pointer(context, builder, aryty, ary, inds, wraparound=False,
                                    boundscheck=context.enable_boundscheck)


def _field_ptr(context, builder, aryty, aryval, idxty, idxval, field):
    """Pointer to ary[idx][field] for a record array, typed as the field's LLVM type."""
    rec_ptr = _element_ptr(context, builder, aryty, aryval, idxty, idxval)
    offset = aryty.dtype.offset(field)
    fty = aryty.dtype.typeof(field)
    i8p = builder.bitcast(rec_ptr, ir.IntType(8).as_pointer())
    fptr = builder.gep(i8p, [ir.Constant(ir.IntType(64), offset)])
    return builder.bitcast(fptr, context.get_value_type(fty).as_pointer()), fty


def _record_field(ary, idx, field, what):
    _check_array(ary, what)
    if not isinstance(ary.dtype, types.Record):
        raise TypingError(f"{what}: array must be a structured (record) array")
    _check_index(ary, idx, what)
    if not isinstance(field, types.StringLiteral):
        raise TypingError(f"{what}: field name must be a string literal")
    name = field.literal_value
    if name not in ary.dtype.fields:
        raise TypingError(f"{what}: record has no field {name!r}")
    fty = ary.dtype.typeof(name)
    if not isinstance(fty, types.Integer):
        raise TypingError(f"{what}: field {name!r} must be an integer, got {fty}")
    return name, fty


def _align(ty):
    return ty.bitwidth // 8


# ---------------------------------------------------------------------------------------------
# element atomics

@intrinsic
def cas(typingctx, ary, idx, expected, desired):
    """Compare-and-swap ``ary[idx]``: if it equals ``expected`` store ``desired``.

    Returns the value that was there before; the swap happened iff it equals ``expected``.
    """
    _check_int_array(ary, "cas")
    _check_index(ary, idx, "cas")
    dt = ary.dtype

    def codegen(context, builder, sig, args):
        ptr = _element_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        exp = context.cast(builder, args[2], sig.args[2], dt)
        des = context.cast(builder, args[3], sig.args[3], dt)
        res = builder.cmpxchg(ptr, exp, des, _RMW_ORDER, "acquire")
        return builder.extract_value(res, 0)

    return dt(ary, idx, expected, desired), codegen


def _make_rmw(op, name, doc):
    @intrinsic
    def rmw(typingctx, ary, idx, val):
        _check_int_array(ary, name)
        _check_index(ary, idx, name)
        dt = ary.dtype

        def codegen(context, builder, sig, args):
            ptr = _element_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            v = context.cast(builder, args[2], sig.args[2], dt)
            return builder.atomic_rmw(op, ptr, v, _RMW_ORDER)

        return dt(ary, idx, val), codegen

    rmw.__doc__ = doc
    rmw.__name__ = rmw.__qualname__ = name
    return rmw


fetch_add = _make_rmw("add", "fetch_add", "Atomically add ``val`` to ``ary[idx]``; return the old value.")
fetch_sub = _make_rmw("sub", "fetch_sub", "Atomically subtract ``val`` from ``ary[idx]``; return the old value.")
fetch_or = _make_rmw("or", "fetch_or", "Atomically OR ``val`` into ``ary[idx]``; return the old value.")
fetch_and = _make_rmw("and", "fetch_and", "Atomically AND ``val`` into ``ary[idx]``; return the old value.")
exchange = _make_rmw("xchg", "exchange", "Atomically store ``val`` in ``ary[idx]``; return the old value.")


def _make_load(order, name, doc):
    @intrinsic
    def load(typingctx, ary, idx):
        _check_int_array(ary, name)
        _check_index(ary, idx, name)
        dt = ary.dtype

        def codegen(context, builder, sig, args):
            ptr = _element_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            return builder.load_atomic(ptr, order, _align(dt))

        return dt(ary, idx), codegen

    load.__doc__ = doc
    load.__name__ = load.__qualname__ = name
    return load


load_acquire = _make_load("acquire", "load_acquire",
                          "Load ``ary[idx]`` with acquire ordering; never hoisted out of a loop.")
load_relaxed = _make_load("monotonic", "load_relaxed",
                          "Atomic load of ``ary[idx]`` without ordering; never hoisted out of a loop.")


def _make_store(order, name, doc):
    @intrinsic
    def store(typingctx, ary, idx, val):
        _check_int_array(ary, name)
        _check_index(ary, idx, name)
        dt = ary.dtype

        def codegen(context, builder, sig, args):
            ptr = _element_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            v = context.cast(builder, args[2], sig.args[2], dt)
            builder.store_atomic(v, ptr, order, _align(dt))
            return context.get_dummy_value()

        return types.none(ary, idx, val), codegen

    store.__doc__ = doc
    store.__name__ = store.__qualname__ = name
    return store


store_release = _make_store("release", "store_release",
                            "Store ``val`` in ``ary[idx]`` with release ordering.")
store_relaxed = _make_store("monotonic", "store_relaxed",
                            "Atomic store of ``val`` in ``ary[idx]`` without ordering.")


# ---------------------------------------------------------------------------------------------
# record-field atomics (e.g. the mbuf refcnt)

@intrinsic
def field_cas(typingctx, ary, idx, field, expected, desired):
    """Compare-and-swap ``ary[idx][field]``; returns the previous value."""
    name, fty = _record_field(ary, idx, field, "field_cas")

    def codegen(context, builder, sig, args):
        ptr, _ = _field_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1], name)
        exp = context.cast(builder, args[3], sig.args[3], fty)
        des = context.cast(builder, args[4], sig.args[4], fty)
        res = builder.cmpxchg(ptr, exp, des, _RMW_ORDER, "acquire")
        return builder.extract_value(res, 0)

    return fty(ary, idx, field, expected, desired), codegen


@intrinsic
def field_fetch_add(typingctx, ary, idx, field, val):
    """Atomically add ``val`` (may be negative) to ``ary[idx][field]``; returns the old value."""
    name, fty = _record_field(ary, idx, field, "field_fetch_add")

    def codegen(context, builder, sig, args):
        ptr, _ = _field_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1], name)
        v = context.cast(builder, args[3], sig.args[3], fty)
        return builder.atomic_rmw("add", ptr, v, _RMW_ORDER)

    return fty(ary, idx, field, val), codegen


@intrinsic
def field_load_acquire(typingctx, ary, idx, field):
    """Load ``ary[idx][field]`` with acquire ordering."""
    name, fty = _record_field(ary, idx, field, "field_load_acquire")

    def codegen(context, builder, sig, args):
        ptr, _ = _field_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1], name)
        return builder.load_atomic(ptr, "acquire", _align(fty))

    return fty(ary, idx, field), codegen


@intrinsic
def field_store_release(typingctx, ary, idx, field, val):
    """Store ``val`` in ``ary[idx][field]`` with release ordering."""
    name, fty = _record_field(ary, idx, field, "field_store_release")

    def codegen(context, builder, sig, args):
        ptr, _ = _field_ptr(context, builder, sig.args[0], args[0], sig.args[1], args[1], name)
        v = context.cast(builder, args[3], sig.args[3], fty)
        builder.store_atomic(v, ptr, "release", _align(fty))
        return context.get_dummy_value()

    return types.none(ary, idx, field, val), codegen


# ---------------------------------------------------------------------------------------------
# fences and the spin-wait hint

def _make_fence(order, scope, name, doc):
    @intrinsic
    def fn(typingctx):
        def codegen(context, builder, sig, args):
            builder.fence(order, scope)
            return context.get_dummy_value()

        return types.none(), codegen

    fn.__doc__ = doc
    fn.__name__ = fn.__qualname__ = name
    return fn


fence = _make_fence("seq_cst", None, "fence", "Full (sequentially consistent) memory fence.")
fence_acquire = _make_fence("acquire", None, "fence_acquire", "Acquire fence.")
fence_release = _make_fence("release", None, "fence_release", "Release fence.")
compiler_barrier = _make_fence("seq_cst", "singlethread", "compiler_barrier",
                               "Stops the compiler from moving memory accesses across it; emits no instruction.")

_MACHINE = platform.machine().lower()
_IS_X86 = _MACHINE in ("x86_64", "amd64", "i386", "i686")
_IS_ARM64 = _MACHINE in ("aarch64", "arm64")


@intrinsic
def cpu_pause(typingctx):
    """Spin-wait hint (x86 ``pause``, arm64 ``yield``) followed by a compiler barrier.

    Emitted through LLVM's target intrinsics rather than inline assembly: Numba's LLVM has no
    assembly parser initialised, and inline asm would abort the compiler.
    """
    def codegen(context, builder, sig, args):
        mod = builder.module
        if _IS_X86:
            fn = cgutils.get_or_insert_function(mod, ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse2.pause")
            builder.call(fn, [])
        elif _IS_ARM64:  # pragma: no cover - not this machine
            fn = cgutils.get_or_insert_function(mod, ir.FunctionType(ir.VoidType(), [ir.IntType(32)]),
                                                "llvm.aarch64.hint")
            builder.call(fn, [ir.Constant(ir.IntType(32), 1)])
        builder.fence("seq_cst", "singlethread")
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def tsc_read(typingctx):
    """The time-stamp counter (x86 ``rdtsc``, unfenced: cheap enough to bracket a lock
    acquisition; 0 on other machines), as int64 cycles.  For instrumentation that must live
    below the benchmark layer (the fenced reads for timing loops are in
    :mod:`pktbuf.bench.tsc`)."""
    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        if _IS_X86:
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, []),
                                                "llvm.x86.rdtsc")
            return builder.call(fn, [])
        return ir.Constant(i64, 0)  # pragma: no cover - not this machine

    return types.int64(), codegen
