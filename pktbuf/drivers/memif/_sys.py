"""System calls memif's kernels make: eventfd signalling and draining, poll on one fd.

Numba cannot call into the OS by itself.  These intrinsics declare the libc functions by name
(``write``, ``read``, ``poll``; ``sched_yield``, ``usleep`` and ``clock_gettime`` are in
:mod:`pktbuf.idle`) and call them; the symbols are
resolved when the compiled code is loaded, so the functions stay cacheable (``cache=True``),
unlike a ``ctypes`` function pointer, which would be baked into the code as an address.
Every wrapper returns what the libc call returns (``-1`` on error; errno is not inspected).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..._jit import kernel

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


def _cast(context, builder, val, ty, to):
    return context.cast(builder, val, ty, to)


@intrinsic
def _c_poll1(typingctx, fd, timeout_ms):
    """poll() on one fd for POLLIN; returns poll's result (1 = readable)."""
    if not all(isinstance(t, types.Integer) for t in (fd, timeout_ms)):
        return None

    def codegen(context, builder, sig, args):
        # struct pollfd { int fd; short events; short revents; }  == { i32, i32 } little-endian
        pfd = cgutils.alloca_once(builder, ir.IntType(32), size=2)
        builder.store(_cast(context, builder, args[0], sig.args[0], types.int32), pfd)
        builder.store(ir.Constant(_I32, 1), builder.gep(pfd, [ir.Constant(_I32, 1)]))  # POLLIN
        f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_I32, [_I8P, _I64, _I32]),
                                           "poll")
        r = builder.call(f, [builder.bitcast(pfd, _I8P), ir.Constant(_I64, 1),
                             _cast(context, builder, args[1], sig.args[1], types.int32)])
        return builder.sext(r, _I64)

    return types.int64(fd, timeout_ms), codegen


@intrinsic
def _eventfd_rw(typingctx, fd, value, is_write):
    """write(fd, &value, 8) or read(fd, &tmp, 8) through an 8-byte stack slot.

    Returns the value read (read: 0 if nothing was there) or write()'s result."""
    if not all(isinstance(t, types.Integer) for t in (fd, value)) or \
            not isinstance(is_write, types.BooleanLiteral):
        return None
    writing = is_write.literal_value

    def codegen(context, builder, sig, args):
        slot = cgutils.alloca_once(builder, _I64, size=1)
        builder.store(_cast(context, builder, args[1], sig.args[1], types.int64), slot)
        name = "write" if writing else "read"
        f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_I64, [_I32, _I8P, _I64]),
                                           name)
        r = builder.call(f, [_cast(context, builder, args[0], sig.args[0], types.int32),
                             builder.bitcast(slot, _I8P), ir.Constant(_I64, 8)])
        if writing:
            return r
        got = builder.icmp_signed("==", r, ir.Constant(_I64, 8))
        return builder.select(got, builder.load(slot), ir.Constant(_I64, 0))

    return types.int64(fd, value, is_write), codegen


@kernel(inline="always")
def eventfd_signal(fd):
    """Add 1 to an eventfd (wakes a receiver blocked on it).  Returns write()'s result."""
    return _eventfd_rw(fd, 1, True)


@kernel
def eventfd_drain(fd):
    """Read and reset an eventfd's counter without blocking (the fd must be O_NONBLOCK)."""
    return _eventfd_rw(fd, 0, False)


@kernel
def fd_wait(fd, timeout_ms):
    """Block until ``fd`` is readable or ``timeout_ms`` passes (-1 = forever); 1 if readable."""
    return _c_poll1(fd, timeout_ms)
