"""IPv4 longest-prefix match, DIR-24-8, as DPDK 22.11's ``rte_lpm`` (``lib/lpm/rte_lpm.c``,
``rte_lpm.h``, ``rte_lpm_sse.h``).

The tables (tbl24, tbl8 groups) are written exactly as ``rte_lpm`` writes them -- same entry
words, same group chosen for a new tbl8 (the lowest free index), same recycling of a group on
delete -- so every lookup, bulk or not, returns what DPDK's returns, raw bits included.  What
differs is how rules are found: a hash (:mod:`.rules`) instead of per-depth linear scans, and a
bitmap of used groups instead of a scan of every group's first entry.

Every kernel takes the table block (:data:`.layout.LPM4`) first.  Return codes (negative errno,
as DPDK's): ``-EINVAL`` (-22) bad depth or, for delete, no such rule (DPDK 22.11 returns
-EINVAL there, not -ENOENT); ``-ENOSPC`` (-28) rule store full or no free tbl8 group (the table
is left as it was); ``-ENOENT`` (-2) lookup miss.  Next hops are taken modulo 2^24, as the
24-bit field of DPDK's entry does (DPDK's rule array keeps all 32 bits; here the rule keeps the
24 that reach the tables -- the facade refuses larger values).

Concurrency: one writer, any number of lock-free readers (threads or processes mapping a
shared table), and a lookup never returns a next hop that was not in force at some moment
during the lookup.  Writes keep every intermediate table valid, in ``rte_lpm``'s order: an
entry is one aligned 32-bit store; a new tbl8 group is filled before the tbl24 entry that
points to it is stored (release); a group is unhooked from tbl24 before it is freed.  What DPDK
leaves to RCU -- a reader that read a tbl24 pointer, then reads the group after it was freed
and reused -- is closed by a counter of freed groups (``meta[M_FREE_EPOCH]``): the writer bumps
it before it touches a freed group, and a lookup that reaches tbl8 re-reads the tbl24 entry and
the group entry between two reads of the counter, retrying if it moved (bulk lookups run their
whole loop between two reads).  Lookups that stop at tbl24 read nothing more than DPDK's.

The three lookups are inlined into every caller at the LLVM level (:func:`~pktbuf._jit.always_inline`),
as DPDK's are ``static inline`` in ``rte_lpm.h``: out of line, a call passes each array as seven
words on the stack and re-reads the table's pointers, which cost ``lpm_lookupx4`` more than its
four lookups.  The tbl8 retry path stays out of line.
"""
from __future__ import annotations

import numpy as np

from ..._jit import always_inline, kernel, never_inline
from ...hints import select_likely
from ...atomics import (
    fence_acquire,
    fence_release,
    load_acquire,
    load_relaxed,
    store_relaxed,
    store_release,
)
from ...errors import E_INVAL, E_NOENT, E_NOSPC
from .layout import (
    DEPTH_SHIFT,
    GROUP_ENTRIES,
    M_DEPTH0,
    M_FREE_EPOCH,
    M_FREE_HINT,
    M_MAX_RULES,
    M_NTBL8,
    M_NWORDS,
    M_RCAP,
    M_TBL8_USED,
    M_USED_RULES,
    NH_MASK,
    VALID,
    VALID_EXT,
    VALID_GROUP,
)
from .rules import rule4_find, rule4_insert, rule4_remove
from .x4 import tbl24_x4

__all__ = [
    "lpm_add",
    "lpm_add_bulk",
    "lpm_delete",
    "lpm_delete_all",
    "lpm_is_rule_present",
    "lpm_lookup",
    "lpm_lookup_bulk",
    "lpm_lookupx4",
]

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@kernel(inline="always")
def _mask(depth):
    return ((1 << depth) - 1) << (32 - depth)


# --- lookups: the hot path ----------------------------------------------------------------

@never_inline
@kernel
def _tbl8_read(lpm, ip):
    """The entry of ``ip`` once its tbl24 entry was a group pointer: tbl24 and the group read
    again between two acquire reads of the free counter, until no group was freed meanwhile
    (so the group read is the one tbl24 pointed to).  Never inlined (:func:`never_inline`): the
    rare path stays out of the callers' loops."""
    m = lpm.meta
    t24 = lpm.tbl24
    t8 = lpm.tbl8
    i24 = (ip >> 8) & 0xFFFFFF
    while True:
        s = load_acquire(m, M_FREE_EPOCH)
        e = load_acquire(t24, i24)
        if (e & VALID_EXT) != VALID_EXT:
            return e                  # unhooked meanwhile: the tbl24 entry is the answer
        f = load_acquire(t8, (np.int64(e) & NH_MASK) * GROUP_ENTRIES + (ip & 0xFF))
        if load_acquire(m, M_FREE_EPOCH) == s:
            return f


