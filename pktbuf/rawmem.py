"""Raw memory: lazily committed arrays and pointer intrinsics.

* **Lazy arrays** (:func:`lazy_zeros`): an anonymous ``MAP_PRIVATE | MAP_NORESERVE`` mapping
  wrapped as a NumPy array.  Pages are committed on first touch, so a table sized for millions
  of entries costs nothing until it is used, and the array never has to be reallocated.
  (Shared memory -- memfd regions, address windows -- is :mod:`pktbuf.shm`.)
* **Intrinsics**: kernels address mbuf data through the virtual address stored in the
  descriptor (``buf_addr``, as in DPDK).  :func:`addr_u8` turns such an address into a NumPy
  view; :func:`memcpy`, :func:`memmove`, :func:`memset` trust their caller;
  :func:`copy_in_bounds`, :func:`move_in_bounds` and :func:`fill_in_bounds` also take the
  buffers the bytes must stay in, and assert it in the checked build (``PKTBUF_CHECKED=1``).
"""
from __future__ import annotations

import mmap

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from ._jit import CHECKED


__all__ = ["lazy_zeros", "array_address", "addr_u8", "addr_view", "memcpy", "memmove", "memset",
           "copy_in_bounds", "move_in_bounds", "fill_in_bounds",
           "load_u8", "store_u8", "stack_i32"]

PAGE = mmap.PAGESIZE


def lazy_zeros(shape, dtype) -> np.ndarray:
    """A zero-filled array whose pages are committed only when first written.

    The mapping lives as long as the returned array (NumPy keeps the mmap object alive through
    the array's base).
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = max(PAGE, (n + PAGE - 1) // PAGE * PAGE)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
    m = mmap.mmap(-1, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    arr = np.frombuffer(m, dtype=np.uint8, count=n).view(dtype).reshape(shape)
    return arr


def array_address(a: np.ndarray) -> int:
    """Virtual address of an array's first element (Python side)."""
    return a.ctypes.data


# ---------------------------------------------------------------------------------------------
# pointer intrinsics (kernel side)

def _array_from_pointer(context, builder, aryty, ptr, n):
    """An array struct over raw memory, with no meminfo (no reference counting)."""
    ary = context.make_array(aryty)(context, builder)
    itemsize = context.get_abi_sizeof(context.get_data_type(aryty.dtype))
    intp = context.get_value_type(types.intp)
    populate_array(ary, data=ptr, shape=cgutils.pack_array(builder, [n]),
                   strides=cgutils.pack_array(builder, [ir.Constant(intp, itemsize)]),
                   itemsize=ir.Constant(intp, itemsize), meminfo=None)
    return ary._getvalue()


@intrinsic
def addr_u8(typingctx, addr, n):
    """A ``uint8`` array view of ``n`` bytes at virtual address ``addr``.

    The view holds no reference to anything: it is valid while the memory stays mapped.
    Built inline (an intrinsic, not a function returning an array), so it works in kernels
    compiled without Numba's runtime.
    """
    if not (isinstance(addr, types.Integer) and isinstance(n, types.Integer)):
        return None
    aryty = types.Array(types.uint8, 1, "C")

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], context.get_data_type(types.uint8).as_pointer())
        cnt = context.cast(builder, args[1], sig.args[1], types.intp)
        return _array_from_pointer(context, builder, aryty, ptr, cnt)

    return aryty(addr, n), codegen


@intrinsic
def addr_view(typingctx, addr, n, dtype):
    """An array view of ``n`` elements of ``dtype`` (``np.uint32``, ...) at ``addr``: what
    ``addr_u8(addr, n * size).view(dtype)`` gives, built directly, so that no ``view`` overload
    is compiled for each pair of types (compile time)."""
    if not (isinstance(addr, types.Integer) and isinstance(n, types.Integer)
            and isinstance(dtype, types.NumberClass)):
        return None
    aryty = types.Array(dtype.instance_type, 1, "C")

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], context.get_data_type(aryty.dtype).as_pointer())
        cnt = context.cast(builder, args[1], sig.args[1], types.intp)
        return _array_from_pointer(context, builder, aryty, ptr, cnt)

    return aryty(addr, n, dtype), codegen


def _raw_mem_intrinsic(kind):
    @intrinsic
    def fn(typingctx, dst, src_or_val, n):
        if not all(isinstance(t, types.Integer) for t in (dst, src_or_val, n)):
            return None

        def codegen(context, builder, sig, args):
            i8p = ir.IntType(8).as_pointer()
            d = builder.inttoptr(args[0], i8p)
            cnt = context.cast(builder, args[2], sig.args[2], types.int64)
            if kind == "memset":
                v = context.cast(builder, args[1], sig.args[1], types.uint8)
                cgutils.memset(builder, d, cnt, v)
            else:
                s = builder.inttoptr(args[1], i8p)
                name = "llvm.memcpy" if kind == "memcpy" else "llvm.memmove"
                fnty = ir.FunctionType(ir.VoidType(), [i8p, i8p, ir.IntType(64), ir.IntType(1)])
                f = cgutils.get_or_insert_function(builder.module, fnty, f"{name}.p0i8.p0i8.i64")
                builder.call(f, [d, s, cnt, ir.Constant(ir.IntType(1), 0)])
            return context.get_dummy_value()

        return types.none(dst, src_or_val, n), codegen

    fn.__name__ = fn.__qualname__ = kind
    return fn


memcpy = _raw_mem_intrinsic("memcpy")
memcpy.__doc__ = "Copy ``n`` bytes from address ``src`` to address ``dst`` (no overlap)."
memmove = _raw_mem_intrinsic("memmove")
memmove.__doc__ = "Copy ``n`` bytes from ``src`` to ``dst``; the ranges may overlap."
memset = _raw_mem_intrinsic("memset")
memset.__doc__ = "Fill ``n`` bytes at ``dst`` with the byte ``val``."


