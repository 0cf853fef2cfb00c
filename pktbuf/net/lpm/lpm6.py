"""IPv6 longest-prefix match with DPDK 22.11's ``rte_lpm6`` semantics (``lib/lpm/rte_lpm6.c``).

Same structure as DPDK's: a 2^24-entry tbl24 indexed by address bytes 0-2, then one tbl8 level
(a group of 256 entries) per further byte, so a lookup is at most 14 dependent loads and a /48
costs 3 groups, a /64 5.  A group exists exactly while some rule ends in it or below it (a
reference count per group: rules ending there plus child groups), groups come from a stack of
free indices, and add first counts the groups it will need and fails with ``-ENOSPC`` before
touching anything -- all as ``rte_lpm6``, so the same rules use the same number of groups and
fail at the same point.  Rules live in an open-addressing hash in the block (:mod:`.rules`)
where DPDK uses an ``rte_hash``; the less-specific rule of a deleted one is found by probing
only the depths that hold rules.  Recursion (DPDK's ``expand_rule``, ``remove_tbl``) is a loop
over an explicit stack here.

Addresses are 16-byte ``uint8`` arrays in network order (a row of an ``(n, 16)`` array).
Return codes: ``-EINVAL`` (-22) bad depth or an address array shorter than 16; ``-ENOSPC``
(-28) rule store full or not enough free groups (nothing changed); ``-ENOENT`` (-2) delete of
an absent rule, lookup miss.  Next hops are taken modulo 2^21 (the entry's field width, as
DPDK truncates them; the facade refuses larger values).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import store_release
from ...errors import E_INVAL, E_NOENT, E_NOSPC
from .layout import (DEPTH6_SHIFT, EXT6, GROUP_ENTRIES, H_ENTRY, H_OWNER, H_REF, M_DEPTH0,
                     M_MAX_RULES, M_NTBL8, M_RCAP, M_TBL8_USED, M_USED_RULES, NH6_MASK,
                     OWNER_TBL24, VALID6, VALID_EXT6, VALID_GROUP6)
from .rules import rule6_find, rule6_insert, rule6_remove

__all__ = ["lpm6_add", "lpm6_delete", "lpm6_is_rule_present", "lpm6_delete_all", "lpm6_lookup",
           "lpm6_lookup_bulk"]

_U64 = np.uint64
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_POINTER = VALID6 | VALID_GROUP6 | EXT6


@kernel(inline="always")
def _addr(ip):
    hi = _U64(0)
    lo = _U64(0)
    for k in range(8):
        hi = (hi << _U64(8)) | _U64(ip[k])
        lo = (lo << _U64(8)) | _U64(ip[8 + k])
    return hi, lo


@kernel(inline="always")
def _masked(hi, lo, depth):
    """The address with its bits beyond ``depth`` (1..128) cleared."""
    if depth >= 64:
        if depth == 64:
            return hi, _U64(0)
        return hi, lo & (_ONES << _U64(128 - depth))
    return hi & (_ONES << _U64(64 - depth)), _U64(0)


@kernel(inline="always")
def _byte(hi, lo, k):
    if k < 8:
        return np.int64((hi >> _U64(56 - 8 * k)) & _U64(0xFF))
    return np.int64((lo >> _U64(56 - 8 * (k - 8))) & _U64(0xFF))


@kernel(inline="always")
def _leaf(depth, nh):
    return np.uint32((depth << DEPTH6_SHIFT) | VALID6 | VALID_GROUP6 | nh)


# --- lookups ------------------------------------------------------------------------------

@kernel
def lpm6_lookup(lpm, ip):
    """Next hop of the address ``ip`` (16 bytes): ``>= 0`` on a hit, ``-ENOENT`` on a miss,
    ``-EINVAL`` if ``ip`` has fewer than 16 bytes (``rte_lpm6_lookup``)."""
    if ip.shape[0] < 16:
        return E_INVAL
    e = lpm.tbl24[(np.int64(ip[0]) << 16) | (np.int64(ip[1]) << 8) | np.int64(ip[2])]
    k = 3
    while (e & VALID_EXT6) == VALID_EXT6:
        e = lpm.tbl8[(np.int64(e) & NH6_MASK) * GROUP_ENTRIES + np.int64(ip[k])]
        k += 1
    if e & VALID6:
        return np.int64(e) & NH6_MASK
    return E_NOENT


@kernel
def lpm6_lookup_bulk(lpm, ips, next_hops, n):
    """``rte_lpm6_lookup_bulk_func``: ``next_hops[i]`` = next hop of ``ips[i]`` (an ``(n, 16)``
    uint8 array), -1 on a miss.  Returns 0, or ``-EINVAL`` if the arrays are too small."""
    if n < 0 or n > ips.shape[0] or n > next_hops.shape[0] or ips.shape[1] < 16:
        return E_INVAL
    t24 = lpm.tbl24
    t8 = lpm.tbl8
    for i in range(n):
        e = t24[(np.int64(ips[i, 0]) << 16) | (np.int64(ips[i, 1]) << 8) | np.int64(ips[i, 2])]
        k = 3
        while (e & VALID_EXT6) == VALID_EXT6:
            e = t8[(np.int64(e) & NH6_MASK) * GROUP_ENTRIES + np.int64(ips[i, k])]
            k += 1
        next_hops[i] = (np.int64(e) & NH6_MASK) if e & VALID6 else -1
    return 0


# --- groups -------------------------------------------------------------------------------

@kernel(inline="always")
def _get_entry(lpm, level, idx):
    if level == 0:
        return np.int64(lpm.tbl24[idx])
    return np.int64(lpm.tbl8[idx])


@kernel(inline="always")
def _set_entry(lpm, level, idx, v):
    if level == 0:
        store_release(lpm.tbl24, idx, np.uint32(v))
    else:
        store_release(lpm.tbl8, idx, np.uint32(v))


@kernel
def _group_get(lpm, owner, owner_idx):
    """Pop a free group, header = (owner group or -1, owner entry index, 0)."""
    m = lpm.meta
    g = np.int64(lpm.pool[m[M_TBL8_USED]])
    m[M_TBL8_USED] += 1
    h = lpm.hdr
    h[g, H_OWNER] = owner
    h[g, H_ENTRY] = owner_idx
    h[g, H_REF] = 0
    return g


@kernel
def _group_put(lpm, g):
    m = lpm.meta
    m[M_TBL8_USED] -= 1
    lpm.pool[m[M_TBL8_USED]] = g


@kernel
def _expand(lpm, g, old_depth, new):
    """DPDK's ``expand_rule`` over the subtree of group ``g``: every entry that is invalid or a
    leaf of depth <= ``old_depth`` becomes ``new``; pointers are followed."""
    t8 = lpm.tbl8
    st = lpm.stack
    sp = 1
    st[0] = g
    while sp > 0:
        sp -= 1
        base = np.int64(st[sp]) * GROUP_ENTRIES
        for j in range(base, base + GROUP_ENTRIES):
            f = np.int64(t8[j])
            if (f & EXT6) == 0:
                if (f & VALID6) == 0 or ((f >> DEPTH6_SHIFT) & 0xFF) <= old_depth:
                    t8[j] = new
            else:
                st[sp] = f & NH6_MASK
                sp += 1


@kernel
def _groups_needed(lpm, hi, lo, depth):
    """``simulate_add``: how many new groups adding ``hi/lo/depth`` takes."""
    e = np.int64(lpm.tbl24[np.int64(hi >> _U64(40))])
    bits = 24
    k = 3
    while depth > bits:
        if (e & VALID_EXT6) != VALID_EXT6:
            return (depth - bits + 7) >> 3
        e = np.int64(lpm.tbl8[(e & NH6_MASK) * GROUP_ENTRIES + _byte(hi, lo, k)])
        bits += 8
        k += 1
    return 0


# --- add ----------------------------------------------------------------------------------

@kernel
def lpm6_add(lpm, ip, depth, next_hop):
    """``rte_lpm6_add``: add (or re-point) ``ip/depth`` -> ``next_hop``.  Returns 0,
    ``-EINVAL`` (depth outside 1..128, short address), ``-ENOSPC`` (not enough free groups, or
    ``max_rules`` rules and this one is new); on an error nothing changed."""
    if depth < 1 or depth > 128 or ip.shape[0] < 16:
        return E_INVAL
    nh = next_hop & NH6_MASK
    hi, lo = _addr(ip)
    hi, lo = _masked(hi, lo, depth)
    m = lpm.meta
    if lpm.meta[M_NTBL8] - m[M_TBL8_USED] < _groups_needed(lpm, hi, lo, depth):
        return E_NOSPC
    cap = m[M_RCAP]
    i = rule6_find(lpm.rkey, lpm.rval, cap, hi, lo, depth)
    is_new = i < 0
    if is_new:
        if m[M_USED_RULES] >= m[M_MAX_RULES]:
            return E_NOSPC
        rule6_insert(lpm.rkey, lpm.rval, cap, hi, lo, depth, nh)
        m[M_USED_RULES] += 1
        m[M_DEPTH0 + depth] += 1
    else:
        lpm.rval[i] = np.uint32(depth | (nh << 8))
    t8 = lpm.tbl8
    h = lpm.hdr
    level = 0
    owner = OWNER_TBL24
    idx = np.int64(hi >> _U64(40))
    bits = 24
    k = 3
    while depth > bits:
        # not the last level: make sure the entry points to a group
        e = _get_entry(lpm, level, idx)
        if (e & EXT6) == 0:
            g = _group_get(lpm, owner, idx)
            base = g * GROUP_ENTRIES
            # an invalid entry gets an empty group; a leaf is pushed down into all 256
            fill = _leaf((e >> DEPTH6_SHIFT) & 0xFF, e & NH6_MASK) if e & VALID6 else 0
            for j in range(base, base + GROUP_ENTRIES):
                t8[j] = fill
            _set_entry(lpm, level, idx, _POINTER | g)
            if owner != OWNER_TBL24:
                h[owner, H_REF] += 1
            e = _POINTER | g
        owner = e & NH6_MASK
        idx = owner * GROUP_ENTRIES + _byte(hi, lo, k)
        level += 1
        bits += 8
        k += 1
    leaf = _leaf(depth, nh)
    for j in range(idx, idx + (1 << (bits - depth))):
        e = _get_entry(lpm, level, j)
        if (e & EXT6) == 0:
            if (e & VALID6) == 0 or ((e >> DEPTH6_SHIFT) & 0xFF) <= depth:
                _set_entry(lpm, level, j, leaf)
        else:
            _expand(lpm, e & NH6_MASK, depth, leaf)
    if owner != OWNER_TBL24 and is_new:
        h[owner, H_REF] += 1
    return 0


# --- delete -------------------------------------------------------------------------------

@kernel
def _less_specific(lpm, hi, lo, depth):
    """The longest rule shorter than ``depth`` covering the address: ``(depth, nh)`` or (0, 0)."""
    m = lpm.meta
    cap = m[M_RCAP]
    for d in range(depth - 1, 0, -1):
        if m[M_DEPTH0 + d] == 0:
            continue
        mh, ml = _masked(hi, lo, d)
        i = rule6_find(lpm.rkey, lpm.rval, cap, mh, ml, d)
        if i >= 0:
            return d, np.int64(lpm.rval[i] >> 8)
    return 0, 0


@kernel
def _remove_groups(lpm, g, repl):
    """DPDK's ``remove_tbl``: group ``g`` has no rule left; unlink it (and every ancestor that
    thereby loses its last reference) and give the topmost owner entry ``repl``."""
    h = lpm.hdr
    top = g
    while True:
        o = h[top, H_OWNER]
        if o == OWNER_TBL24:
            break
        h[o, H_REF] -= 1
        if h[o, H_REF] != 0:
            break
        top = o
    o = h[top, H_OWNER]
    if o == OWNER_TBL24:
        store_release(lpm.tbl24, h[top, H_ENTRY], repl)
    else:
        store_release(lpm.tbl8, h[top, H_ENTRY], repl)
    x = g
    while True:
        nxt = h[x, H_OWNER]
        _group_put(lpm, x)
        if x == top:
            break
        x = nxt


@kernel
def lpm6_delete(lpm, ip, depth):
    """``rte_lpm6_delete``: remove ``ip/depth``; the space it covered falls back to the longest
    shorter rule covering it.  Returns 0, ``-EINVAL`` (bad depth, short address) or
    ``-ENOENT`` (no such rule)."""
    if depth < 1 or depth > 128 or ip.shape[0] < 16:
        return E_INVAL
    hi, lo = _addr(ip)
    hi, lo = _masked(hi, lo, depth)
    m = lpm.meta
    i = rule6_find(lpm.rkey, lpm.rval, m[M_RCAP], hi, lo, depth)
    if i < 0:
        return E_NOENT
    rule6_remove(lpm.rkey, lpm.rval, m[M_RCAP], i)
    m[M_USED_RULES] -= 1
    m[M_DEPTH0 + depth] -= 1
    # the rule's cells: every level above its last one is a pointer (the rule exists)
    level = 0
    owner = OWNER_TBL24
    idx = np.int64(hi >> _U64(40))
    bits = 24
    k = 3
    while depth > bits:
        e = _get_entry(lpm, level, idx)
        owner = e & NH6_MASK
        idx = owner * GROUP_ENTRIES + _byte(hi, lo, k)
        level += 1
        bits += 8
        k += 1
    sd, snh = _less_specific(lpm, hi, lo, depth)
    repl = _leaf(sd, snh) if sd else np.uint32(0)
    if owner != OWNER_TBL24:
        lpm.hdr[owner, H_REF] -= 1
        if lpm.hdr[owner, H_REF] == 0:
            _remove_groups(lpm, owner, repl)
            return 0
    for j in range(idx, idx + (1 << (bits - depth))):
        e = _get_entry(lpm, level, j)
        if e & EXT6:
            _expand(lpm, e & NH6_MASK, depth, repl)
        elif ((e >> DEPTH6_SHIFT) & 0xFF) == depth:
            _set_entry(lpm, level, j, repl)
    return 0


@kernel
def lpm6_is_rule_present(lpm, ip, depth):
    """``rte_lpm6_is_rule_present``: ``(1, next_hop)``, ``(0, 0)``, or ``(-EINVAL, 0)``."""
    if depth < 1 or depth > 128 or ip.shape[0] < 16:
        return E_INVAL, 0
    hi, lo = _addr(ip)
    hi, lo = _masked(hi, lo, depth)
    i = rule6_find(lpm.rkey, lpm.rval, lpm.meta[M_RCAP], hi, lo, depth)
    if i < 0:
        return 0, 0
    return 1, np.int64(lpm.rval[i] >> 8)


@kernel
def lpm6_delete_all(lpm):
    """``rte_lpm6_delete_all``: no rules, every entry zero, every group free.  Returns 0."""
    m = lpm.meta
    t24 = lpm.tbl24
    for i in range(t24.shape[0]):
        t24[i] = 0
    t8 = lpm.tbl8
    for i in range(t8.shape[0]):
        t8[i] = 0
    pool = lpm.pool
    for i in range(pool.shape[0]):
        pool[i] = i
    rval = lpm.rval
    for i in range(rval.shape[0]):
        rval[i] = 0
    for d in range(129):
        m[M_DEPTH0 + d] = 0
    m[M_USED_RULES] = 0
    m[M_TBL8_USED] = 0
    return 0
