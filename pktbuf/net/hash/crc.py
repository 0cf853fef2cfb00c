"""CRC32-C (Castagnoli), computed as DPDK's ``rte_hash_crc`` does -- the default hash of
``rte_hash`` on x86 (``lib/hash/rte_hash_crc.h``).

``hash_crc(data, n, init)``: the reflected CRC with polynomial 0x82F63B78 over the first ``n``
bytes of ``data``, the register starting at ``init`` and *no* inversion before or after (so the
familiar CRC-32C check value is ``hash_crc(b"123456789", 9, 0xFFFFFFFF) ^ 0xFFFFFFFF ==
0xE3069283``).  DPDK feeds the data in 8-byte little-endian words, then 4, 2 and 1 byte
pieces; a CRC is linear in its input, so any split gives the same value, and this module feeds
8-byte words then single bytes.

Two implementations with identical results:

* :func:`hash_crc_hw` -- SSE4.2's ``crc32`` instruction (``llvm.x86.sse42.crc32.64.64`` and
  ``.32.8``), one instruction per 8 bytes;
* :func:`hash_crc_sw` -- a byte-wise table (256 x uint32), for machines without SSE4.2.

:func:`hash_crc` is the one this machine can run (chosen once, at import: :data:`HAVE_SSE42`).
The ``*_at`` forms read ``n`` bytes at a byte offset of any C-contiguous uint8 array (a row of a
2-d key array), so bulk code hashes rows without building views.  Values are returned as
non-negative int64 (0 .. 2**32-1).
"""
from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ..._jit import kernel

__all__ = ["HAVE_SSE42", "CRC32C_POLY", "crc_table", "hash_crc", "hash_crc_at", "hash_crc_hw",
           "hash_crc_hw_at", "hash_crc_sw", "hash_crc_sw_at", "hash_crc_4byte", "load_u64_at"]

CRC32C_POLY = 0x82F63B78        # reflected Castagnoli polynomial


def _have_sse42() -> bool:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        from llvmlite import binding
        return bool(binding.get_host_cpu_features().get("sse4.2", False))
    except Exception:           # pragma: no cover - llvmlite without host feature query
        return False


HAVE_SSE42 = _have_sse42()
"""True when this machine runs the ``crc32`` instruction: :func:`hash_crc` is then
:func:`hash_crc_hw`, else :func:`hash_crc_sw`."""


def crc_table() -> np.ndarray:
    """The byte-wise table: ``T[v]`` = CRC register after feeding byte ``v`` into 0."""
    t = np.zeros(256, np.uint32)
    for v in range(256):
        c = v
        for _ in range(8):
            c = (c >> 1) ^ CRC32C_POLY if c & 1 else c >> 1
        t[v] = c
    return t


_TABLE = crc_table()
_M32 = 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# intrinsics

def _byte_ptr(context, builder, aryty, aryval, off):
    a = context.make_array(aryty)(context, builder, aryval)
    p = builder.bitcast(a.data, ir.IntType(8).as_pointer())
    return builder.gep(p, [off])


@intrinsic
def load_u64_at(typingctx, ary, off):
    """The 8 bytes at byte offset ``off`` of array ``ary``'s data, as a little-endian uint64
    (an unaligned load; the caller keeps ``off + 8`` inside the array)."""
    if not isinstance(ary, types.Array) or not isinstance(off, types.Integer):
        raise TypingError("load_u64_at(array, int)")

    def codegen(context, builder, sig, args):
        o = context.cast(builder, args[1], sig.args[1], types.int64)
        p = builder.bitcast(_byte_ptr(context, builder, sig.args[0], args[0], o),
                            ir.IntType(64).as_pointer())
        return builder.load(p, align=1)

    return types.uint64(ary, off), codegen


@intrinsic
def store_u64_at(typingctx, ary, off, v):
    """Store ``v`` as 8 little-endian bytes at byte offset ``off`` of array ``ary``'s data (an
    unaligned store; the caller keeps ``off + 8`` inside the array)."""
    if not (isinstance(ary, types.Array) and isinstance(off, types.Integer)
            and isinstance(v, types.Integer)):
        raise TypingError("store_u64_at(array, int, int)")

    def codegen(context, builder, sig, args):
        o = context.cast(builder, args[1], sig.args[1], types.int64)
        p = builder.bitcast(_byte_ptr(context, builder, sig.args[0], args[0], o),
                            ir.IntType(64).as_pointer())
        builder.store(context.cast(builder, args[2], sig.args[2], types.uint64), p, align=1)
        return context.get_dummy_value()

    return types.none(ary, off, v), codegen


