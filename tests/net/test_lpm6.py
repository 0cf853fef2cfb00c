"""IPv6 LPM kernels (pktbuf.net.lpm.lpm6) against the naive model (rte_lpm6 semantics)."""
from __future__ import annotations

import ipaddress

import numpy as np
from hypothesis import given, settings, strategies as st

from pktbuf.net.lpm import layout as L
from pktbuf.net.lpm.lpm6 import (lpm6_add, lpm6_delete, lpm6_delete_all, lpm6_is_rule_present,
                                 lpm6_lookup, lpm6_lookup_bulk)
from pktbuf.net.lpm.naive import NaiveLpm6

EINVAL, ENOENT, ENOSPC = -22, -2, -28
M128 = (1 << 128) - 1
BASES = [int(ipaddress.IPv6Address(a)) for a in
         ("2001:db8::", "2001:db8:0:1::", "2001:db8:0:1:8000::", "fe80::", "::", "ffff::",
          "2001:db8:0:1:2:3:4:5")]


def b(a: int) -> np.ndarray:
    return np.frombuffer(a.to_bytes(16, "big"), np.uint8).copy()


def masked(a, d):
    return a & (((1 << d) - 1) << (128 - d))


def check_same(t, model, rules, rng):
    addrs = [int.from_bytes(rng.bytes(16), "big") for _ in range(100)]
    for a, d in rules:
        span = 1 << (128 - d)
        addrs += [a, (a + span - 1) & M128, (a + span) & M128, (a - 1) & M128,
                  (a + int.from_bytes(rng.bytes(16), "big") % span) & M128]
    arr = np.stack([b(a) for a in addrs])
    bulk = np.zeros(len(addrs), np.int32)
    assert lpm6_lookup_bulk(t, arr, bulk, len(addrs)) == 0
    for k, a in enumerate(addrs):
        want = model.lookup(a)
        assert lpm6_lookup(t, arr[k]) == want, (ipaddress.IPv6Address(a), want)
        assert bulk[k] == (want if want >= 0 else -1)
    assert t.meta[L.M_TBL8_USED] == model.groups_used()
    assert t.meta[L.M_USED_RULES] == len(model.rules)


rule_st = st.tuples(st.sampled_from(BASES), st.integers(0, M128), st.integers(1, 128),
                    st.integers(0, (1 << 21) - 1))


def _addr(base, noise, d):
    keep = min(d, 120)
    low = (1 << (128 - keep)) - 1
    return (base & ~low & M128) | (noise & low)


@settings(max_examples=25, deadline=None)
@given(st.lists(rule_st, min_size=1, max_size=30), st.integers(0, 2**32 - 1),
       st.integers(4, 40))
def test_random_rules_add_delete_against_model(specs, seed, ngroups):
    rng = np.random.default_rng(seed)
    t = L.create6(25, ngroups)
    model = NaiveLpm6(25, ngroups)
    added = []
    for base, noise, d, nh in specs:
        a = _addr(base, noise, d)
        r = lpm6_add(t, b(a), d, nh)
        assert r == model.add(a, d, nh), (ipaddress.IPv6Address(a), d)
        if r == 0:
            added.append((masked(a, d), d))
    check_same(t, model, added, rng)
    for k, i in enumerate(rng.permutation(len(added))):
        a, d = added[i]
        assert lpm6_delete(t, b(a), d) == model.delete(a, d)
        if k % 4 == 0:
            check_same(t, model, added, rng)
    check_same(t, model, added, rng)
    assert not t.tbl24.any()
    assert t.meta[L.M_TBL8_USED] == 0


def test_groups_per_depth_and_reexpansion():
    t = L.create6(100, 64)
    p = int(ipaddress.IPv6Address("2001:db8:1::"))
    assert lpm6_add(t, b(p), 48, 2) == 0 and t.meta[L.M_TBL8_USED] == 3       # a /48: 3
    assert lpm6_add(t, b(p), 64, 3) == 0 and t.meta[L.M_TBL8_USED] == 5       # a /64: 5
    assert lpm6_add(t, b(p), 32, 1) == 0 and t.meta[L.M_TBL8_USED] == 5
    assert lpm6_add(t, b(p | 1), 128, 4) == 0 and t.meta[L.M_TBL8_USED] == 13
    assert lpm6_lookup(t, b(p | 1)) == 4 and lpm6_lookup(t, b(p | 2)) == 3
    assert lpm6_delete(t, b(p), 64) == 0
    assert lpm6_lookup(t, b(p | 2)) == 2 and lpm6_lookup(t, b(p | 1)) == 4
    assert lpm6_delete(t, b(p | 1), 128) == 0 and t.meta[L.M_TBL8_USED] == 3
    assert lpm6_lookup(t, b(p | 1)) == 2
    assert lpm6_delete(t, b(p), 48) == 0 and t.meta[L.M_TBL8_USED] == 1
    assert lpm6_lookup(t, b(p | 1)) == 1
    assert lpm6_delete(t, b(p), 48) == ENOENT
    assert lpm6_is_rule_present(t, b(p | 5), 32) == (1, 1)
    assert lpm6_is_rule_present(t, b(p), 33) == (0, 0)
    assert lpm6_is_rule_present(t, b(p), 129) == (EINVAL, 0)


def test_enospc_leaves_table_unchanged():
    t = L.create6(3, 4)
    p = int(ipaddress.IPv6Address("2001:db8::"))
    assert lpm6_add(t, b(p), 48, 1) == 0                     # 3 groups
    before = [np.array(x) for x in t]
    assert lpm6_add(t, b(p), 64, 2) == ENOSPC                # needs 2 more, 1 free
    assert all(np.array_equal(x, y) for x, y in zip(before, t))
    assert lpm6_add(t, b(p), 56, 2) == 0                     # needs 1
    assert lpm6_add(t, b(p), 16, 3) == 0
    assert lpm6_add(t, b(p), 17, 3) == ENOSPC                # 3 rules already
    assert lpm6_add(t, b(p), 16, 9) == 0                     # existing: re-pointed
    assert lpm6_lookup(t, b(p | (1 << 90))) == 9
    assert lpm6_add(t, b(p), 0, 1) == EINVAL and lpm6_add(t, b(p), 129, 1) == EINVAL
    assert lpm6_add(t, b(p)[:8], 8, 1) == EINVAL
    assert lpm6_add(t, b(3 << 120), 8, 1) == ENOSPC          # full store, new rule
    assert lpm6_delete_all(t) == 0
    assert t.meta[L.M_TBL8_USED] == 0 and not t.tbl24.any() and lpm6_lookup(t, b(p)) == ENOENT


def test_next_hop_truncated_to_21_bits():
    t = L.create6(3, 4)
    assert lpm6_add(t, b(1 << 127), 1, 0x3FFFFF) == 0
    assert lpm6_lookup(t, b(M128)) == 0x1FFFFF
