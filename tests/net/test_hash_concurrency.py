"""One writer, lock-free readers: while a writer adds and deletes "volatile" keys in a nearly
full table (so that adds displace other keys: cuckoo moves), readers look up "stable" keys --
present throughout -- and must always find them at their position with their data; a volatile
key, when found, must come with its own data.  Readers run in threads (the kernels release the
GIL) and in another process mapping the same memfd."""
from __future__ import annotations

import multiprocessing as mp
import os
import threading

import numpy as np
from numba import njit

from pktbuf.atomics import load_acquire
from pktbuf.net.hash import table as T
from pktbuf.net.hash.api import Hash

KEY_LEN = 16
ENTRIES = 2048                  # 256 buckets
N_STABLE = 1400
N_VOLATILE = 700                # up to 2100 keys wanted in 2048 entries: moves and refusals


def _keys(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, KEY_LEN), dtype=np.uint8)


def _data(i):
    return (np.arange(i, dtype=np.uint64) * np.uint64(0x9E3779B1) + np.uint64(1))


@njit(nogil=True, _nrt=False)
def _writer(blk, vkeys, vdata, steps, seed):
    """Random toggles of volatile keys: present -> delete, absent -> add (may find no room)."""
    x = np.uint64(seed) | np.uint64(1)
    refused = 0
    n = vkeys.shape[0]
    for _ in range(steps):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
        j = np.int64(x % np.uint64(n))
        if T.hash_lookup(blk, vkeys[j]) >= 0:
            T.hash_del_key(blk, vkeys[j])
        elif T.hash_add_key_data(blk, vkeys[j], vdata[j]) < 0:
            refused += 1
    return refused


@njit(nogil=True, _nrt=False)
def _reader(blk, skeys, spos, sdata, vkeys, vdata, stop, pos, mask, data, mixed):
    """Bulk and single lookups until ``stop[0]`` is set: (lookups, errors)."""
    errors = 0
    done = 0
    ns = skeys.shape[0]
    nv = vkeys.shape[0]
    b = 0
    while load_acquire(stop, 0) == 0:
        # a burst of 32 stable keys
        s0 = (b * 32) % (ns - 32)
        T.hash_lookup_bulk(blk, skeys[s0:s0 + 32], 32, pos)
        for i in range(32):
            if pos[i] != spos[s0 + i]:
                errors += 1
        hits = T.hash_lookup_bulk_data(blk, skeys[s0:s0 + 32], 32, mask, data)
        if hits != 32 or mask[0] != np.uint64(0xFFFFFFFF):
            errors += 1
        for i in range(32):
            if data[i] != sdata[s0 + i]:
                errors += 1
        # single lookups of stable keys
        for i in range(4):
            p, d = T.hash_lookup_data(blk, skeys[(s0 + 7 * i) % ns])
            if p != spos[(s0 + 7 * i) % ns] or d != sdata[(s0 + 7 * i) % ns]:
                errors += 1
        # a burst of volatile keys: either answer, but never another key's data
        v0 = (b * 32) % (nv - 32)
        T.hash_lookup_bulk_data(blk, vkeys[v0:v0 + 32], 32, mask, data)
        for i in range(32):
            if (mask[0] >> np.uint64(i)) & np.uint64(1) and data[i] != vdata[v0 + i]:
                errors += 1
        # and a mixed burst through the positions path (stable rows first)
        for i in range(16):
            for c in range(skeys.shape[1]):
                mixed[i, c] = skeys[(s0 + i) % ns, c]
                mixed[16 + i, c] = vkeys[(v0 + i) % nv, c]
        T.hash_lookup_bulk(blk, mixed, 32, pos)
        for i in range(16):
            if pos[i] != spos[(s0 + i) % ns]:
                errors += 1
        done += 32 * 4 + 4
        b += 1
    return done, errors


def _fill(h, skeys, sdata):
    spos = np.array([h.add(k, int(d)) for k, d in zip(skeys, sdata)], np.int32)
    return spos


def _scratch():
    return (np.zeros(32, np.int32), np.zeros(1, np.uint64), np.zeros(32, np.uint64),
            np.zeros((32, KEY_LEN), np.uint8))


