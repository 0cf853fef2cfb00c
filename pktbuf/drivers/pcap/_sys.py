"""The system calls the pcap kernels make: ``write``, ``mmap``/``munmap``, ``errno``, the
wall clock.

Declared by symbol name in the LLVM module (resolved when the compiled code is loaded), so the
kernels that call them stay cacheable -- a ``ctypes`` function pointer would be baked into the
code as an address.  Each wrapper returns what libc returns; :func:`sys_errno` reads the
calling thread's ``errno`` (through glibc's ``__errno_location``) right after a failed call.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

PROT_READ = 1
MAP_PRIVATE = 2
MAP_POPULATE = 0x8000


def _i64(context, builder, val, ty):
    return context.cast(builder, val, ty, types.int64)


@intrinsic
def sys_write(typingctx, fd, addr, n):
    """``write(fd, (void *)addr, n)``: bytes written or -1."""
    if not all(isinstance(t, types.Integer) for t in (fd, addr, n)):
        return None

    def codegen(context, builder, sig, args):
        f = cgutils.get_or_insert_function(builder.module,
                                           ir.FunctionType(_I64, [_I32, _I8P, _I64]), "write")
        fd32 = builder.trunc(_i64(context, builder, args[0], sig.args[0]), _I32)
        p = builder.inttoptr(_i64(context, builder, args[1], sig.args[1]), _I8P)
        return builder.call(f, [fd32, p, _i64(context, builder, args[2], sig.args[2])])

    return types.int64(fd, addr, n), codegen


@intrinsic
def sys_mmap_ro(typingctx, length, fd, offset):
    """``mmap(NULL, length, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, offset)`` as an
    address; -1 (``MAP_FAILED``) on failure."""
    if not all(isinstance(t, types.Integer) for t in (length, fd, offset)):
        return None

    def codegen(context, builder, sig, args):
        f = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_I8P, [_I8P, _I64, _I32, _I32, _I32, _I64]), "mmap")
        r = builder.call(f, [ir.Constant(_I8P, None), _i64(context, builder, args[0], sig.args[0]),
                             ir.Constant(_I32, PROT_READ),
                             ir.Constant(_I32, MAP_PRIVATE | MAP_POPULATE),
                             builder.trunc(_i64(context, builder, args[1], sig.args[1]), _I32),
                             _i64(context, builder, args[2], sig.args[2])])
        return builder.ptrtoint(r, _I64)

    return types.int64(length, fd, offset), codegen


@intrinsic
def sys_munmap(typingctx, addr, length):
    """``munmap((void *)addr, length)``: 0 or -1."""
    if not all(isinstance(t, types.Integer) for t in (addr, length)):
        return None

    def codegen(context, builder, sig, args):
        f = cgutils.get_or_insert_function(builder.module,
                                           ir.FunctionType(_I32, [_I8P, _I64]), "munmap")
        r = builder.call(f, [builder.inttoptr(_i64(context, builder, args[0], sig.args[0]), _I8P),
                             _i64(context, builder, args[1], sig.args[1])])
        return builder.sext(r, _I64)

    return types.int64(addr, length), codegen


@intrinsic
def sys_errno(typingctx):
    """The calling thread's ``errno``."""
    def codegen(context, builder, sig, args):
        f = cgutils.get_or_insert_function(builder.module,
                                           ir.FunctionType(_I32.as_pointer(), []),
                                           "__errno_location")
        return builder.sext(builder.load(builder.call(f, [])), _I64)

    return types.int64(), codegen


@intrinsic
def realtime_ns(typingctx):
    """``CLOCK_REALTIME`` in nanoseconds since the epoch (Python's ``time.time_ns()``)."""
    def codegen(context, builder, sig, args):
        ts = cgutils.alloca_once(builder, _I64, size=2)       # struct timespec
        f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_I32, [_I32, _I8P]),
                                           "clock_gettime")
        builder.call(f, [ir.Constant(_I32, 0), builder.bitcast(ts, _I8P)])   # CLOCK_REALTIME
        sec = builder.load(ts)
        nsec = builder.load(builder.gep(ts, [ir.Constant(_I32, 1)]))
        return builder.add(builder.mul(sec, ir.Constant(_I64, 1_000_000_000)), nsec)

    return types.int64(), codegen
