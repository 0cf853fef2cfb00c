"""Keys back out of the table: by position, in bucket order (``rte_hash_iterate``), counts."""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_acquire, load_relaxed
from ...errors import E_INVAL, E_NOENT, E_OK
from .layout import (_U0, BUCKET_ENTRIES, M_ENTRIES, M_KEY_LEN, M_NB, M_STRIDE, SEQ_LIVE, W_HEAD,
                     W_TAIL)
from .write import _slot_key_linked


@kernel(inline="always")
def _copy_key_out(blk, idx, key_out):
    meta = blk.meta
    ks = blk.ks
    kb = idx * meta[M_STRIDE] + 2
    for i in range(meta[M_KEY_LEN]):
        key_out[i] = np.uint8((ks[kb + (i >> 3)] >> np.uint64(8 * (i & 7))) & np.uint64(0xFF))


@kernel
def hash_get_key_with_position(blk, position, key_out):
    """``rte_hash_get_key_with_position``: copy the key at ``position`` into ``key_out``
    (uint8, ``key_len`` bytes or more).  0; ``E_NOENT`` when no key of the table is there;
    ``E_INVAL`` for a position outside ``[0, entries)`` or a short ``key_out``."""
    meta = blk.meta
    if position < 0 or position >= meta[M_ENTRIES] or key_out.size < meta[M_KEY_LEN]:
        return E_INVAL
    idx = position + 1
    if not blk.ks[idx * meta[M_STRIDE]] & SEQ_LIVE or not _slot_key_linked(blk, idx):
        return E_NOENT
    _copy_key_out(blk, idx, key_out)
    return E_OK


@kernel
def hash_iterate(blk, state, key_out):
    """``rte_hash_iterate``: the next key in bucket order from ``state[0]`` (int64, start at 0;
    advanced past the entry returned): ``(position, data)`` with the key copied into
    ``key_out``; ``(E_NOENT, 0)`` at the end; ``(E_INVAL, 0)`` for a short ``key_out`` or a
    negative state.  Writer side (or no writer): not a consistent snapshot under changes."""
    meta = blk.meta
    bkt = blk.bkt
    if key_out.size < meta[M_KEY_LEN] or state.size < 1 or state[0] < 0:
        return E_INVAL, _U0
    total = meta[M_NB] * BUCKET_ENTRIES
    i = np.int64(state[0])
    while i < total:
        idx = np.int64(load_acquire(bkt, (i >> 3, BUCKET_ENTRIES + (i & 7))))
        i += 1
        if idx:
            state[0] = i
            _copy_key_out(blk, idx, key_out)
            return idx - 1, load_acquire(blk.ks, idx * meta[M_STRIDE] + 1)
    state[0] = total
    return E_NOENT, _U0


@kernel
def hash_count(blk):
    """``rte_hash_count``: keys in the table (with ``F_NO_FREE_ON_DEL``, deleted keys whose
    slot is not yet freed count too, as in DPDK)."""
    wr = blk.wr
    return blk.meta[M_ENTRIES] - (load_relaxed(wr, W_TAIL) - load_relaxed(wr, W_HEAD))


@kernel
def hash_max_key_id(blk):
    """``rte_hash_max_key_id``: the largest position + 1 (= entries, one writer)."""
    return blk.meta[M_ENTRIES]


@kernel
def hash_key_len(blk):
    """The table's key length in bytes."""
    return blk.meta[M_KEY_LEN]