@always_inline
@kernel
def lpm_lookup(lpm, ip):
    """Next hop of ``ip`` (an IPv4 address as an integer, host order): ``>= 0`` on a hit,
    ``-ENOENT`` (-2) on a miss.  Two dependent loads at most (``rte_lpm_lookup``)."""
    e = lpm.tbl24[(ip >> 8) & 0xFFFFFF]
    # a pointer (valid + valid_group) sends the lookup to the tbl8 group: rare for real tables
    if (e & VALID_EXT) == VALID_EXT:
        e = _tbl8_read(lpm, ip)
    # a hit is the common case: a predicted branch, not a conditional move that holds the
    # result back until the entry's load completes (:mod:`pktbuf.hints`)
    return select_likely((e & VALID) != 0, np.int64(e) & NH_MASK, np.int64(E_NOENT))


@always_inline
@kernel
def lpm_lookup_bulk(lpm, ips, next_hops, n):
    """``rte_lpm_lookup_bulk``: ``next_hops[i]`` = the raw 32-bit entry found for ``ips[i]``
    (a hit has bit 24, ``0x01000000``, set; next hop in bits 0-23), ``i < n``.  Returns 0, or
    ``-EINVAL`` if ``n`` is negative or exceeds either array."""
    if n < 0 or n > ips.shape[0] or n > next_hops.shape[0]:
        return E_INVAL
    t24 = lpm.tbl24
    t8 = lpm.tbl8
    m = lpm.meta
    # the loop as rte_lpm_lookup_bulk's, between two reads of the free counter: redone if a
    # group was freed meanwhile (a tbl8 read may have been of a reused group)
    while True:
        s = load_acquire(m, M_FREE_EPOCH)
        for i in range(n):
            ip = np.int64(ips[i])
            e = t24[(ip >> 8) & 0xFFFFFF]
            if (e & VALID_EXT) == VALID_EXT:
                e = t8[(np.int64(e) & NH_MASK) * GROUP_ENTRIES + (ip & 0xFF)]
            next_hops[i] = e
        fence_acquire()
        if load_relaxed(m, M_FREE_EPOCH) == s:
            return 0


@never_inline
@kernel
def _x4_tbl8(lpm, ips, hop, defv):
    """``lpm_lookupx4`` once some tbl24 entry was a group pointer: all four again, tbl24 and
    tbl8, between two reads of the free counter.  Out of line: the rare path keeps its
    registers out of the callers' loops."""
    t24 = lpm.tbl24
    t8 = lpm.tbl8
    m = lpm.meta
    a0 = np.int64(ips[0]) & 0xFFFFFFFF
    a1 = np.int64(ips[1]) & 0xFFFFFFFF
    a2 = np.int64(ips[2]) & 0xFFFFFFFF
    a3 = np.int64(ips[3]) & 0xFFFFFFFF
    while True:
        s = load_acquire(m, M_FREE_EPOCH)
        e0 = np.int64(t24[a0 >> 8])
        e1 = np.int64(t24[a1 >> 8])
        e2 = np.int64(t24[a2 >> 8])
        e3 = np.int64(t24[a3 >> 8])
        if (e0 & VALID_EXT) == VALID_EXT:
            e0 = np.int64(t8[(e0 & NH_MASK) * GROUP_ENTRIES + (a0 & 0xFF)])
        if (e1 & VALID_EXT) == VALID_EXT:
            e1 = np.int64(t8[(e1 & NH_MASK) * GROUP_ENTRIES + (a1 & 0xFF)])
        if (e2 & VALID_EXT) == VALID_EXT:
            e2 = np.int64(t8[(e2 & NH_MASK) * GROUP_ENTRIES + (a2 & 0xFF)])
        if (e3 & VALID_EXT) == VALID_EXT:
            e3 = np.int64(t8[(e3 & NH_MASK) * GROUP_ENTRIES + (a3 & 0xFF)])
        fence_acquire()
        if load_relaxed(m, M_FREE_EPOCH) == s:
            break
    d = np.int64(defv) & 0xFFFFFFFF
    hop[0] = (e0 & NH_MASK) if e0 & VALID else d
    hop[1] = (e1 & NH_MASK) if e1 & VALID else d
    hop[2] = (e2 & NH_MASK) if e2 & VALID else d
    hop[3] = (e3 & NH_MASK) if e3 & VALID else d


