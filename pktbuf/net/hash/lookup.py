"""The readers' side (any number, in any process): single and bulk lookups, with positions
or data (``rte_hash_lookup*``, ``__bulk_lookup_lf``)."""
from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from ..._jit import kernel
from ...atomics import fence_acquire, load_acquire
from ...errors import E_INVAL, E_NOENT, E_OK
from ...rawmem import stack_i32
from .access import _key_ok, _lookup_lf, _search_bucket, _sig_mask, _stack_u64
from .crc import hash_crc16_at, hash_crc_at, prefetch_at
from .layout import _M32, _U0, BUCKET_ENTRIES, LOOKUP_BULK_MAX, M_INIT, M_KEY_LEN, M_MASK, M_STRIDE

# ---------------------------------------------------------------------------------------------
# lookup

@kernel
def hash_lookup_with_hash(blk, key, h):
    """``rte_hash_lookup_with_hash``: the key's position or ``E_NOENT``; ``E_INVAL`` for a bad
    key.  Safe while the writer adds and deletes (lock-free)."""
    if not _key_ok(blk, key):
        return E_INVAL
    idx, _ = _lookup_lf(blk, key, 0, h)
    return idx - 1 if idx else E_NOENT


@kernel
def hash_lookup(blk, key):
    """``rte_hash_lookup``: :func:`hash_lookup_with_hash` with the table's hash."""
    if not _key_ok(blk, key):
        return E_INVAL
    h = hash_crc_at(key, 0, blk.meta[M_KEY_LEN], blk.meta[M_INIT])
    idx, _ = _lookup_lf(blk, key, 0, h)
    return idx - 1 if idx else E_NOENT


@kernel
def hash_lookup_with_hash_data(blk, key, h):
    """``rte_hash_lookup_with_hash_data``: ``(position, data)``, or ``(E_NOENT, 0)`` /
    ``(E_INVAL, 0)``."""
    if not _key_ok(blk, key):
        return E_INVAL, _U0
    idx, d = _lookup_lf(blk, key, 0, h)
    return (idx - 1, d) if idx else (E_NOENT, _U0)


@kernel
def hash_lookup_data(blk, key):
    """``rte_hash_lookup_data``: :func:`hash_lookup_with_hash_data` with the table's hash."""
    if not _key_ok(blk, key):
        return E_INVAL, _U0
    h = hash_crc_at(key, 0, blk.meta[M_KEY_LEN], blk.meta[M_INIT])
    idx, d = _lookup_lf(blk, key, 0, h)
    return (idx - 1, d) if idx else (E_NOENT, _U0)


@kernel(inline="always")
def _bulk_ok(blk, keys, n):
    return (keys.ndim == 2 and 0 <= n <= LOOKUP_BULK_MAX and n <= keys.shape[0]
            and keys.shape[1] >= blk.meta[M_KEY_LEN] and keys.strides[1] == 1)


@kernel(inline="always")
def _bulk_buckets(blk, keys, n, hs, prim, sec, compute):
    """Pass 1 of a bulk: each key's hash (computed when ``compute``, else taken from ``hs``),
    both its buckets, and a prefetch of both lines as soon as they are known -- so the first
    keys' lines are on their way while later keys are hashed."""
    meta = blk.meta
    bkt = blk.bkt
    mask = meta[M_MASK]
    key_len = meta[M_KEY_LEN]
    init = meta[M_INIT]
    rs = keys.strides[0]
    for i in range(n):
        if compute:
            if key_len == 16:       # l3fwd's 5-tuple: two crc32 steps, no loop
                h = hash_crc16_at(keys, i * rs, init)
            else:
                h = hash_crc_at(keys, i * rs, key_len, init)
            hs[i] = h
        else:
            h = np.int64(hs[i]) & _M32
        p = h & mask
        s = (p ^ (h >> 16)) & mask
        prim[i] = p
        sec[i] = s
        prefetch_at(bkt, p * 64)
        prefetch_at(bkt, s * 64)


