"""The system calls the vhost and virtio-user kernels make on eventfds: signalling one (the
call, the kick) and reading one after ``poll()`` said it is readable (interrupt mode).

As in :mod:`pktbuf.syscalls`, libc's ``write`` is declared by name in the generated code, so
the symbol is resolved when the code is loaded and the kernels stay cacheable.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..._jit import kernel
from ...syscalls import POLLIN, fd_poll

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


@intrinsic
def _write_u64(typingctx, fd, value):
    """write(fd, &value, 8); returns write()'s result."""
    if not all(isinstance(t, types.Integer) for t in (fd, value)):
        return None

    def codegen(context, builder, sig, args):
        slot = cgutils.alloca_once(builder, _I64, size=1)
        builder.store(context.cast(builder, args[1], sig.args[1], types.int64), slot)
        f = cgutils.get_or_insert_function(builder.module,
                                           ir.FunctionType(_I64, [_I32, _I8P, _I64]), "write")
        fd32 = context.cast(builder, args[0], sig.args[0], types.int32)
        return builder.call(f, [fd32, builder.bitcast(slot, _I8P), ir.Constant(_I64, 8)])

    return types.int64(fd, value), codegen


@intrinsic
def _read_u64(typingctx, fd):
    """read(fd, &slot, 8); returns read()'s result."""
    if not isinstance(fd, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        slot = cgutils.alloca_once(builder, _I64, size=1)
        f = cgutils.get_or_insert_function(builder.module,
                                           ir.FunctionType(_I64, [_I32, _I8P, _I64]), "read")
        fd32 = context.cast(builder, args[0], sig.args[0], types.int32)
        return builder.call(f, [fd32, builder.bitcast(slot, _I8P), ir.Constant(_I64, 8)])

    return types.int64(fd), codegen


@kernel(inline="always")
def eventfd_signal(fd):
    """Add 1 to an eventfd; returns write()'s result (8, or -1)."""
    return _write_u64(fd, 1)


@kernel
def eventfd_drain(fd):
    """Reset an eventfd's counter if it is set, never blocking: ``poll()`` with a zero timeout
    first, ``read()`` only when that says readable (a peer's fd may be in blocking mode).
    Returns 1 if something was read."""
    if fd_poll(fd, POLLIN, 0) > 0:
        _read_u64(fd)
        return 1
    return 0
