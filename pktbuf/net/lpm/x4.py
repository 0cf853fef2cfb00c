"""Four tbl24 lookups as one vector: the fast path of ``lpm_lookupx4`` (DPDK's
``rte_lpm_sse.h`` does the same with SSE).

:func:`tbl24_x4` emits, straight into the caller's loop, the four address loads, the four
tbl24 loads (scalar: a hardware gather is slower than four loads on current x86), and the
result as vector operations: one mask and compare for "some entry is a tbl8 pointer", one
select between the next hops and the default, one store.  Written in Numba, the same work
became four scalar selects of seven instructions each plus spills and reloads around them, so
``lpm_lookupx4`` cost more per address than a plain loop over ``lpm_lookup``; in a
memory-bound loop every instruction spent per lookup is a lookup fewer in flight.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .layout import NH_MASK, VALID, VALID_EXT

__all__ = ["tbl24_x4"]

_I32 = ir.IntType(32)
_V4 = ir.VectorType(_I32, 4)


def _splat(v: int):
    return ir.Constant(_V4, [ir.Constant(_I32, v & 0xFFFFFFFF)] * 4)


def _int_array(t) -> bool:
    return isinstance(t, types.Array) and t.ndim == 1 and isinstance(t.dtype, types.Integer)


@intrinsic
def tbl24_x4(typingctx, t24, ips, off, hop, defv):
    """``hop[off:off+4]`` = the tbl24 answers for ``ips[off:off+4]`` (next hop, or ``defv``
    for a miss); returns 1 if some entry was a tbl8 group pointer -- the caller must then look
    all four up again through tbl8 -- else 0.  The caller checks the bounds: nothing here
    does."""
    if not (_int_array(t24) and t24.dtype.bitwidth == 32 and _int_array(ips)
            and _int_array(hop) and isinstance(off, types.Integer)
            and isinstance(defv, types.Integer)):
        return None
    sig = types.int64(t24, ips, off, hop, defv)

    def codegen(context, builder, sig, args):
        t24_ty, ips_ty, off_ty, hop_ty, def_ty = sig.args
        t24a = context.make_array(t24_ty)(context, builder, args[0])
        ipsa = context.make_array(ips_ty)(context, builder, args[1])
        hopa = context.make_array(hop_ty)(context, builder, args[3])
        off = context.cast(builder, args[2], off_ty, types.intp)
        dflt = builder.trunc(context.cast(builder, args[4], def_ty, types.uint64), _I32) \
            if def_ty.bitwidth > 32 else context.cast(builder, args[4], def_ty, types.uint32)
        ent = ir.Constant(_V4, ir.Undefined)
        for k in range(4):
            i = builder.add(off, context.get_constant(types.intp, k))
            p = cgutils.get_item_pointer2(context, builder, ipsa.data,
                                          cgutils.unpack_tuple(builder, ipsa.shape, 1),
                                          cgutils.unpack_tuple(builder, ipsa.strides, 1),
                                          ips_ty.layout, [i])
            a = context.cast(builder, builder.load(p), ips_ty.dtype, types.uint32)
            idx = builder.zext(builder.lshr(a, ir.Constant(_I32, 8)), cgutils.intp_t)
            e = builder.load(builder.gep(t24a.data, [idx], inbounds=True))
            ent = builder.insert_element(ent, builder.bitcast(e, _I32),
                                         ir.Constant(_I32, k))
        ext = builder.icmp_unsigned("==", builder.and_(ent, _splat(VALID_EXT)),
                                    _splat(VALID_EXT))
        any_ext = builder.icmp_unsigned("!=", builder.bitcast(ext, ir.IntType(4)),
                                        ir.Constant(ir.IntType(4), 0))
        hit = builder.icmp_unsigned("!=", builder.and_(ent, _splat(VALID)), _splat(0))
        dv = builder.insert_element(ir.Constant(_V4, ir.Undefined), dflt, ir.Constant(_I32, 0))
        dv = builder.shuffle_vector(dv, ir.Constant(_V4, ir.Undefined),
                                    ir.Constant(_V4, [ir.Constant(_I32, 0)] * 4))
        res = builder.select(hit, builder.and_(ent, _splat(NH_MASK)), dv)
        if hop_ty.layout == "C" and hop_ty.dtype.bitwidth == 32:
            p = cgutils.get_item_pointer2(context, builder, hopa.data,
                                          cgutils.unpack_tuple(builder, hopa.shape, 1),
                                          cgutils.unpack_tuple(builder, hopa.strides, 1),
                                          "C", [off])
            builder.store(res, builder.bitcast(p, _V4.as_pointer()), align=4)
        else:
            for k in range(4):
                i = builder.add(off, context.get_constant(types.intp, k))
                p = cgutils.get_item_pointer2(context, builder, hopa.data,
                                              cgutils.unpack_tuple(builder, hopa.shape, 1),
                                              cgutils.unpack_tuple(builder, hopa.strides, 1),
                                              hop_ty.layout, [i])
                v = builder.extract_element(res, ir.Constant(_I32, k))
                builder.store(context.cast(builder, v, types.uint32, hop_ty.dtype), p)
        return builder.zext(any_ext, ir.IntType(64))

    return sig, codegen
