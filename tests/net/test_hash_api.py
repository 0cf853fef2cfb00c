"""The facade pktbuf.net.hash.api.Hash: argument checks (nothing changes on a bad call),
exceptions, bytes and arrays as keys, bulks of any size, iteration, user hash functions,
shared tables."""
from __future__ import annotations

import os

import numpy as np
import pytest

from pktbuf.errors import InvalidArgument, NoRoom, PktbufError
from pktbuf.net.hash import naive
from pktbuf.net.hash.api import Hash, NoSuchKey


def k16(i: int) -> bytes:
    return i.to_bytes(16, "little")


def test_basic_verbs():
    h = Hash(1000, 16)
    assert len(h) == 0
    assert h.add(k16(1), 10) == 0
    assert h.add(np.frombuffer(k16(2), np.uint8), 20) == 1
    assert h.add(k16(1), 11) == 0                      # data replaced, same position
    assert h.lookup(k16(1)) == (0, 11) and h.lookup(k16(3)) is None
    assert h[k16(2)] == 20 and k16(2) in h and k16(3) not in h
    h[k16(3)] = 30
    assert len(h) == 3 and dict(h.items()) == {k16(1): 11, k16(2): 20, k16(3): 30}
    assert set(h) == {k16(1), k16(2), k16(3)}
    assert sorted(p for p, _, _ in h.positions()) == [0, 1, 2]
    assert h.key_at(1) == k16(2) and h.key_at(7) is None
    assert h.delete(k16(2)) == 1
    with pytest.raises(NoSuchKey):
        h.delete(k16(2))
    with pytest.raises(KeyError):
        h[k16(2)]
    del h[k16(3)]
    assert len(h) == 1
    assert h.hash(k16(1)) == naive.crc32c(k16(1))
    h.reset()
    assert len(h) == 0 and h.lookup(k16(1)) is None
    assert "0/1000" in repr(h)


def test_bulk_any_size_and_data():
    h = Hash(512, 16)
    for i in range(0, 300, 2):
        h.add(k16(i), i * 7)
    keys = [k16(i) for i in range(300)]
    pos = h.lookup_bulk(keys)
    assert pos.dtype == np.int32 and pos.shape == (300,)
    for i in range(300):
        assert (pos[i] >= 0) == (i % 2 == 0)
        assert pos[i] == (i // 2 if i % 2 == 0 else -2)
    arr = np.stack([np.frombuffer(k, np.uint8) for k in keys])
    hit, data = h.lookup_bulk_data(arr)
    assert hit.tolist() == [i % 2 == 0 for i in range(300)]
    assert data.tolist() == [i * 7 if i % 2 == 0 else 0 for i in range(300)]
    assert h.lookup_bulk([]).shape == (0,)


def test_bad_arguments_change_nothing():
    h = Hash(64, 16)
    h.add(k16(1), 5)
    bad_keys = [b"short", k16(1) + b"x", "a string", None, 5, np.zeros(16, np.int8),
                np.zeros((1, 16), np.uint8)]
    for bk in bad_keys:
        for f in (h.add, h.lookup, h.delete, h.hash):
            with pytest.raises(InvalidArgument):
                f(bk)
    for bd in (-1, 1 << 64, 1.5, "x", None, True):
        with pytest.raises(InvalidArgument):
            h.add(k16(2), bd)
    for bb in (b"abc", "abc", None, np.zeros((3, 15), np.uint8), np.zeros(16, np.uint8),
               [k16(1), b"x"]):
        with pytest.raises(InvalidArgument):
            h.lookup_bulk(bb)
    for pos in (-1, 64, 1.0, None):
        with pytest.raises(InvalidArgument):
            h.key_at(pos)
    with pytest.raises(InvalidArgument):
        h.free_position(0)                      # not a no_free_on_del table
    assert len(h) == 1 and dict(h.items()) == {k16(1): 5}


@pytest.mark.parametrize("kw", [dict(entries=7, key_len=16), dict(entries=1 << 31, key_len=4),
                                dict(entries=64, key_len=0), dict(entries=64, key_len=True),
                                dict(entries="8", key_len=4), dict(entries=64, key_len=4,
                                                                   init_val=-1),
                                dict(entries=64, key_len=4, hash_func=5)])
def test_bad_parameters(kw):
    with pytest.raises(InvalidArgument):
        Hash(**kw)


def test_full_table_raises_no_room():
    h = Hash(8, 4)
    for i in range(8):
        h.add(i.to_bytes(4, "little"), i)
    with pytest.raises(NoRoom) as ei:
        h.add((99).to_bytes(4, "little"), 1)
    assert isinstance(ei.value, PktbufError) and ei.value.code == -28
    assert len(h) == 8 and h.lookup((99).to_bytes(4, "little")) is None


def test_user_hash_function():
    calls = []

    def hf(key: bytes) -> int:
        calls.append(key)
        return 0xABCD0001                 # every key in the same two buckets

    h = Hash(256, 4, hash_func=hf)
    for i in range(16):
        h.add(i.to_bytes(4, "little"), i)
    with pytest.raises(NoRoom):
        h.add((16).to_bytes(4, "little"))
    assert h.hash(b"\0\0\0\0") == 0xABCD0001
    pos = h.lookup_bulk([i.to_bytes(4, "little") for i in range(18)])
    assert pos.tolist() == list(range(16)) + [-2, -2]
    assert h.lookup_bulk_data([(3).to_bytes(4, "little")])[1].tolist() == [3]
    assert calls
    bad = Hash(64, 4, hash_func=lambda k: -1)
    with pytest.raises(InvalidArgument):
        bad.add(b"abcd")
    assert len(bad) == 0


def test_no_free_on_del():
    h = Hash(8, 4, no_free_on_del=True)
    for i in range(8):
        h.add(i.to_bytes(4, "little"), i)
    assert h.delete((2).to_bytes(4, "little")) == 2
    assert len(h) == 8
    with pytest.raises(NoRoom):
        h.add((9).to_bytes(4, "little"))
    with pytest.raises(InvalidArgument):
        h.free_position(3)                 # still holds a key
    h.free_position(2)
    with pytest.raises(InvalidArgument):
        h.free_position(2)                 # free already
    assert len(h) == 7 and h.add((9).to_bytes(4, "little")) == 2


def test_shared_table_attached_twice():
    h = Hash(64, 16, shared=True, name="pktbuf-hash-test")
    assert h.fd is not None
    for i in range(10):
        h.add(k16(i), i + 100)
    fd = os.open(f"/proc/self/fd/{h.fd}", os.O_RDWR)
    peer = Hash.attach(fd)
    assert peer.entries == 64 and peer.key_len == 16 and len(peer) == 10
    assert peer.lookup(k16(3)) == (3, 103)
    h.delete(k16(3))
    assert peer.lookup(k16(3)) is None          # the same memory
    assert peer.block.address != h.block.address
    with pytest.raises(InvalidArgument):
        Hash.attach(-1)
    assert Hash(64, 16).fd is None