# ---------------------------------------------------------------------------------------------
# copies that know their buffers: checked in the checked build, plain memcpy/memset otherwise

def _fail_check(context, builder, what, n, lo, hi, addr):
    """Print what went wrong on stderr and abort the process (checked build only)."""
    i32, i64 = ir.IntType(32), ir.IntType(64)
    i8p = ir.IntType(8).as_pointer()
    dprintf = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(i32, [i32, i8p], var_arg=True), "dprintf")
    fmt = context.insert_const_string(
        builder.module, f"pktbuf checked build: {what} of %ld bytes at %#lx is outside its "
                        f"buffer [%#lx, %#lx)\n")
    builder.call(dprintf, [ir.Constant(i32, 2), fmt, n, addr, lo, hi])
    abort = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                           "abort")
    builder.call(abort, [])


def _emit_bounds(context, builder, what, addr, n, base, size):
    """``if not (n >= 0 and base <= addr and addr + n <= base + size): abort``."""
    zero = ir.Constant(ir.IntType(64), 0)
    end = builder.add(addr, n)
    hi = builder.add(base, size)
    bad = builder.or_(builder.icmp_signed("<", n, zero),
                      builder.or_(builder.icmp_unsigned("<", addr, base),
                                  builder.icmp_unsigned(">", end, hi)))
    with builder.if_then(bad, likely=False):
        _fail_check(context, builder, what, n, base, hi, addr)


def _i64_args(context, builder, sig, args):
    return [context.cast(builder, a, t, types.int64) for a, t in zip(args, sig.args)]


def _bounded_copy(kind):
    @intrinsic
    def fn(typingctx, dst, dst_base, dst_size, src, src_base, src_size, n):
        if not all(isinstance(t, types.Integer)
                   for t in (dst, dst_base, dst_size, src, src_base, src_size, n)):
            return None

        def codegen(context, builder, sig, args):
            d, db, ds, s, sb, ss, cnt = _i64_args(context, builder, sig, args)
            if CHECKED:
                _emit_bounds(context, builder, "write", d, cnt, db, ds)
                _emit_bounds(context, builder, "read", s, cnt, sb, ss)
            i8p = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i8p, ir.IntType(64), ir.IntType(1)])
            f = cgutils.get_or_insert_function(builder.module, fnty,
                                               f"llvm.{kind}.p0i8.p0i8.i64")
            builder.call(f, [builder.inttoptr(d, i8p), builder.inttoptr(s, i8p), cnt,
                             ir.Constant(ir.IntType(1), 0)])
            return context.get_dummy_value()

        return types.none(dst, dst_base, dst_size, src, src_base, src_size, n), codegen

    return fn


copy_in_bounds = _bounded_copy("memcpy")
copy_in_bounds.__doc__ = """``memcpy(dst, src, n)`` where ``[dst, dst + n)`` must lie in the buffer
``[dst_base, dst_base + dst_size)`` and ``[src, src + n)`` in ``[src_base, ...)``.

In the checked build (``PKTBUF_CHECKED=1``) a copy that would leave either buffer -- or a
negative ``n`` -- prints the addresses and aborts the process; in release builds this is
exactly ``memcpy`` (the buffer arguments are not even evaluated into code)."""
move_in_bounds = _bounded_copy("memmove")
move_in_bounds.__doc__ = """:func:`copy_in_bounds` for ranges that may overlap (``memmove``)."""


@intrinsic
def fill_in_bounds(typingctx, dst, dst_base, dst_size, val, n):
    """``memset(dst, val, n)`` where ``[dst, dst + n)`` must lie in ``[dst_base, dst_base +
    dst_size)``; checked like :func:`copy_in_bounds`."""
    if not all(isinstance(t, types.Integer) for t in (dst, dst_base, dst_size, val, n)):
        return None

    def codegen(context, builder, sig, args):
        d, db, ds, v, cnt = _i64_args(context, builder, sig, args)
        if CHECKED:
            _emit_bounds(context, builder, "write", d, cnt, db, ds)
        cgutils.memset(builder, builder.inttoptr(d, ir.IntType(8).as_pointer()), cnt,
                       builder.trunc(v, ir.IntType(8)))
        return context.get_dummy_value()

    return types.none(dst, dst_base, dst_size, val, n), codegen


@intrinsic
def load_u8(typingctx, addr):
    """Read the byte at ``addr``."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        p = builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        return builder.load(p)

    return types.uint8(addr), codegen


@intrinsic
def store_u8(typingctx, addr, val):
    """Write the byte ``val`` at ``addr``."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        p = builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        v = context.cast(builder, args[1], sig.args[1], types.uint8)
        builder.store(v, p)
        return context.get_dummy_value()

    return types.none(addr, val), codegen


@intrinsic
def stack_i32(typingctx, n):
    """An int32 array of ``n`` (a literal) elements on the calling kernel's stack.

    It must not outlive the kernel that creates it.  Saves the heap allocation ``np.empty``
    would cost on a hot path (and works without Numba's runtime), like the on-stack
    ``pending[]`` array in DPDK's ``rte_pktmbuf_free_bulk``.  Not initialised.
    """
    if not isinstance(n, types.IntegerLiteral):
        return None
    count = n.literal_value
    aryty = types.Array(types.int32, 1, "C")

    def codegen(context, builder, sig, args):
        ptr = cgutils.alloca_once(builder, ir.IntType(32), size=count)
        intp = context.get_value_type(types.intp)
        return _array_from_pointer(context, builder, aryty, ptr, ir.Constant(intp, count))

    return aryty(n), codegen
