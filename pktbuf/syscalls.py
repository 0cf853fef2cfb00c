"""The socket system calls the kernel-bypass port kernels make (AF_PACKET, AF_XDP): ``poll`` on
one fd, the Tx ring's kick, the Rx wake-up and the pending socket error.

Numba cannot call into the OS by itself.  As in :mod:`pktbuf.drivers.memif._sys`, these intrinsics
declare the libc functions by name (``poll``, ``sendto``, ``getsockopt``,
``__errno_location``), so the symbols
are resolved when the compiled code is loaded and the kernels stay cacheable; a ``ctypes``
pointer would be baked into the code as an address.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._jit import kernel

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

MSG_DONTWAIT = 0x40
POLLIN = 0x1
POLLOUT = 0x4
POLLERR = 0x8


def _errno(builder):
    f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_I32.as_pointer(), []),
                                       "__errno_location")
    return builder.sext(builder.load(builder.call(f, [])), _I64)


def _or_errno(builder, r, ok):
    """``-errno`` when the call's result ``r`` (i64) is negative, else the value ``ok()``
    builds."""
    neg = builder.icmp_signed("<", r, ir.Constant(_I64, 0))
    with builder.if_else(neg) as (then, other):
        with then:
            bb_neg = builder.block
            err = builder.neg(_errno(builder))
        with other:
            val = ok()
            bb_ok = builder.block
    phi = builder.phi(_I64)
    phi.add_incoming(err, bb_neg)
    phi.add_incoming(val, bb_ok)
    return phi


@intrinsic
def _c_poll(typingctx, fd, events, timeout_ms):
    """poll() on one fd; returns ``revents`` (> 0), 0 on timeout, ``-errno`` on error."""
    if not all(isinstance(t, types.Integer) for t in (fd, events, timeout_ms)):
        return None

    def codegen(context, builder, sig, args):
        # struct pollfd { int fd; short events; short revents; }: two i32 words, little-endian
        pfd = cgutils.alloca_once(builder, _I32, size=2)
        builder.store(context.cast(builder, args[0], sig.args[0], types.int32), pfd)
        ev = builder.and_(context.cast(builder, args[1], sig.args[1], types.int32),
                          ir.Constant(_I32, 0xFFFF))
        builder.store(ev, builder.gep(pfd, [ir.Constant(_I32, 1)]))
        f = cgutils.get_or_insert_function(builder.module,
                                           ir.FunctionType(_I32, [_I8P, _I64, _I32]), "poll")
        r = builder.sext(builder.call(f, [builder.bitcast(pfd, _I8P), ir.Constant(_I64, 1),
                                          context.cast(builder, args[2], sig.args[2],
                                                       types.int32)]), _I64)
        rev = builder.lshr(builder.zext(builder.load(builder.gep(pfd, [ir.Constant(_I32, 1)])),
                                        _I64), ir.Constant(_I64, 16))
        zero = builder.icmp_signed("==", r, ir.Constant(_I64, 0))
        return _or_errno(builder, r, lambda: builder.select(zero, ir.Constant(_I64, 0), rev))

    return types.int64(fd, events, timeout_ms), codegen


def _null_io(fn):
    """An intrinsic calling ``fn(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`` (``sendto`` or
    ``recvfrom``): its result, or ``-errno``."""

    @intrinsic
    def io(typingctx, fd):
        if not isinstance(fd, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            f = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(_I64, [_I32, _I8P, _I64, _I32, _I8P, _I8P]), fn)
            null = ir.Constant(_I8P, None)
            r = builder.call(f, [context.cast(builder, args[0], sig.args[0], types.int32), null,
                                 ir.Constant(_I64, 0), ir.Constant(_I32, MSG_DONTWAIT), null,
                                 null])
            return _or_errno(builder, r, lambda: r)

        return types.int64(fd), codegen

    return io


_c_kick = _null_io("sendto")
_c_recv_kick = _null_io("recvfrom")


@intrinsic
def _c_sock_error(typingctx, fd):
    """``getsockopt(fd, SOL_SOCKET, SO_ERROR)``: the pending socket error (cleared by the
    read), 0 if none."""
    if not isinstance(fd, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        val = cgutils.alloca_once_value(builder, ir.Constant(_I32, 0))
        ln = cgutils.alloca_once_value(builder, ir.Constant(_I32, 4))
        f = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_I32, [_I32, _I32, _I32, _I8P, _I8P]), "getsockopt")
        builder.call(f, [context.cast(builder, args[0], sig.args[0], types.int32),
                         ir.Constant(_I32, 1), ir.Constant(_I32, 4),     # SOL_SOCKET, SO_ERROR
                         builder.bitcast(val, _I8P), builder.bitcast(ln, _I8P)])
        return builder.sext(builder.load(val), _I64)

    return types.int64(fd), codegen


@kernel
def sock_error(fd):
    """The socket's pending error (``ENETDOWN`` after its interface went down), cleared."""
    return _c_sock_error(fd)


@kernel
def fd_poll(fd, events, timeout_ms):
    """Wait until ``fd`` has one of ``events`` (``POLLIN``, ``POLLOUT``) or ``timeout_ms``
    passes (-1: forever).  Returns the ``revents`` bits, 0 on timeout, ``-errno``."""
    return _c_poll(fd, events, timeout_ms)


@kernel
def tx_kick(fd):
    """``sendto(fd, NULL, 0, MSG_DONTWAIT)``: ask the kernel to send what the socket's Tx ring
    holds (AF_PACKET: frames marked ``SEND_REQUEST``; AF_XDP: descriptors up to the producer),
    without waiting for their completion.  Returns the bytes it queued (0 for AF_XDP), or
    ``-errno``."""
    return _c_kick(fd)


@kernel
def rx_kick(fd):
    """``recvfrom(fd, NULL, 0, MSG_DONTWAIT)``: wake the kernel's Rx side of an AF_XDP socket
    (it refills from the fill ring; with busy polling it runs the device's NAPI).  Returns 0
    or ``-errno``."""
    return _c_recv_kick(fd)