@always_inline
@kernel
def lpm_lookupx4(lpm, ips, hop, defv):
    """``rte_lpm_lookupx4``: the next hops of ``ips[0:4]`` into ``hop[0:4]``, ``defv`` (a
    32-bit value, as DPDK's ``uint32_t``) for a miss.  Returns 0, or ``-EINVAL`` if either
    array has fewer than 4 elements.

    The four tbl24 reads and the result are vector code (:func:`.x4.tbl24_x4`); only when an
    entry points to a tbl8 group are all four looked up again, out of line."""
    if ips.shape[0] < 4 or hop.shape[0] < 4:
        return E_INVAL
    if tbl24_x4(lpm.tbl24, ips, 0, hop, defv):
        _x4_tbl8(lpm, ips, hop, defv)
    return 0


# --- tbl8 groups --------------------------------------------------------------------------

@kernel
def _tbl8_alloc(lpm):
    """The lowest free group (DPDK scans entry 0 of every group from group 0; the bitmap finds
    the same one), zeroed, entry 0 marked in use.  -ENOSPC if none."""
    m = lpm.meta
    used = lpm.used8
    nw = m[M_NWORDS]
    w = m[M_FREE_HINT]
    while w < nw and used[w] == _ALL:
        w += 1
    m[M_FREE_HINT] = w
    if w >= nw:
        return E_NOSPC
    word = used[w]
    free = ~word
    b = 0
    while (free >> np.uint64(b)) & np.uint64(1) == 0:
        b += 1
    g = w * 64 + b
    if g >= m[M_NTBL8]:
        return E_NOSPC
    used[w] = word | (np.uint64(1) << np.uint64(b))
    m[M_TBL8_USED] += 1
    t8 = lpm.tbl8
    base = g * GROUP_ENTRIES
    for j in range(base, base + GROUP_ENTRIES):
        t8[j] = 0
    t8[base] = VALID_GROUP
    return g


@kernel
def _bump_free_epoch(m):
    """Tell readers a group is about to be reused: the counter's store is ordered before every
    later store (release fence), so a reader that sees any change to the freed group also sees
    the new count and retries."""
    store_relaxed(m, M_FREE_EPOCH, m[M_FREE_EPOCH] + 1)
    fence_release()


@kernel
def _tbl8_free(lpm, g):
    """Free group ``g``, which no tbl24 entry points to any more."""
    _bump_free_epoch(lpm.meta)
    lpm.tbl8[g * GROUP_ENTRIES] = 0           # DPDK clears entry 0 only
    w = g >> 6
    lpm.used8[w] &= ~(np.uint64(1) << np.uint64(g & 63))
    m = lpm.meta
    m[M_TBL8_USED] -= 1
    m[M_FREE_HINT] = min(m[M_FREE_HINT], w)


# --- add ----------------------------------------------------------------------------------

@kernel
def _add_small(lpm, ip, depth, nh):
    t24 = lpm.tbl24
    t8 = lpm.tbl8
    leaf = np.uint32((depth << DEPTH_SHIFT) | VALID | nh)
    leaf8 = np.uint32((depth << DEPTH_SHIFT) | VALID_EXT | nh)    # tbl8: valid_group set
    start = ip >> 8
    for i in range(start, start + (1 << (24 - depth))):
        e = np.int64(t24[i])
        if (e & VALID) == 0 or ((e & VALID_GROUP) == 0 and (e >> DEPTH_SHIFT) <= depth):
            store_release(t24, i, leaf)
        elif e & VALID_GROUP:
            base = (e & NH_MASK) * GROUP_ENTRIES
            for j in range(base, base + GROUP_ENTRIES):
                f = np.int64(t8[j])
                if (f & VALID) == 0 or (f >> DEPTH_SHIFT) <= depth:
                    t8[j] = leaf8


@kernel
def _add_big(lpm, ip, depth, nh):
    """depth > 24; the caller made sure a group is free if one is needed."""
    t24 = lpm.tbl24
    t8 = lpm.tbl8
    i24 = ip >> 8
    e = np.int64(t24[i24])
    rng = 1 << (32 - depth)
    top = (depth << DEPTH_SHIFT) | VALID | nh
    if (e & VALID_EXT) != VALID_EXT:
        g = _tbl8_alloc(lpm)
        base = g * GROUP_ENTRIES
        if e & VALID:
            # a leaf: the new group starts as 256 copies of it (valid_group bits kept as found)
            fill = (e & ~np.int64(VALID_GROUP)) & 0xFFFFFFFF
            for j in range(base, base + GROUP_ENTRIES):
                t8[j] = np.uint32(fill | (np.int64(t8[j]) & VALID_GROUP))
        first = base + (ip & 0xFF)
        for j in range(first, first + rng):
            t8[j] = np.uint32(top | (np.int64(t8[j]) & VALID_GROUP))
        store_release(t24, i24, np.uint32(VALID_EXT | g))      # publish after the group
    else:
        first = (e & NH_MASK) * GROUP_ENTRIES + (ip & 0xFF)
        for j in range(first, first + rng):
            f = np.int64(t8[j])
            if (f & VALID) == 0 or (f >> DEPTH_SHIFT) <= depth:
                t8[j] = np.uint32(top | (f & VALID_GROUP))


