"""The rule stores of the LPM tables: open addressing with linear probing in arrays of the
table's block.

DPDK 22.11's ``rte_lpm`` keeps its rules in one array grouped by depth and scans a depth's
group linearly to find, add or delete a rule (``rule_find``/``rule_add``/``rule_delete`` in
``lib/lpm/rte_lpm.c``), which makes add and delete O(rules of that depth).  Here a rule is one
hash slot and every operation is O(1) expected; the tables built from the rules are the same.
``rte_lpm6`` already hashes its rules (an ``rte_hash``); this store does the same in the block.

Deletion shifts later entries of the probe run back (no tombstones), so a lookup stops at the
first empty slot and the load never degrades with churn.  The load factor is at most 2/3
(:func:`pktbuf.net.lpm.layout.rule_slots`).

IPv4 slot (uint64): ``ip | depth << 32 | next_hop << 38``; the key is the low 38 bits and an
empty slot is 0 (depth is never 0).  IPv6: ``rkey[i] = (high, low)`` of the masked address and
``rval[i] = depth | next_hop << 8`` (0 = empty).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel

KEY4_MASK = (1 << 38) - 1

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_C3 = np.uint64(0x9E3779B97F4A7C15)
_S33 = np.uint64(33)
_S38 = np.uint64(38)


@kernel(inline="always")
def _mix(x):
    # murmur3's 64-bit finaliser: every input bit affects every output bit
    x = np.uint64(x)
    x ^= x >> _S33
    x *= _C1
    x ^= x >> _S33
    x *= _C2
    x ^= x >> _S33
    return x


@kernel(inline="always")
def _home(h, cap):
    return np.int64(h % np.uint64(cap))


@kernel(inline="always")
def _in_run(i, j, k):
    """Is home slot ``k`` cyclically inside ``(i, j]``?  (Then the entry at ``j`` may not move
    to ``i``.)"""
    if i <= j:
        return i < k <= j
    return k > i or k <= j


# --- IPv4 ---------------------------------------------------------------------------------

@kernel
def rule4_find(rules, cap, key):
    """Slot of the rule with ``key`` (``ip | depth << 32``), or -1."""
    i = _home(_mix(key), cap)
    k = np.uint64(key)
    m = np.uint64(KEY4_MASK)
    while True:
        s = rules[i]
        if s == 0:
            return -1
        if (s & m) == k:
            return i
        i += 1
        if i == cap:
            i = 0


@kernel
def rule4_insert(rules, cap, slot):
    """Store ``slot`` (a rule known to be absent; the caller checked there is room)."""
    i = _home(_mix(np.uint64(slot) & np.uint64(KEY4_MASK)), cap)
    while rules[i] != 0:
        i += 1
        if i == cap:
            i = 0
    rules[i] = np.uint64(slot)
    return i


@kernel
def rule4_remove(rules, cap, i):
    """Empty slot ``i`` and close the gap in its probe run."""
    m = np.uint64(KEY4_MASK)
    j = i
    while True:
        j += 1
        if j == cap:
            j = 0
        s = rules[j]
        if s == 0:
            break
        k = _home(_mix(s & m), cap)
        if _in_run(i, j, k):
            continue
        rules[i] = s
        i = j
    rules[i] = 0


# --- IPv6 ---------------------------------------------------------------------------------

@kernel(inline="always")
def _hash6(hi, lo, depth):
    return _mix(np.uint64(hi) * _C3 ^ _mix(np.uint64(lo) ^ np.uint64(depth)))


@kernel
def rule6_find(rkey, rval, cap, hi, lo, depth):
    """Slot of the rule (masked address ``hi``/``lo``, ``depth``), or -1."""
    uh = np.uint64(hi)
    ul = np.uint64(lo)
    i = _home(_hash6(uh, ul, depth), cap)
    while True:
        v = rval[i]
        if v == 0:
            return -1
        if (v & 0xFF) == depth and rkey[i, 0] == uh and rkey[i, 1] == ul:
            return i
        i += 1
        if i == cap:
            i = 0


@kernel
def rule6_insert(rkey, rval, cap, hi, lo, depth, next_hop):
    """Store a rule known to be absent (the caller checked there is room)."""
    uh = np.uint64(hi)
    ul = np.uint64(lo)
    i = _home(_hash6(uh, ul, depth), cap)
    while rval[i] != 0:
        i += 1
        if i == cap:
            i = 0
    rkey[i, 0] = uh
    rkey[i, 1] = ul
    rval[i] = np.uint32(depth | (next_hop << 8))
    return i


@kernel
def rule6_remove(rkey, rval, cap, i):
    """Empty slot ``i`` and close the gap in its probe run."""
    j = i
    while True:
        j += 1
        if j == cap:
            j = 0
        v = rval[j]
        if v == 0:
            break
        k = _home(_hash6(rkey[j, 0], rkey[j, 1], np.int64(v & 0xFF)), cap)
        if _in_run(i, j, k):
            continue
        rkey[i, 0] = rkey[j, 0]
        rkey[i, 1] = rkey[j, 1]
        rval[i] = v
        i = j
    rval[i] = 0
