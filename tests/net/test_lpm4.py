"""IPv4 LPM kernels (pktbuf.net.lpm.lpm4) against the naive model, and the raw table words
DPDK 22.11's rte_lpm writes (docs/lpm.md)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from pktbuf.net.lpm import layout as L
from pktbuf.net.lpm.lpm4 import (lpm_add, lpm_delete, lpm_delete_all, lpm_is_rule_present,
                                 lpm_lookup, lpm_lookup_bulk, lpm_lookupx4)
from pktbuf.net.lpm.naive import NaiveLpm

EINVAL, ENOENT, ENOSPC = -22, -2, -28
BASES = [0x0A000000, 0x0A010200, 0x0A0102C0, 0xC0A80000, 0xC0A86400, 0x00000000, 0xFFFFFF00]


def ip(s: str) -> int:
    a, b, c, d = map(int, s.split("."))
    return a << 24 | b << 16 | c << 8 | d


def probes(rules, rng, n=200):
    """Addresses at, inside and around every rule, plus random ones."""
    out = [int(x) for x in rng.integers(0, 1 << 32, n, dtype=np.uint64)]
    for (a, d) in rules:
        span = 1 << (32 - d)
        out += [a, (a + span - 1) & 0xFFFFFFFF, (a + span) & 0xFFFFFFFF, (a - 1) & 0xFFFFFFFF,
                (a + int(rng.integers(0, span))) & 0xFFFFFFFF]
    return np.array(out, np.uint32)


def check_same(t, model, rules, rng):
    ips = probes(rules, rng)
    raw = np.zeros(ips.size, np.uint32)
    assert lpm_lookup_bulk(t, ips, raw, ips.size) == 0
    x4 = np.zeros(4, np.uint32)
    for k, a in enumerate(ips.tolist()):
        want = model.lookup(a)
        got = lpm_lookup(t, a)
        assert got == want, (hex(a), got, want)
        assert bool(raw[k] & L.VALID) == (want >= 0)
        if want >= 0:
            assert raw[k] & L.NH_MASK == want
    for k in range(0, ips.size - 3, 4):
        assert lpm_lookupx4(t, ips[k:k + 4], x4, 0xDEADBEEF) == 0
        for j in range(4):
            w = model.lookup(int(ips[k + j]))
            assert x4[j] == (w if w >= 0 else 0xDEADBEEF)
    assert t.meta[L.M_TBL8_USED] == model.groups_used()
    assert t.meta[L.M_USED_RULES] == len(model.rules)


rule_st = st.tuples(st.sampled_from(BASES), st.integers(0, (1 << 32) - 1),
                    st.integers(1, 32), st.integers(0, (1 << 24) - 1))


def _ip_of(base, noise, depth):
    # near a base most of the time, so that prefixes overlap
    keep = min(depth, 30)
    return (base & ~((1 << (32 - keep)) - 1) | (noise & ((1 << (32 - keep)) - 1))) & 0xFFFFFFFF


@settings(max_examples=30, deadline=None)
@given(st.lists(rule_st, min_size=1, max_size=40), st.integers(0, 2**32 - 1),
       st.integers(2, 12))
def test_random_rules_add_delete_against_model(specs, seed, ngroups):
    rng = np.random.default_rng(seed)
    t = L.create4(30, ngroups)
    model = NaiveLpm(30, ngroups)
    added = []
    for base, noise, d, nh in specs:
        a = _ip_of(base, noise, d)
        r = lpm_add(t, a, d, nh)
        assert r == model.add(a, d, nh), (hex(a), d)
        if r == 0:
            added.append((a & ((1 << d) - 1) << (32 - d), d))
    check_same(t, model, added, rng)
    order = rng.permutation(len(added))
    for k, i in enumerate(order):
        a, d = added[i]
        assert lpm_delete(t, a, d) == model.delete(a, d)
        if k % 5 == 0:
            check_same(t, model, added, rng)
    check_same(t, model, added, rng)
    # everything deleted: the tables are empty again (tbl24 entries may keep stale group bits
    # after a recycle, as DPDK's do, but nothing is valid)
    assert not (t.tbl24 & L.VALID).any()
    assert t.meta[L.M_TBL8_USED] == 0 and t.meta[L.M_USED_RULES] == 0


def test_covering_prefix_reexpanded_on_delete():
    t = L.create4(100, 4)
    assert lpm_add(t, ip("10.0.0.0"), 8, 1) == 0
    assert lpm_add(t, ip("10.1.0.0"), 16, 2) == 0
    assert lpm_add(t, ip("10.1.2.0"), 24, 3) == 0
    assert lpm_add(t, ip("10.1.2.128"), 25, 4) == 0
    assert lpm_lookup(t, ip("10.1.2.200")) == 4
    assert lpm_delete(t, ip("10.1.2.128"), 25) == 0
    # the /24 covers again; its group folded back into a tbl24 leaf
    assert lpm_lookup(t, ip("10.1.2.200")) == 3
    assert t.tbl24[ip("10.1.2.0") >> 8] == 24 << 26 | L.VALID | 3
    assert t.meta[L.M_TBL8_USED] == 0
    assert lpm_delete(t, ip("10.1.2.0"), 24) == 0
    assert lpm_lookup(t, ip("10.1.2.200")) == 2
    assert lpm_delete(t, ip("10.1.0.0"), 16) == 0
    assert lpm_lookup(t, ip("10.1.2.200")) == 1
    assert lpm_delete(t, ip("10.0.0.0"), 8) == 0
    assert lpm_lookup(t, ip("10.1.2.200")) == ENOENT


def test_raw_words_as_dpdk():
    """spec-verified words: tbl24 leaf 10/8 nh 1 = 0x21000001; a pointer = 0x03000000|g; in a
    new group entry 0 has valid_group, entries written by a /25+ keep theirs, entries written
    by a /24- get it; after the last deep rule goes with no cover, tbl24 keeps 0x02000000|g."""
    t = L.create4(100, 4)
    assert lpm_add(t, ip("10.0.0.0"), 8, 1) == 0
    assert t.tbl24[0x0A0000] == 0x21000001
    assert lpm_add(t, ip("11.0.0.0"), 28, 2) == 0
    assert t.tbl24[0x0B0000] == 0x03000000
    g = t.tbl8[0:256]
    assert g[0] == 0x73000002 and g[1] == 0x71000002 and g[16] == 0
    assert lpm_add(t, ip("11.0.0.0"), 16, 1) == 0
    assert g[16] == 0x43000001 and g[0] == 0x73000002
    assert lpm_delete(t, ip("11.0.0.0"), 16) == 0
    assert g[16] == 0x42000001              # valid bit cleared, the rest left behind
    assert lpm_delete(t, ip("11.0.0.0"), 28) == 0
    assert t.tbl24[0x0B0000] == 0x02000000 and t.meta[L.M_TBL8_USED] == 0
    assert g[0] == 0                        # group free
    raw = np.zeros(1, np.uint32)
    lpm_lookup_bulk(t, np.array([ip("11.0.0.1")], np.uint32), raw, 1)
    assert raw[0] == 0x02000000             # a miss need not be 0, as DPDK's bulk lookup
    # next hop truncated to 24 bits
    assert lpm_add(t, ip("12.0.0.0"), 8, 0x1FFFFFF) == 0
    assert lpm_lookup(t, ip("12.1.1.1")) == 0xFFFFFF


def test_lowest_free_group_is_reused():
    t = L.create4(100, 8)
    for k in range(5):
        assert lpm_add(t, (20 + k) << 24, 32, k) == 0
    assert [t.tbl24[(20 + k) << 16] & 0xFF for k in range(5)] == [0, 1, 2, 3, 4]
    assert lpm_delete(t, 21 << 24, 32) == 0 and lpm_delete(t, 23 << 24, 32) == 0
    assert lpm_add(t, 30 << 24, 32, 9) == 0
    assert t.tbl24[30 << 16] == 0x03000001
    assert lpm_add(t, 31 << 24, 32, 9) == 0
    assert t.tbl24[31 << 16] == 0x03000003


def snapshot(t):
    return [np.array(a) for a in t] + [t.meta.copy()]


def same(s1, s2):
    return all(np.array_equal(a, b) for a, b in zip(s1, s2))


def test_rule_store_full_and_tbl8_exhaustion_leave_table_unchanged():
    t = L.create4(4, 2)
    for k, (a, d) in enumerate([("1.0.0.0", 8), ("2.2.2.0", 25), ("3.3.3.3", 32)]):
        assert lpm_add(t, ip(a), d, k) == 0
    before = snapshot(t)
    assert lpm_add(t, ip("4.4.4.4"), 32, 7) == ENOSPC          # no third group
    assert same(before, snapshot(t))
    assert lpm_add(t, ip("2.2.2.200"), 32, 7) == 0             # its /24 has a group
    before = snapshot(t)
    assert lpm_add(t, ip("5.0.0.0"), 8, 1) == ENOSPC           # 4 rules already
    assert same(before, snapshot(t))
    assert lpm_add(t, ip("1.0.0.0"), 8, 0) == 0                # same rule: 0, unchanged
    assert same(before, snapshot(t))
    assert lpm_add(t, ip("1.0.0.0"), 8, 5) == 0                # re-pointed
    assert lpm_lookup(t, ip("1.2.3.4")) == 5
    assert lpm_is_rule_present(t, ip("1.9.9.9"), 8) == (1, 5)
    assert lpm_is_rule_present(t, ip("1.9.9.9"), 9) == (0, 0)
    assert lpm_is_rule_present(t, 0, 0) == (EINVAL, 0)


def test_bad_depth_and_absent_rule():
    t = L.create4(4, 2)
    before = snapshot(t)
    assert lpm_add(t, 0, 0, 1) == EINVAL and lpm_add(t, 0, 33, 1) == EINVAL
    assert lpm_delete(t, 0, 33) == EINVAL
    assert lpm_delete(t, ip("9.0.0.0"), 8) == EINVAL          # DPDK 22.11: -EINVAL, not -ENOENT
    assert same(before, snapshot(t))
    ips = np.zeros(4, np.uint32)
    assert lpm_lookup_bulk(t, ips, np.zeros(3, np.uint32), 4) == EINVAL
    assert lpm_lookupx4(t, ips[:3], np.zeros(4, np.uint32), 0) == EINVAL


def test_slash32_and_whole_space_and_delete_all():
    t = L.create4(10, 2)
    assert lpm_add(t, 0, 1, 1) == 0 and lpm_add(t, 1 << 31, 1, 2) == 0
    assert lpm_add(t, 0xFFFFFFFF, 32, 3) == 0 and lpm_add(t, 0, 32, 4) == 0
    assert lpm_lookup(t, 0) == 4 and lpm_lookup(t, 1) == 1
    assert lpm_lookup(t, 0xFFFFFFFF) == 3 and lpm_lookup(t, 0xFFFFFFFE) == 2
    assert lpm_delete_all(t) == 0
    assert lpm_lookup(t, 0) == ENOENT and t.meta[L.M_USED_RULES] == 0
    assert not t.tbl24.any() and not t.tbl8.any()
    assert lpm_add(t, 0xFFFFFFFF, 32, 3) == 0 and t.tbl24[0xFFFFFF] == 0x03000000


def test_kernels_callable_from_user_njit():
    from numba import njit

    @njit
    def route(tbl, ips, out):
        for i in range(ips.size):
            out[i] = lpm_lookup(tbl, ips[i])

    t = L.create4(10, 2)
    lpm_add(t, ip("10.0.0.0"), 8, 7)
    out = np.zeros(2, np.int64)
    route(t, np.array([ip("10.1.1.1"), ip("11.1.1.1")], np.uint32), out)
    assert out.tolist() == [7, ENOENT]


def test_lookupx4_any_integer_arrays():
    """The vector fast path reads addresses and writes next hops of any integer dtype and
    layout (strided views too), the tbl8 path as well; each answer as lpm_lookup's."""
    t = L.create4(16, 4)
    assert lpm_add(t, ip("10.0.0.0"), 8, 1) == 0
    assert lpm_add(t, ip("10.1.2.0"), 24, 2) == 0
    assert lpm_add(t, ip("10.1.2.128"), 25, 3) == 0         # a tbl8 group under 10.1.2.0/24
    quads = [["10.9.9.9", "10.1.2.1", "10.1.2.200", "11.0.0.0"],     # one through tbl8
             ["10.9.9.9", "10.1.3.1", "12.0.0.1", "10.0.0.0"]]       # tbl24 only
    for q in quads:
        a = [ip(x) for x in q]
        want = [r if r >= 0 else 0xFFFFFFF0 for r in (lpm_lookup(t, x) for x in a)]
        for idt in (np.uint32, np.int64, np.uint64):
            for hdt in (np.uint32, np.int32, np.int64, np.uint64):
                ips = np.array(a, idt)
                hop = np.zeros(4, hdt)
                assert lpm_lookupx4(t, ips, hop, 0xFFFFFFF0) == 0
                assert [int(x) & 0xFFFFFFFF for x in hop] == want, (q, idt, hdt)
                wide = np.zeros(12, idt)
                wide[::3] = a
                out = np.zeros(8, hdt)
                assert lpm_lookupx4(t, wide[::3], out[::2], 0xFFFFFFF0) == 0
                assert [int(x) & 0xFFFFFFFF for x in out[::2]] == want
                assert not out[1::2].any()                   # nothing written between
