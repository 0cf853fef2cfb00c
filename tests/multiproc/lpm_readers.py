"""Shared pieces of the LPM reader tests: the op script, the model's result per state, and the
readers' compiled check (every lookup against the model's results between the writer's
sequence number before and after it)."""
from __future__ import annotations

import numpy as np
from numba import njit

from pktbuf.atomics import load_acquire
from pktbuf.net.lpm.lpm4 import lpm_lookup, lpm_lookup_bulk, lpm_lookupx4
from pktbuf.net.lpm.naive import NaiveLpm

BASE = 0x0A010000            # 10.1.0.0: the 1024 addresses every reader looks up
SPACE = 1024
BASE_RULE = (0x0A000000, 8, 1)    # 10.0.0.0/8 -> 1, in force throughout
W_SEQ, W_STOP, W_READY = 0, 8, 16  # words of the sequence region (own cache lines)
MISS = -2


_LONG = ((0, 26), (128, 27), (130, 32))    # the longer prefixes of each /24: (offset, depth)


def make_ops(n: int, seed: int) -> np.ndarray:
    """``n`` ops ``(index, depth, nh)`` on prefixes inside the space: ``nh < 0`` deletes.
    Depths 22..24 anywhere; longer ones from three prefixes per /24 (``_LONG``), so /24s keep
    losing their last long rule (their tbl8 group is freed) and gaining one again (a group is
    reused, often by another /24)."""
    rng = np.random.default_rng(seed)
    present: dict = {}
    ops = np.zeros((n, 3), np.int64)
    for k in range(n):
        if rng.random() < 0.25:
            d = int(rng.integers(22, 25))
            idx = int(rng.integers(0, SPACE)) & ~((1 << (32 - d)) - 1)
        else:
            off, d = _LONG[int(rng.integers(0, len(_LONG)))]
            idx = (int(rng.integers(0, 4)) << 8) | off
        key = (idx, d)
        if key in present and rng.random() < 0.6:
            nh = -1
            del present[key]
        else:
            nh = int(rng.integers(0, 16))
            present[key] = nh
        ops[k] = idx, d, nh
    return ops


def model_states(ops: np.ndarray) -> np.ndarray:
    """``M[j, i]``: the next hop of address ``BASE + i`` after the first ``j`` ops (``MISS``
    never occurs: the /8 covers all).  Per depth a table of the prefixes of that depth in the
    space; a state's results are the longest present one, else the /8's."""
    n = ops.shape[0]
    tabs = {d: np.full(SPACE >> (32 - d), -1, np.int64) for d in range(22, 33)}
    idx = np.arange(SPACE)
    out = np.empty((n + 1, SPACE), np.int16)

    def row():
        r = np.full(SPACE, BASE_RULE[2], np.int64)
        for d in range(22, 33):
            v = tabs[d][idx >> (32 - d)]
            r = np.where(v >= 0, v, r)
        return r

    out[0] = row()
    for k in range(n):
        i, d, nh = (int(x) for x in ops[k])
        tabs[d][i >> (32 - d)] = nh if nh >= 0 else -1
        out[k + 1] = row()
    return out


def naive_check(ops: np.ndarray, M: np.ndarray, every: int) -> None:
    """The per-state table agrees with :class:`NaiveLpm` replaying the same ops (every
    ``every``-th state and the last)."""
    nv = NaiveLpm(1 << 16, 1 << 10)
    nv.add(*BASE_RULE)
    n = ops.shape[0]
    for k in range(n + 1):
        if k % every == 0 or k == n:
            got = [nv.lookup(BASE + i) for i in range(SPACE)]
            assert (np.array(got) == M[k]).all(), k
        if k < n:
            i, d, nh = (int(x) for x in ops[k])
            if nh >= 0:
                nv.add(BASE + i, d, nh)
            else:
                assert nv.delete(BASE + i, d) == 0


@njit(cache=True, nogil=True)
def _ok(M, s0, s1, i, r):
    # seq counts the ops done: op s1 + 1 may be under way when the second read is made, so
    # the states a lookup may see are s0 .. s1 + 1
    for j in range(s0, min(s1 + 2, M.shape[0])):
        if M[j, i] == r:
            return True
    return False


@njit(cache=True, nogil=True)
def read_and_check(blk, seq, M, seed, max_lookups, bad):
    """Look up until ``seq[W_STOP]`` is set (or ``max_lookups``), in three ways (single,
    x4, bulk of 8), each between acquire reads of the writer's sequence number; count the
    results that are not the model's for some state in ``[before, after + 1]`` (the op after
    the last one published may be in flight).  ``bad`` gets the
    first failures as ``(before, index, result, after)``.  Returns (lookups, errors, lookups
    that overlapped an op)."""
    x = np.uint64(seed * 2654435761 + 1)
    ips = np.zeros(8, np.uint32)
    hop = np.zeros(8, np.uint32)
    raw = np.zeros(8, np.uint32)
    idx = np.zeros(8, np.int64)
    n = 0
    errors = 0
    overlap = 0
    while n < max_lookups and load_acquire(seq, W_STOP) == 0:
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
        kind = np.int64(x & np.uint64(3))
        k = 1 if kind <= 1 else (4 if kind == 2 else 8)
        for j in range(k):
            idx[j] = np.int64((x >> np.uint64(8 + 10 * (j % 5))) & np.uint64(SPACE - 1)) \
                ^ ((j * 97) & (SPACE - 1))
            ips[j] = np.uint32(BASE + idx[j])
        s0 = load_acquire(seq, W_SEQ)
        if k == 1:
            hop[0] = np.uint32(lpm_lookup(blk, np.int64(ips[0])) & 0xFFFFFFFF)
        elif k == 4:
            lpm_lookupx4(blk, ips, hop, 0xFFFFFFFE)
        else:
            lpm_lookup_bulk(blk, ips, raw, 8)
            for j in range(8):
                hop[j] = (raw[j] & np.uint32(0xFFFFFF)) if raw[j] & np.uint32(0x01000000) \
                    else np.uint32(0xFFFFFFFE)
        s1 = load_acquire(seq, W_SEQ)
        if s1 != s0:
            overlap += k
        for j in range(k):
            r = np.int64(hop[j])
            if r == 0xFFFFFFFE:
                r = MISS
            if not _ok(M, s0, s1, idx[j], r):
                if errors < bad.shape[0]:
                    bad[errors, 0] = s0
                    bad[errors, 1] = idx[j]
                    bad[errors, 2] = r
                    bad[errors, 3] = s1
                errors += 1
        n += k
    return n, errors, overlap
