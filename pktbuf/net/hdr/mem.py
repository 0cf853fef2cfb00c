"""Wire-order loads and stores at raw addresses, and a byte scratch buffer on the stack.

Packet headers are big-endian on the wire; the host is little-endian (x86-64, arm64 as
Linux runs it).  Every multi-byte header field in :mod:`pktbuf.net.hdr` goes through one of
these helpers, so the byte order is handled in one place and is explicit at every call:

* ``load_be16/32(addr)``, ``store_be16/32(addr, v)``: a field as the number the RFC means
  (``ntohs``/``htons`` included);
* ``load_le16/32/64(addr)``: the bytes as the host sees them (what DPDK's checksum code adds up:
  ``__rte_raw_cksum`` in ``lib/net/rte_ip.h`` sums native 16-bit words);
* ``store_le16(addr, v)``: store a DPDK-convention checksum (one that is "in memory order").

All accesses are unaligned (``align 1``): headers after an odd-length one (a 14-byte Ethernet
header) are not aligned.  :func:`stack_u8` is the byte twin of
:func:`pktbuf.rawmem.stack_i32`: scratch space for gathering a header that straddles two
segments (``rte_pktmbuf_read``'s copy buffer), without Numba's runtime.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ...rawmem import _array_from_pointer

__all__ = ["load_le16", "load_le32", "load_le64", "load_be16", "load_be32",
           "store_be16", "store_be32", "store_le16", "stack_u8"]


def _bswap(builder, v, bits):
    ty = ir.IntType(bits)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty]),
                                        f"llvm.bswap.i{bits}")
    return builder.call(fn, [v])


def _load(bits, swap, ret):
    @intrinsic
    def fn(typingctx, addr):
        if not isinstance(addr, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ty = ir.IntType(bits)
            p = builder.inttoptr(args[0], ty.as_pointer())
            v = builder.load(p, align=1)
            if swap:
                v = _bswap(builder, v, bits)
            return builder.zext(v, ir.IntType(64)) if bits < 64 else v

        return ret(addr), codegen

    return fn


def _store(bits, swap):
    @intrinsic
    def fn(typingctx, addr, val):
        if not (isinstance(addr, types.Integer) and isinstance(val, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ty = ir.IntType(bits)
            v = context.cast(builder, args[1], sig.args[1], types.int64)
            v = builder.trunc(v, ty)
            if swap:
                v = _bswap(builder, v, bits)
            p = builder.inttoptr(args[0], ty.as_pointer())
            builder.store(v, p, align=1)
            return context.get_dummy_value()

        return types.none(addr, val), codegen

    return fn


load_le16 = _load(16, False, types.int64)
load_le16.__doc__ = "The two bytes at ``addr`` as a host (little-endian) 16-bit word."
load_le32 = _load(32, False, types.int64)
load_le32.__doc__ = "The four bytes at ``addr`` as a host 32-bit word."
load_le64 = _load(64, False, types.uint64)
load_le64.__doc__ = "The eight bytes at ``addr`` as a host 64-bit word (uint64)."
load_be16 = _load(16, True, types.int64)
load_be16.__doc__ = "The big-endian 16-bit field at ``addr`` (``ntohs``)."
load_be32 = _load(32, True, types.int64)
load_be32.__doc__ = "The big-endian 32-bit field at ``addr`` (``ntohl``)."
store_be16 = _store(16, True)
store_be16.__doc__ = "Write ``val`` as a big-endian 16-bit field at ``addr`` (``htons``)."
store_be32 = _store(32, True)
store_be32.__doc__ = "Write ``val`` as a big-endian 32-bit field at ``addr`` (``htonl``)."
store_le16 = _store(16, False)
store_le16.__doc__ = "Write ``val`` as a host 16-bit word (a DPDK-convention checksum)."


@intrinsic
def stack_u8(typingctx, n):
    """A uint8 array of ``n`` (a literal) bytes on the calling kernel's stack; not
    initialised, and it must not outlive the kernel that creates it."""
    if not isinstance(n, types.IntegerLiteral):
        return None
    count = n.literal_value
    aryty = types.Array(types.uint8, 1, "C")

    def codegen(context, builder, sig, args):
        ptr = cgutils.alloca_once(builder, ir.IntType(8), size=count)
        intp = context.get_value_type(types.intp)
        return _array_from_pointer(context, builder, aryty, ptr, ir.Constant(intp, count))

    return aryty(n), codegen