@intrinsic
def load_u8_at(typingctx, ary, off):
    """The byte at byte offset ``off`` of array ``ary``'s data."""
    if not isinstance(ary, types.Array) or not isinstance(off, types.Integer):
        raise TypingError("load_u8_at(array, int)")

    def codegen(context, builder, sig, args):
        o = context.cast(builder, args[1], sig.args[1], types.int64)
        return builder.load(_byte_ptr(context, builder, sig.args[0], args[0], o))

    return types.uint8(ary, off), codegen


@intrinsic
def prefetch_at(typingctx, ary, off):
    """Prefetch (for reading, into every cache level) the line holding byte ``off`` of
    ``ary``'s data: ``prefetcht0``, as ``rte_prefetch0``.  A hint: never faults."""
    if not isinstance(ary, types.Array) or not isinstance(off, types.Integer):
        raise TypingError("prefetch_at(array, int)")

    def codegen(context, builder, sig, args):
        o = context.cast(builder, args[1], sig.args[1], types.int64)
        p = _byte_ptr(context, builder, sig.args[0], args[0], o)
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [p.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [p, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.none(ary, off), codegen


@intrinsic
def _crc32_u64(typingctx, crc, v):
    """SSE4.2 ``crc32 r64, r/m64``: ``crc`` (low 32 bits) advanced over the 8 bytes of ``v``."""
    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64, i64]),
                                            "llvm.x86.sse42.crc32.64.64")
        c = context.cast(builder, args[0], sig.args[0], types.uint64)
        x = context.cast(builder, args[1], sig.args[1], types.uint64)
        return builder.call(fn, [c, x])

    return types.uint64(crc, v), codegen


@intrinsic
def _crc32_u8(typingctx, crc, v):
    """SSE4.2 ``crc32 r32, r/m8``."""
    def codegen(context, builder, sig, args):
        i32, i8 = ir.IntType(32), ir.IntType(8)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32, i8]),
                                            "llvm.x86.sse42.crc32.32.8")
        c = context.cast(builder, args[0], sig.args[0], types.uint32)
        x = context.cast(builder, args[1], sig.args[1], types.uint8)
        return builder.call(fn, [c, x])

    return types.uint32(crc, v), codegen


# ---------------------------------------------------------------------------------------------
# kernels

@kernel(inline="always")
def hash_crc_hw_at(data, off, n, init):
    """``hash_crc`` of ``data``'s bytes ``[off, off + n)`` with the ``crc32`` instruction
    (SSE4.2 only: the caller checks :data:`HAVE_SSE42`).  No checks."""
    c = np.uint64(init & _M32)
    i = 0
    while i + 8 <= n:
        c = _crc32_u64(c, load_u64_at(data, off + i))
        i += 8
    c32 = np.uint32(c)
    while i < n:
        c32 = _crc32_u8(c32, load_u8_at(data, off + i))
        i += 1
    return np.int64(c32)


@kernel(inline="always")
def hash_crc_sw_at(data, off, n, init):
    """``hash_crc`` of ``data``'s bytes ``[off, off + n)`` with the byte-wise table.  No checks."""
    c = np.uint32(init & _M32)
    for i in range(n):
        c = _TABLE[np.uint32((c ^ np.uint32(load_u8_at(data, off + i))) & np.uint32(0xFF))] \
            ^ (c >> np.uint32(8))
    return np.int64(c)


hash_crc_at = hash_crc_hw_at if HAVE_SSE42 else hash_crc_sw_at


@kernel(inline="always")
def hash_crc16_at(data, off, init):
    """:func:`hash_crc_at` of 16 bytes (l3fwd's 5-tuple key): the length a constant, so the
    loops unroll to two ``crc32`` steps."""
    return hash_crc_at(data, off, 16, init)


@kernel
def hash_crc_hw(data, n, init):
    """``rte_hash_crc(data, n, init)`` with the ``crc32`` instruction; -22 (``E_INVAL``) when
    ``n`` is negative or beyond ``data``'s bytes.  SSE4.2 machines only."""
    if n < 0 or n > data.size * data.itemsize:
        return -22
    return hash_crc_hw_at(data, 0, n, init)


@kernel
def hash_crc_sw(data, n, init):
    """``rte_hash_crc(data, n, init)`` with the byte-wise table; -22 as :func:`hash_crc_hw`."""
    if n < 0 or n > data.size * data.itemsize:
        return -22
    return hash_crc_sw_at(data, 0, n, init)


hash_crc = hash_crc_hw if HAVE_SSE42 else hash_crc_sw


@kernel
def hash_crc_4byte(v, init):
    """``rte_hash_crc_4byte(v, init)``: the CRC of the 4 little-endian bytes of ``v``."""
    c = np.uint32(init & _M32)
    x = np.uint32(v & _M32)
    for _ in range(4):
        c = _TABLE[np.uint32((c ^ x) & np.uint32(0xFF))] ^ (c >> np.uint32(8))
        x = x >> np.uint32(8)
    return np.int64(c)