@kernel
def lpm_add(lpm, ip, depth, next_hop):
    """``rte_lpm_add``: add (or re-point) the rule ``ip/depth`` -> ``next_hop``.

    Returns 0 (also when the same rule with the same next hop exists), ``-EINVAL`` for a depth
    outside 1..32, ``-ENOSPC`` when the rule store holds ``max_rules`` rules or a depth > 24
    rule needs a tbl8 group and none is free (the table is unchanged)."""
    if depth < 1 or depth > 32:
        return E_INVAL
    ip = ip & _mask(depth) & 0xFFFFFFFF
    nh = next_hop & NH_MASK
    m = lpm.meta
    rules = lpm.rules
    cap = m[M_RCAP]
    key = ip | (depth << 32)
    i = rule4_find(rules, cap, key)
    if i >= 0:
        if np.int64(rules[i] >> np.uint64(38)) == nh:
            return 0
        rules[i] = np.uint64(key | (nh << 38))
    else:
        if m[M_USED_RULES] >= m[M_MAX_RULES]:
            return E_NOSPC
        if depth > 24 and ((np.int64(lpm.tbl24[ip >> 8]) & VALID_EXT) != VALID_EXT
                           and m[M_TBL8_USED] >= m[M_NTBL8]):
            return E_NOSPC
        rule4_insert(rules, cap, key | (nh << 38))
        m[M_USED_RULES] += 1
        m[M_DEPTH0 + depth] += 1
    if depth <= 24:
        _add_small(lpm, ip, depth, nh)
    else:
        _add_big(lpm, ip, depth, nh)
    return 0


@kernel
def lpm_add_bulk(lpm, ips, depths, next_hops, n, progress):
    """``n`` adds in order, as :func:`lpm_add` each; after each one ``progress[0]`` is raised
    by one with a release store, so a concurrent reader that reads it (acquire) before a
    lookup knows which adds were in force.  Stops at the first failing add.  Returns 0, the
    first failure's code, or ``-EINVAL`` if ``n`` is negative or exceeds an array or
    ``progress`` is empty."""
    if n < 0 or n > ips.shape[0] or n > depths.shape[0] or n > next_hops.shape[0] \
            or progress.shape[0] < 1:
        return E_INVAL
    for i in range(n):
        rc = lpm_add(lpm, np.int64(ips[i]), np.int64(depths[i]), np.int64(next_hops[i]))
        if rc < 0:
            return rc
        store_release(progress, 0, progress[0] + 1)
    return 0


# --- delete -------------------------------------------------------------------------------

@kernel
def _cover(lpm, ip, depth):
    """The longest rule shorter than ``depth`` that covers ``ip``: ``(depth, next_hop)``, or
    ``(0, 0)``.  Depths without rules are skipped."""
    m = lpm.meta
    rules = lpm.rules
    cap = m[M_RCAP]
    for d in range(depth - 1, 0, -1):
        if m[M_DEPTH0 + d] == 0:
            continue
        i = rule4_find(rules, cap, (ip & _mask(d)) | (d << 32))
        if i >= 0:
            return d, np.int64(rules[i] >> np.uint64(38))
    return 0, 0


@kernel
def _delete_small(lpm, ip, depth, sd, snh):
    t24 = lpm.tbl24
    t8 = lpm.tbl8
    start = ip >> 8
    leaf = np.uint32((sd << DEPTH_SHIFT) | VALID | snh) if sd else np.uint32(0)
    leaf8 = np.uint32((sd << DEPTH_SHIFT) | VALID_EXT | snh)
    for i in range(start, start + (1 << (24 - depth))):
        e = np.int64(t24[i])
        if (e & VALID_GROUP) == 0:
            if (e >> DEPTH_SHIFT) <= depth:
                store_release(t24, i, leaf)
        else:
            base = (e & NH_MASK) * GROUP_ENTRIES
            for j in range(base, base + GROUP_ENTRIES):
                f = np.int64(t8[j])
                if (f >> DEPTH_SHIFT) <= depth:
                    t8[j] = leaf8 if sd else np.uint32(f & ~np.int64(VALID))


