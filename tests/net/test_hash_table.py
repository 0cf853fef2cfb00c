"""Every kernel of pktbuf.net.hash.table against the model (pktbuf/net/hash/naive.py):
results, positions, data, counts and iteration, through fills to capacity, deletes and re-adds,
forced signature and bucket collisions, and argument errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pktbuf.net.hash import naive, table as T
from pktbuf.net.hash.crc import hash_crc

E_NOENT, E_INVAL, E_BUSY, E_NOSPC = -2, -22, -16, -28


def arr(k: bytes) -> np.ndarray:
    return np.frombuffer(k, np.uint8).copy()


class Pair:
    """A table and its model, driven together; every call's results compared."""

    def __init__(self, entries, key_len, hash_func=None, no_free_on_del=False):
        flags = T.F_NO_FREE_ON_DEL if no_free_on_del else 0
        self.blk = T.new_table(entries, key_len, 0, flags)
        self.m = naive.NaiveHash(entries, key_len, hash_func, 0, no_free_on_del)
        self.hf = hash_func
        self.key_len = key_len

    def h(self, k):
        return self.hf(k) if self.hf else None

    def add(self, k, d):
        h = self.h(k)
        if h is None:
            if d == 0:
                got = T.hash_add_key(self.blk, arr(k))
            else:
                rc = T.hash_add_key_data(self.blk, arr(k), np.uint64(d))
                got = rc if rc < 0 else T.hash_lookup(self.blk, arr(k))
        else:
            got = T.hash_add(self.blk, arr(k), h, np.uint64(d))
        assert got == self.m.add(k, d), k
        return got

    def lookup(self, k):
        want = self.m.lookup(k)
        h = self.h(k)
        if h is None:
            assert T.hash_lookup(self.blk, arr(k)) == want[0]
            got = T.hash_lookup_data(self.blk, arr(k))
        else:
            assert T.hash_lookup_with_hash(self.blk, arr(k), h) == want[0]
            got = T.hash_lookup_with_hash_data(self.blk, arr(k), h)
        assert (got[0], int(got[1])) == want, k

    def delete(self, k):
        h = self.h(k)
        got = T.hash_del_key(self.blk, arr(k)) if h is None else \
            T.hash_del_key_with_hash(self.blk, arr(k), h)
        assert got == self.m.delete(k), k

    def bulk(self, keys):
        ka = np.stack([arr(k) for k in keys]) if keys else np.zeros((0, self.key_len), np.uint8)
        n = len(keys)
        want = [self.m.lookup(k) for k in keys]
        for i in range(0, n, 64):
            m = min(64, n - i)
            sub = ka[i:i + m]
            pos = np.full(m, 99, np.int32)
            mask = np.zeros(1, np.uint64)
            data = np.full(m, 7, np.uint64)
            if self.hf is None:
                assert T.hash_lookup_bulk(self.blk, sub, m, pos) == 0
                hits = T.hash_lookup_bulk_data(self.blk, sub, m, mask, data)
            else:
                hs = np.array([self.hf(k) for k in keys[i:i + m]], np.uint32)
                assert T.hash_lookup_with_hash_bulk(self.blk, sub, hs, m, pos) == 0
                hits = T.hash_lookup_with_hash_bulk_data(self.blk, sub, hs, m, mask, data)
            w = want[i:i + m]
            assert pos.tolist() == [p for p, _ in w]
            assert hits == sum(p >= 0 for p, _ in w)
            for j, (p, d) in enumerate(w):
                assert bool(int(mask[0]) >> j & 1) == (p >= 0)
                assert int(data[j]) == (d if p >= 0 else 7)

    def check_all(self, keys=()):
        assert T.hash_count(self.blk) == self.m.count()
        state = np.zeros(1, np.int64)
        ko = np.zeros(self.key_len, np.uint8)
        seen = {}
        while True:
            pos, d = T.hash_iterate(self.blk, state, ko)
            if pos < 0:
                assert pos == E_NOENT
                break
            assert pos not in seen
            seen[int(pos)] = (ko.tobytes(), int(d))
        assert seen == self.m.items()
        for pos, (k, _) in seen.items():
            assert T.hash_get_key_with_position(self.blk, pos, ko) == 0 and ko.tobytes() == k
        if keys:
            self.bulk(list(keys))


def rnd_keys(n, key_len, seed=1):
    rng = np.random.default_rng(seed)
    return list(dict.fromkeys(rng.bytes(key_len) for _ in range(n)))


def test_fill_to_capacity_positions_in_order():
    p = Pair(100, 16)                       # 16 buckets, 128 entries for 100 keys
    keys = rnd_keys(101, 16)
    for i, k in enumerate(keys[:100]):
        assert p.add(k, i + 1) == i         # fresh slots come out 0, 1, 2, ...
    assert p.add(keys[100], 5) == E_NOSPC   # no slot left
    p.check_all(keys)
    # free slots come back after the never-used ones: here there are none, so at once
    p.delete(keys[3])
    assert p.add(keys[100], 9) == 3
    p.check_all(keys)


