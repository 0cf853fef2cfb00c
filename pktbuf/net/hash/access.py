"""What every verb of the table shares: key words, slot reads under the sequence word,
signature matches within a bucket, the lock-free single lookup
(``__rte_hash_lookup_with_hash_lf``)."""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from ..._jit import kernel
from ...atomics import fence_acquire, fence_release, load_acquire, load_relaxed, store_release
from .crc import load_u8_at, load_u64_at, prefetch_at
from .layout import _M32, _U0, BUCKET_ENTRIES, M_KEY_LEN, M_MASK, M_STRIDE, SEQ_LIVE, SEQ_WRITING

# ---------------------------------------------------------------------------------------------
# small helpers

@intrinsic
def _stack_u64(typingctx, n):
    """A uint64 array of ``n`` (a literal) elements on the kernel's stack, uninitialised."""
    if not isinstance(n, types.IntegerLiteral):
        return None
    count = n.literal_value
    aryty = types.Array(types.uint64, 1, "C")

    def codegen(context, builder, sig, args):
        ptr = cgutils.alloca_once(builder, ir.IntType(64), size=count)
        intp = context.get_value_type(types.intp)
        ary = context.make_array(aryty)(context, builder)
        populate_array(ary, data=ptr, shape=cgutils.pack_array(builder, [ir.Constant(intp, count)]),
                       strides=cgutils.pack_array(builder, [ir.Constant(intp, 8)]),
                       itemsize=ir.Constant(intp, 8), meminfo=None)
        return ary._getvalue()

    return aryty(n), codegen


@kernel(inline="always")
def _key_word(key, koff, key_len, w):
    """Word ``w`` of the key at byte ``koff`` of ``key``, as the key store holds it (the last
    word zero-padded)."""
    nw = key_len >> 3
    if w < nw:
        return load_u64_at(key, koff + 8 * w)
    rem = key_len & 7
    if key_len >= 8:        # the last 8 bytes, shifted: no byte loop
        return load_u64_at(key, koff + key_len - 8) >> np.uint64(8 * (8 - rem))
    t = _U0
    for b in range(rem):
        t |= np.uint64(load_u8_at(key, koff + b)) << np.uint64(8 * b)
    return t


@kernel(inline="always")
def _key_eq(ks, kb, key, koff, key_len):
    """The key at ``ks[kb:]`` equals the one at byte ``koff`` of ``key``."""
    # (byte-offset loads: no negative-index fix-up on the hot path)
    if key_len == 16:       # l3fwd's 5-tuple: two words, no loop
        return ((load_u64_at(ks, 8 * kb) ^ load_u64_at(key, koff))
                | (load_u64_at(ks, 8 * kb + 8) ^ load_u64_at(key, koff + 8))) == 0
    nw = key_len >> 3
    for w in range(nw):
        if load_u64_at(ks, 8 * (kb + w)) != load_u64_at(key, koff + 8 * w):
            return False
    if key_len & 7:
        return load_u64_at(ks, 8 * (kb + nw)) == _key_word(key, koff, key_len, nw)
    return True


@kernel(inline="always")
def _read_slot(ks, idx, stride, key, koff, key_len):
    """Reader: (True, data) when slot ``idx`` holds this key, live and unchanged while read
    (the sequence check); (False, 0) otherwise -- including a slot rewritten under us, whose
    old key was therefore deleted and whose new key is not linked yet."""
    base = idx * stride
    v1 = load_acquire(ks, base)
    if (v1 & (SEQ_WRITING | SEQ_LIVE)) != SEQ_LIVE:
        return False, _U0
    if not _key_eq(ks, base + 2, key, koff, key_len):
        return False, _U0
    d = load_acquire(ks, base + 1)
    fence_acquire()
    if load_relaxed(ks, base) != v1:
        return False, _U0
    return True, d