@kernel
def _bulk(blk, keys, hs, prim, sec, n, pos, data):
    """Passes 2 and 3 of the bulk lookup of ``__bulk_lookup_lf`` (pass 1:
    :func:`_bulk_buckets`): (2) signature masks of both buckets, the first candidate's key
    slot prefetched; (3) full key compares.  Keys that missed while ``tbl_chng_cnt`` moved
    are looked up again one by one.  ``pos[i]`` = position or ``E_NOENT``, ``data[i]`` set
    for hits.  Returns ``(hits, hit_mask)``."""
    meta = blk.meta
    bkt = blk.bkt
    ks = blk.ks
    cnt = blk.cnt
    stride = meta[M_STRIDE]
    key_len = meta[M_KEY_LEN]
    rs = keys.strides[0]
    pm = stack_i32(64)
    sm = stack_i32(64)
    cb = load_acquire(cnt, 0)
    for i in range(n):
        sig = (np.int64(hs[i]) & _M32) >> 16
        p = np.int64(prim[i])
        s = np.int64(sec[i])
        a = _sig_mask(bkt, p, sig)
        b = _sig_mask(bkt, s, sig)
        pm[i] = a
        sm[i] = b
        if a:
            prefetch_at(ks, np.int64(bkt[p, BUCKET_ENTRIES + trailing_zeros(a)]) * stride * 8)
        elif b:
            prefetch_at(ks, np.int64(bkt[s, BUCKET_ENTRIES + trailing_zeros(b)]) * stride * 8)
    hits = 0
    hm = _U0
    for i in range(n):
        koff = i * rs
        idx = 0
        d = _U0
        if pm[i]:
            idx, d = _search_bucket(bkt, ks, np.int64(prim[i]), np.int64(pm[i]), stride, keys,
                                    koff, key_len)
        if idx == 0 and sm[i]:
            idx, d = _search_bucket(bkt, ks, np.int64(sec[i]), np.int64(sm[i]), stride, keys,
                                    koff, key_len)
        if idx:
            pos[i] = idx - 1
            data[i] = d
            hits += 1
            hm |= np.uint64(1) << np.uint64(i)
        else:
            pos[i] = E_NOENT
    if hits < n:
        fence_acquire()
        if load_acquire(cnt, 0) != cb:
            for i in range(n):
                if pos[i] < 0:
                    idx, d = _lookup_lf(blk, keys, i * rs, np.int64(hs[i]) & _M32)
                    if idx:
                        pos[i] = idx - 1
                        data[i] = d
                        hits += 1
                        hm |= np.uint64(1) << np.uint64(i)
    return hits, hm


@kernel
def hash_lookup_bulk(blk, keys, n, positions):
    """``rte_hash_lookup_bulk``: ``positions[i]`` (int32) = position of ``keys[i]`` or
    ``E_NOENT``, for ``i < n``.  0, or ``E_INVAL`` (nothing written) when ``n`` is outside
    ``[0, 64]`` or beyond ``keys``' rows or ``positions``, or the rows are shorter than
    ``key_len``."""
    if not _bulk_ok(blk, keys, n) or positions.size < n:
        return E_INVAL
    hs = stack_i32(64)
    prim = stack_i32(64)
    sec = stack_i32(64)
    _bulk_buckets(blk, keys, n, hs, prim, sec, True)
    _bulk(blk, keys, hs, prim, sec, n, positions, _stack_u64(64))
    return E_OK


@kernel
def hash_lookup_with_hash_bulk(blk, keys, hashes, n, positions):
    """``rte_hash_lookup_with_hash_bulk``: :func:`hash_lookup_bulk` with the hashes given
    (``hashes[i]``, low 32 bits, for ``keys[i]``)."""
    if not _bulk_ok(blk, keys, n) or positions.size < n or hashes.size < n:
        return E_INVAL
    hs = stack_i32(64)
    prim = stack_i32(64)
    sec = stack_i32(64)
    for i in range(n):
        hs[i] = np.int64(hashes[i]) & _M32
    _bulk_buckets(blk, keys, n, hs, prim, sec, False)
    _bulk(blk, keys, hs, prim, sec, n, positions, _stack_u64(64))
    return E_OK


@kernel
def hash_lookup_bulk_data(blk, keys, n, hit_mask, data):
    """``rte_hash_lookup_bulk_data``: the number of hits among ``keys[:n]``; bit i of
    ``hit_mask[0]`` (uint64) set and ``data[i]`` (uint64) written for each hit (misses leave
    ``data[i]`` alone).  ``E_INVAL`` as :func:`hash_lookup_bulk`, or when ``hit_mask`` is
    empty or ``data`` shorter than ``n``."""
    if not _bulk_ok(blk, keys, n) or hit_mask.size < 1 or data.size < n:
        return E_INVAL
    hs = stack_i32(64)
    prim = stack_i32(64)
    sec = stack_i32(64)
    _bulk_buckets(blk, keys, n, hs, prim, sec, True)
    d = _stack_u64(64)
    hits, hm = _bulk(blk, keys, hs, prim, sec, n, stack_i32(64), d)
    m = hm
    while m:
        i = trailing_zeros(m)
        m &= m - np.uint64(1)
        data[i] = d[i]
    hit_mask[0] = hm
    return hits


@kernel
def hash_lookup_with_hash_bulk_data(blk, keys, hashes, n, hit_mask, data):
    """``rte_hash_lookup_with_hash_bulk_data``: :func:`hash_lookup_bulk_data` with the hashes
    given."""
    if not _bulk_ok(blk, keys, n) or hit_mask.size < 1 or data.size < n or hashes.size < n:
        return E_INVAL
    hs = stack_i32(64)
    prim = stack_i32(64)
    sec = stack_i32(64)
    for i in range(n):
        hs[i] = np.int64(hashes[i]) & _M32
    _bulk_buckets(blk, keys, n, hs, prim, sec, False)
    d = _stack_u64(64)
    hits, hm = _bulk(blk, keys, hs, prim, sec, n, stack_i32(64), d)
    m = hm
    while m:
        i = trailing_zeros(m)
        m &= m - np.uint64(1)
        data[i] = d[i]
    hit_mask[0] = hm
    return hits