def test_readd_replaces_data_and_add_key_clears_it():
    p = Pair(64, 8)
    k = b"\x01" * 8
    assert p.add(k, 5) == 0
    assert p.add(k, 6) == 0
    p.lookup(k)
    assert T.hash_add_key(p.blk, arr(k)) == 0                    # data 0, as DPDK
    assert T.hash_lookup_data(p.blk, arr(k)) == (0, 0)


def test_freed_slots_are_reused_fifo():
    p = Pair(16, 4)
    keys = [i.to_bytes(4, "little") for i in range(20)]
    for i in range(8):
        p.add(keys[i], i)
    p.delete(keys[2])
    p.delete(keys[5])
    for i in range(8, 16):                   # the 8 never-used slots, then 2 and 5
        p.add(keys[i], i)
    assert p.add(keys[16], 1) == 2 and p.add(keys[17], 1) == 5
    p.check_all(keys)


@pytest.mark.parametrize("key_len", [1, 4, 7, 13, 16, 37, 40])
def test_key_lengths(key_len):
    p = Pair(200, key_len)
    keys = rnd_keys(150, key_len, seed=key_len)
    if key_len == 1:
        keys = [bytes([i]) for i in range(150)]
    for i, k in enumerate(keys):
        p.add(k, i * 3)
    for k in keys[::3]:
        p.delete(k)
    p.check_all(keys + rnd_keys(30, key_len, seed=99))


def test_every_key_in_two_buckets_16_fit():
    """A user hash sending every key to the same two buckets: 8 + 8 entries, cuckoo moves
    between them, the 17th add fails and changes nothing visible."""
    hf = lambda k: 0x00050003              # noqa: E731 -- sig 5, primary 3, secondary 6
    p = Pair(256, 16, hf)
    keys = rnd_keys(20, 16)
    for i, k in enumerate(keys[:16]):
        assert p.add(k, i) == i
    assert p.add(keys[16], 1) == E_NOSPC
    p.check_all(keys)
    p.delete(keys[4])
    assert p.add(keys[17], 2) >= 0
    p.check_all(keys)


def test_same_bucket_for_both_choices():
    """sig & mask == 0: primary == secondary, so only 8 keys fit."""
    hf = lambda k: 0x00400007              # noqa: E731 -- sig 0x40, 32 buckets: 0x40 & 31 == 0
    p = Pair(256, 4, hf)
    keys = [i.to_bytes(4, "little") for i in range(10)]
    for i in range(8):
        assert p.add(keys[i], i) == i
    assert p.add(keys[8], 0) == E_NOSPC
    p.check_all(keys)


def _colliding_deltas(mask_bits):
    """8-byte values d with crc(d) & mask_bits == 0 (init 0): the CRC is linear over GF(2),
    so key ^ d has the same signature and primary bucket as key.  Gaussian elimination over
    the CRCs of the 64 unit vectors."""
    basis = {}
    out = []
    for j in range(64):
        v = int(hash_crc(np.frombuffer((1 << j).to_bytes(8, "little"), np.uint8), 8, 0))
        v &= mask_bits
        c = 1 << j
        while v:
            top = v.bit_length() - 1
            if top not in basis:
                basis[top] = (v, c)
                break
            bv, bc = basis[top]
            v ^= bv
            c ^= bc
        if v == 0:
            out.append(c)
    return out


def test_signature_collisions_with_crc():
    """Different keys with the same CRC signature and primary bucket (crafted with the CRC's
    linearity): the full key decides."""
    entries = 64                           # 8 buckets: primary = h & 7
    deltas = _colliding_deltas(0xFFFF0007)
    assert len(deltas) >= 40
    groups = []
    for base in (0x1111, 0x2222, 0x3333):
        grp = [(base ^ d).to_bytes(8, "little") for d in (0, deltas[0], deltas[1])]
        hs = {int(hash_crc(np.frombuffer(k, np.uint8), 8, 0)) & 0xFFFF0007 for k in grp}
        assert len(hs) == 1
        groups.append(grp)
    p = Pair(entries, 8)
    for grp in groups:
        p.add(grp[0], 10)
        p.add(grp[1], 11)
        p.lookup(grp[2])                   # same sig, same buckets, absent
    flat = [k for g in groups for k in g]
    p.check_all(flat)
    for grp in groups:
        p.delete(grp[0])
        p.lookup(grp[1])
    p.check_all(flat)
    # 17 keys sharing signature and primary bucket (so secondary too): 16 fit
    p = Pair(64, 8)
    many = [(0x4444 ^ d).to_bytes(8, "little") for d in [0] + deltas[:20]]
    for i, k in enumerate(many[:16]):
        assert p.add(k, i) == i
    assert p.add(many[16], 0) == E_NOSPC
    p.check_all(many)


