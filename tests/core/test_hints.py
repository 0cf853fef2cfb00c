"""pktbuf.hints.select_likely: the value of ``a if cond else b``, and the branch weights that
make LLVM emit a predicted branch for it."""
from __future__ import annotations

import numpy as np
from numba import njit

from pktbuf.hints import select_likely


@njit
def _pick(c, a, b):
    return select_likely(c, a, b)


@njit
def _store(cond, a, b, out):
    for i in range(out.size):
        out[i] = select_likely(cond[i] != 0, a[i], b)


def test_values_for_every_condition_and_integer_type():
    assert _pick(True, 5, -2) == 5
    assert _pick(False, 5, -2) == -2
    assert _pick(np.int64(7), np.uint32(1), np.int64(-2)) == 1       # nonzero integer: true
    assert _pick(np.int64(0), np.uint32(1), np.int64(-2)) == -2
    assert _pick(np.uint8(0), np.uint32(0xFFFFFFFF), np.uint32(3)) == 3


@njit
def _lookup_hinted(tbl, idx, out):
    for i in range(idx.size):
        e = tbl[idx[i]]
        out[i] = select_likely((e & 1) != 0, e >> 1, np.int64(-2))


@njit
def _lookup_plain(tbl, idx, out):
    for i in range(idx.size):
        e = tbl[idx[i]]
        out[i] = (e >> 1) if (e & 1) != 0 else np.int64(-2)


def _asm(f, *args):
    f(*args)
    return f.inspect_asm(f.signatures[0])


def test_stored_results_and_a_branch_instead_of_a_conditional_move():
    rng = np.random.default_rng(1)
    tbl = rng.integers(0, 1 << 24, 4096).astype(np.int64)
    idx = rng.integers(0, 4096, 1000).astype(np.int64)
    out, ref = np.zeros(1000, np.int64), np.zeros(1000, np.int64)
    _lookup_hinted(tbl, idx, out)
    _lookup_plain(tbl, idx, ref)
    assert (out == np.where(tbl[idx] & 1 != 0, tbl[idx] >> 1, -2)).all()
    assert (out == ref).all()
    # without the hint LLVM makes the select a conditional move (or a blend): the test of
    # the hint means something only while that holds
    plain = _asm(_lookup_plain, tbl, idx, ref)
    hinted = _asm(_lookup_hinted, tbl, idx, out)
    assert "cmov" in plain or "blend" in plain or "sbb" in plain
    assert "cmov" not in hinted and "blend" not in hinted and "sbb" not in hinted