def test_threads_never_miss_a_stable_key_nor_see_wrong_data():
    h = Hash(ENTRIES, KEY_LEN)
    blk = h.block
    skeys, vkeys = _keys(N_STABLE, 1), _keys(N_VOLATILE, 2)
    sdata, vdata = _data(N_STABLE), _data(N_VOLATILE) + np.uint64(1 << 40)
    spos = _fill(h, skeys, sdata)
    for k, d in zip(vkeys[:300], vdata[:300]):
        h.add(k, int(d))
    stop = np.zeros(1, np.int64)
    # compile before the race starts
    _reader(blk, skeys, spos, sdata, vkeys, vdata, np.ones(1, np.int64), *_scratch())
    _writer(blk, vkeys, vdata, 1, 3)
    results = []

    def read():
        results.append(_reader(blk, skeys, spos, sdata, vkeys, vdata, stop, *_scratch()))

    readers = [threading.Thread(target=read, daemon=True) for _ in range(2)]
    moves0 = int(blk.cnt[0])
    refused = 0
    try:
        for t in readers:
            t.start()
        for seed in range(1, 9):
            refused += _writer(blk, vkeys, vdata, 100_000, seed)
    finally:
        stop[0] = 1             # the readers load it with acquire
        for t in readers:
            t.join(60)
    moves = int(blk.cnt[0]) - moves0
    assert len(results) == 2
    assert moves > 100, "the writer displaced too few keys for the test to mean anything"
    for done, errors in results:
        assert done > 0 and errors == 0, (done, errors, moves, refused)
    # and the table is still exactly right
    assert (h.lookup_bulk(skeys) == spos).all()
    present = [k.tobytes() for k in vkeys if k.tobytes() in h]
    assert len(h) == N_STABLE + len(present)


def _child(path, stable_bytes, spos, sdata, vkeys_bytes, vdata, rounds, q):
    """In another process: map the table through /proc/<pid>/fd and look up."""
    try:
        fd = os.open(path, os.O_RDWR)
        h = Hash.attach(fd)
        # (writeable copies: a read-only array would compile new kernel versions)
        skeys = np.frombuffer(stable_bytes, np.uint8).reshape(-1, KEY_LEN).copy()
        vkeys = np.frombuffer(vkeys_bytes, np.uint8).reshape(-1, KEY_LEN).copy()
        blk = h.block
        pos = np.zeros(32, np.int32)
        mask = np.zeros(1, np.uint64)
        data = np.zeros(32, np.uint64)
        errors = 0
        n = skeys.shape[0]
        q.put(("ready", 0))
        for r in range(rounds):
            s0 = (r * 32) % (n - 32)
            T.hash_lookup_bulk(blk, skeys[s0:s0 + 32], 32, pos)
            errors += int((pos != spos[s0:s0 + 32]).sum())
            hits = T.hash_lookup_bulk_data(blk, skeys[s0:s0 + 32], 32, mask, data)
            errors += int(hits != 32) + int((data != sdata[s0:s0 + 32]).sum())
            v0 = (r * 32) % (vkeys.shape[0] - 32)
            T.hash_lookup_bulk_data(blk, vkeys[v0:v0 + 32], 32, mask, data)
            m = int(mask[0])
            for i in range(32):
                if m >> i & 1 and data[i] != vdata[v0 + i]:
                    errors += 1
        q.put(("done", errors))
    except BaseException as e:          # pragma: no cover - reported to the parent
        q.put(("error", repr(e)))


def test_reader_in_another_process():
    h = Hash(ENTRIES, KEY_LEN, shared=True)
    blk = h.block
    skeys, vkeys = _keys(N_STABLE, 3), _keys(N_VOLATILE, 4)
    sdata, vdata = _data(N_STABLE), _data(N_VOLATILE) + np.uint64(1 << 41)
    spos = _fill(h, skeys, sdata)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(f"/proc/{os.getpid()}/fd/{h.fd}", skeys.tobytes(),
                                         spos, sdata, vkeys.tobytes(), vdata, 20_000, q))
    p.start()
    try:
        kind, v = q.get(timeout=120)
        assert kind == "ready", v
        moves0 = int(blk.cnt[0])
        seed = 1
        while p.is_alive() and q.empty():
            _writer(blk, vkeys, vdata, 5_000, seed)
            seed += 1
        kind, v = q.get(timeout=120)
        assert kind == "done", v
        assert v == 0
        assert int(blk.cnt[0]) > moves0
    finally:
        p.join(30)
        if p.is_alive():            # pragma: no cover
            p.kill()
    assert (h.lookup_bulk(skeys) == spos).all()