def test_cuckoo_displacement_at_high_load():
    """1000 random keys in 1024 entries (128 buckets): many adds need moves."""
    p = Pair(1024, 16)
    keys = rnd_keys(1000, 16, seed=5)
    cnt0 = int(p.blk.cnt[0])
    for i, k in enumerate(keys):
        p.add(k, i)
    assert int(p.blk.cnt[0]) > cnt0 + 10     # the change counter counted the moves
    p.check_all(keys + rnd_keys(64, 16, seed=6))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([4, 13, 16]), st.data())
def test_random_operations_against_the_model(key_len, data):
    """Random adds, deletes, re-adds and lookups from a small key pool on a small table."""
    entries = data.draw(st.sampled_from([8, 24, 64]))
    pool = rnd_keys(int(entries * 1.2) + 2, key_len, seed=data.draw(st.integers(0, 1000)))
    collide = data.draw(st.booleans())
    hf = None
    if collide:                                 # few distinct hashes: many sig collisions
        hf = lambda k: naive.crc32c(k) & 0xC0030003   # noqa: E731
    p = Pair(entries, key_len, hf)
    ops = data.draw(st.lists(st.tuples(st.sampled_from("aadl"),
                                       st.integers(0, len(pool) - 1),
                                       st.integers(0, 2 ** 64 - 1)), max_size=60))
    for op, i, d in ops:
        k = pool[i]
        if op == "a":
            p.add(k, d)
        elif op == "d":
            p.delete(k)
        else:
            p.lookup(k)
    p.check_all(pool)


def test_no_free_on_del():
    p = Pair(16, 4, no_free_on_del=True)
    keys = [i.to_bytes(4, "little") for i in range(20)]
    for i in range(16):
        p.add(keys[i], i)
    p.delete(keys[3])
    assert T.hash_count(p.blk) == 16 == p.m.count()       # deleted, still counted (DPDK)
    assert p.add(keys[16], 0) == E_NOSPC == -28
    assert T.hash_free_key_with_position(p.blk, 4) == E_BUSY   # keys[4] is still in
    assert T.hash_free_key_with_position(p.blk, 3) == 0 == p.m.free_position(3)
    assert T.hash_free_key_with_position(p.blk, 3) == E_INVAL  # free already
    assert T.hash_free_key_with_position(p.blk, 16) == E_INVAL
    ko = np.zeros(4, np.uint8)
    assert T.hash_get_key_with_position(p.blk, 3, ko) == E_NOENT
    p.m.free.rotate(0)
    assert p.add(keys[16], 1) == 3
    p.check_all(keys)


def test_reset():
    p = Pair(32, 16)
    keys = rnd_keys(20, 16)
    for i, k in enumerate(keys):
        p.add(k, i)
    assert T.hash_reset(p.blk) == 0
    p.m.reset()
    p.check_all(keys)
    assert p.add(keys[5], 1) == 0
    p.check_all(keys)


def test_argument_errors_change_nothing():
    blk = T.new_table(64, 16)
    k = np.zeros(16, np.uint8)
    assert T.hash_add_key(blk, k) == 0
    short = np.zeros(15, np.uint8)
    for f in (T.hash_add_key, T.hash_lookup, T.hash_del_key, T.hash_hash):
        assert f(blk, short) == E_INVAL
    assert T.hash_add_key_data(blk, short, 1) == E_INVAL
    assert T.hash_lookup_data(blk, short) == (E_INVAL, 0)
    keys = np.zeros((65, 16), np.uint8)
    pos = np.zeros(65, np.int32)
    assert T.hash_lookup_bulk(blk, keys, 65, pos) == E_INVAL       # RTE_HASH_LOOKUP_BULK_MAX
    assert T.hash_lookup_bulk(blk, keys[:10], 11, pos) == E_INVAL  # more than the rows
    assert T.hash_lookup_bulk(blk, keys, 10, pos[:9]) == E_INVAL
    assert T.hash_lookup_bulk(blk, keys[:, :15].copy(), 3, pos) == E_INVAL
    mask = np.zeros(1, np.uint64)
    assert T.hash_lookup_bulk_data(blk, keys, 10, mask[:0], np.zeros(10, np.uint64)) == E_INVAL
    assert T.hash_lookup_bulk(blk, keys, 0, pos) == 0
    st_ = np.zeros(1, np.int64)
    assert T.hash_iterate(blk, st_, short)[0] == E_INVAL
    assert T.hash_count(blk) == 1 and T.hash_lookup(blk, k) == 0
    assert T.hash_max_key_id(blk) == 64 and T.hash_key_len(blk) == 16
    with pytest.raises(ValueError):
        T.table_counts(7, 16)
    with pytest.raises(ValueError):
        T.table_counts(64, 0)