@kernel
def _recycle_check(t8, base):
    """DPDK's ``tbl8_recycle_check``: -1 if the group must stay; 0 if every entry is invalid
    (free it, tbl24 loses its valid bit); 1 if entry 0 is a depth <= 24 route and every entry
    has its depth (fold it back into a tbl24 leaf)."""
    e0 = np.int64(t8[base])
    if e0 & VALID:
        d0 = e0 >> DEPTH_SHIFT
        if d0 > 24:
            return -1
        for j in range(base + 1, base + GROUP_ENTRIES):
            if (np.int64(t8[j]) >> DEPTH_SHIFT) != d0:
                return -1
        return 1
    for j in range(base + 1, base + GROUP_ENTRIES):
        if t8[j] & VALID:
            return -1
    return 0


@kernel
def _delete_big(lpm, ip, depth, sd, snh):
    t24 = lpm.tbl24
    t8 = lpm.tbl8
    i24 = ip >> 8
    e = np.int64(t24[i24])
    g = e & NH_MASK
    base = g * GROUP_ENTRIES
    first = base + (ip & 0xFF)
    new = np.uint32((sd << DEPTH_SHIFT) | VALID | snh | (np.int64(t8[base]) & VALID_GROUP))
    for j in range(first, first + (1 << (32 - depth))):
        f = np.int64(t8[j])
        if (f >> DEPTH_SHIFT) <= depth:
            t8[j] = new if sd else np.uint32(f & ~np.int64(VALID))
    r = _recycle_check(t8, base)
    if r == 0:
        store_release(t24, i24, np.uint32(e & ~np.int64(VALID)))
        _tbl8_free(lpm, g)
    elif r == 1:
        e0 = np.int64(t8[base])
        store_release(t24, i24, np.uint32((e0 & ~np.int64(VALID_GROUP)) & 0xFFFFFFFF))
        _tbl8_free(lpm, g)


@kernel
def lpm_delete(lpm, ip, depth):
    """``rte_lpm_delete``: remove the rule ``ip/depth``; the addresses it covered fall back to
    the longest shorter rule that covers them (or become misses).  Returns 0, or ``-EINVAL``
    for a bad depth or a rule that does not exist (as DPDK 22.11)."""
    if depth < 1 or depth > 32:
        return E_INVAL
    ip = ip & _mask(depth) & 0xFFFFFFFF
    m = lpm.meta
    i = rule4_find(lpm.rules, m[M_RCAP], ip | (depth << 32))
    if i < 0:
        return E_INVAL
    rule4_remove(lpm.rules, m[M_RCAP], i)
    m[M_USED_RULES] -= 1
    m[M_DEPTH0 + depth] -= 1
    sd, snh = _cover(lpm, ip, depth)
    if depth <= 24:
        _delete_small(lpm, ip, depth, sd, snh)
    else:
        _delete_big(lpm, ip, depth, sd, snh)
    return 0


@kernel
def lpm_is_rule_present(lpm, ip, depth):
    """``rte_lpm_is_rule_present``: ``(1, next_hop)`` if the rule ``ip/depth`` exists,
    ``(0, 0)`` if not, ``(-EINVAL, 0)`` for a depth outside 1..32."""
    if depth < 1 or depth > 32:
        return E_INVAL, 0
    ip = ip & _mask(depth) & 0xFFFFFFFF
    rules = lpm.rules
    i = rule4_find(rules, lpm.meta[M_RCAP], ip | (depth << 32))
    if i < 0:
        return 0, 0
    return 1, np.int64(rules[i] >> np.uint64(38))


@kernel
def lpm_delete_all(lpm):
    """``rte_lpm_delete_all``: no rules, every table entry zero.  Returns 0."""
    m = lpm.meta
    t24 = lpm.tbl24
    for i in range(t24.shape[0]):
        t24[i] = 0
    _bump_free_epoch(m)                       # every group is free from here on
    t8 = lpm.tbl8
    for i in range(t8.shape[0]):
        t8[i] = 0
    rules = lpm.rules
    for i in range(rules.shape[0]):
        rules[i] = 0
    used = lpm.used8
    for i in range(used.shape[0]):
        used[i] = 0
    for d in range(33):
        m[M_DEPTH0 + d] = 0
    m[M_USED_RULES] = 0
    m[M_TBL8_USED] = 0
    m[M_FREE_HINT] = 0
    return 0