@intrinsic
def _sig_mask(typingctx, bkt, b, sig):
    """Bit e set where entry e of bucket ``b`` has signature ``sig``: the 8 signature words
    of the bucket's line loaded as one vector and compared at once (``rte_hash``'s SSE
    ``compare_signatures``).  A plain load: a signature is only a hint, the slot word (loaded
    with acquire) and the full key decide."""
    if not (isinstance(bkt, types.Array) and isinstance(b, types.Integer)
            and isinstance(sig, types.Integer)):
        return None

    def codegen(context, builder, sg, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        a = context.make_array(sg.args[0])(context, builder, args[0])
        bi = context.cast(builder, args[1], sg.args[1], types.int64)
        p = builder.gep(builder.bitcast(a.data, ir.IntType(8).as_pointer()),
                        [builder.mul(bi, ir.Constant(i64, 64))])
        vty = ir.VectorType(i32, BUCKET_ENTRIES)
        v = builder.load(builder.bitcast(p, vty.as_pointer()), align=64)
        s = builder.trunc(context.cast(builder, args[2], sg.args[2], types.int64), i32)
        splat = builder.insert_element(ir.Constant(vty, ir.Undefined), s, ir.Constant(i32, 0))
        splat = builder.shuffle_vector(splat, ir.Constant(vty, ir.Undefined),
                                       ir.Constant(vty, [0] * BUCKET_ENTRIES))
        eq = builder.icmp_unsigned("==", v, splat)
        return builder.zext(builder.bitcast(eq, ir.IntType(BUCKET_ENTRIES)), i64)

    return types.int64(bkt, b, sig), codegen


@kernel(inline="always")
def _search_bucket(bkt, ks, b, m, stride, key, koff, key_len):
    """Reader: the slot of the key among the entries ``m`` of bucket ``b`` (0: none), data."""
    while m:
        e = trailing_zeros(m)
        m &= m - 1
        idx = np.int64(load_acquire(bkt, (b, BUCKET_ENTRIES + e)))
        if idx != 0:
            ok, d = _read_slot(ks, idx, stride, key, koff, key_len)
            if ok:
                return idx, d
    return 0, _U0


@kernel
def _lookup_lf(blk, key, koff, h):
    """Reader: (slot or 0, data) of the key with hash ``h``: both buckets, then the change
    counter -- a miss stands only if no cuckoo move ran during the search."""
    meta = blk.meta
    bkt = blk.bkt
    ks = blk.ks
    cnt = blk.cnt
    mask = meta[M_MASK]
    stride = meta[M_STRIDE]
    key_len = meta[M_KEY_LEN]
    h &= _M32
    sig = h >> 16
    prim = h & mask
    sec = (prim ^ sig) & mask
    # the secondary line is fetched while the primary is searched: a miss (and a key that
    # lives in its secondary bucket) then costs one memory latency, not two in a row
    prefetch_at(bkt, sec * 64)
    while True:
        cb = load_acquire(cnt, 0)
        idx, d = _search_bucket(bkt, ks, prim, _sig_mask(bkt, prim, sig), stride, key, koff,
                                key_len)
        if idx:
            return idx, d
        idx, d = _search_bucket(bkt, ks, sec, _sig_mask(bkt, sec, sig), stride, key, koff,
                                key_len)
        if idx:
            return idx, d
        fence_acquire()
        if load_acquire(cnt, 0) == cb:
            return 0, _U0


@kernel(inline="always")
def _find_w(bkt, ks, b, sig, stride, key, koff, key_len):
    """Writer: the entry of bucket ``b`` holding the key (-1: none).  Only the writer changes
    the table, so it reads without sequence checks."""
    for e in range(BUCKET_ENTRIES):
        idx = np.int64(bkt[b, BUCKET_ENTRIES + e])
        if idx != 0 and bkt[b, e] == sig and _key_eq(ks, idx * stride + 2, key, koff, key_len):
            return e
    return -1


@kernel(inline="always")
def _bump(cnt):
    """``tbl_chng_cnt`` + 1 with release, then a release fence: the move's stores that follow
    are not seen before the new count."""
    store_release(cnt, 0, cnt[0] + np.uint64(1))
    fence_release()


@kernel(inline="always")
def _key_ok(blk, key):
    return key.ndim == 1 and key.size >= blk.meta[M_KEY_LEN]
