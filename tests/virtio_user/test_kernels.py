"""The front end's split-ring kernels against a back end played in Python (tests/virtio_user/
device_side.py) and against the naive model (naive.py): zero-copy Tx chains, Rx into posted
mbufs with mergeable buffers, and hostile used rings -- every violation rejected with the right
code, nothing leaked, every mbuf back once the ring is released."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.drivers.virtio_user.layout import (QS_ERR, QS_ERRORS, QS_MISSED, QS_UP,
                                               V_USED_IDX)
from pktbuf.drivers.virtio_user.rx import virtio_user_rx_burst
from pktbuf.drivers.virtio_user.tx import virtio_user_tx_burst

from . import naive
from .device_side import Side

N = 16


@pytest.fixture(scope="module")
def pool():
    p = pktbuf.PktmbufPool(1024)
    yield p
    p.close()


def _pkt(pool, data: bytes, segs: int) -> int:
    cut = [len(data) * k // segs for k in range(segs + 1)]
    head = pool.alloc().append_bytes(data[cut[0]:cut[1]])
    for a, b in zip(cut[1:], cut[2:]):
        head.chain(pool.alloc().append_bytes(data[a:b]))
    _SEGS[int(head)] = list(range(segs))
    return int(head)


def _tx(pool, side, hs):
    a = np.array(hs, np.int32)
    return int(virtio_user_tx_burst(pool.domain.state, side.q[1], -1, a, a.size))


def _rx(pool, side, n=32):
    out = np.zeros(n, np.int32)
    k = int(virtio_user_rx_burst(pool.domain.state, side.q[0], -1, out, n))
    return out[:k]


def _bytes(pool, h) -> bytes:
    m = pool.mbuf(int(h))
    return bytes(m.read(0, len(m)))


def test_tx_chains_point_at_the_mbufs_data_and_come_back(pool):
    side = Side(pool, N)
    try:
        frames = [bytes([i]) * (60 + 37 * i) for i in range(6)]
        hs = [_pkt(pool, f, 1 + i % 3) for i, f in enumerate(frames)]
        addrs = []
        for h in hs:
            seg, a = pool.mbuf(h), []
            while seg is not None:
                m = pool.domain.state.mb[int(seg)]
                a.append(int(m["buf_addr"]) + int(m["data_off"]))
                seg = seg.next
            addrs.append(a)
        assert _tx(pool, side, hs) == 6
        heads = side.avail(1)
        assert len(heads) == 6
        used = []
        for k, hd in enumerate(heads):
            ch = side.chain(1, hd)
            if len(addrs[k]) == 1:      # header pushed into the headroom: one descriptor
                (a, ln, fl), = ch
                assert a == addrs[k][0] - 12 and ln == 12 + len(frames[k]) and fl == 0
                body = side.view(a, ln).tobytes()
            else:                       # header slot, then the segments themselves
                assert ch[0][1] == 12 and ch[0][2] == 1
                assert [c[0] for c in ch[1:]] == addrs[k]
                body = b"".join(side.view(a, ln).tobytes() for a, ln, _ in ch)
            assert body == bytes(12) + frames[k]
            used.append((hd, 0))
        assert pool.in_use_count == sum(1 + i % 3 for i in range(6))
        side.put_used(1, used)
        assert _tx(pool, side, []) == 0          # the reclaim frees them
        assert pool.in_use_count == 0
    finally:
        side.close()


def test_tx_stops_at_a_full_ring_and_drops_what_the_back_end_cannot_see(pool):
    side = Side(pool, N)
    other = pktbuf.PktmbufPool(64)          # not in this table
    try:
        hs = [_pkt(pool, b"x" * 100, 2) for _ in range(8)]   # 3 descriptors each
        assert _tx(pool, side, hs) == 5                     # 16 // 3
        assert side.q[1].st[QS_MISSED] == 3
        pool.free_bulk(hs[5:])
        h = _pkt(other, b"y" * 80, 1)
        side.put_used(1, [(hd, 0) for hd in side.avail(1)])
        assert _tx(pool, side, [h]) == 1
        assert side.q[1].st[QS_ERRORS] == 1 and other.in_use_count == 0
        assert side.avail(1) == []
        assert pool.in_use_count == 0
    finally:
        side.close()
        other.close()


def _device_write(side, v, bufs, frame: bytes, mrg=True):
    """Write ``frame`` across the posted buffers ``bufs`` (ids); returns used entries."""
    ents, rest = [], bytes(10) + struct.pack("<H", len(bufs)) + frame
    for k, hd in enumerate(bufs):
        a, cap, fl = side.chain(v, hd)[0]
        assert fl == 2
        c = rest[:cap] if k < len(bufs) - 1 else rest
        assert len(c) <= cap
        side.view(a, len(c))[:] = np.frombuffer(c, np.uint8)
        rest = rest[len(c):]
        ents.append((hd, len(c)))
    return ents


def test_rx_posts_mbufs_and_builds_chains_from_mergeable_buffers(pool):
    side = Side(pool, N)
    try:
        assert _rx(pool, side).size == 0                   # posts the ring (refill)
        bufs = side.avail(0)
        assert len(bufs) == N and pool.in_use_count == N
        cap = side.chain(0, bufs[0])[0][1]
        frames = [b"a" * 60, b"b" * (cap - 12 + 500), b"c" * 1500]
        ents = _device_write(side, 0, bufs[:1], frames[0])
        ents += _device_write(side, 0, bufs[1:3], frames[1])
        ents += _device_write(side, 0, bufs[3:4], frames[2])
        side.put_used(0, ents)
        got = _rx(pool, side)
        assert [_bytes(pool, h) for h in got] == frames
        assert [pool.mbuf(int(h)).nb_segs for h in got] == [1, 2, 1]
        assert all(pool.mbuf(int(h)).port == 3 for h in got)
        pool.free_bulk(got)
        assert pool.in_use_count == N                       # all refilled
    finally:
        side.close()
    assert pool.in_use_count == 0


def test_rx_waits_for_the_rest_of_a_packet(pool):
    side = Side(pool, N)
    try:
        _rx(pool, side)
        bufs = side.avail(0)
        cap = side.chain(0, bufs[0])[0][1]
        ents = _device_write(side, 0, bufs[:2], b"z" * (cap + 100))
        side.put_used(0, ents[:1])                          # half of it published
        assert _rx(pool, side).size == 0 and side.q[0].st[QS_UP]
        side.put_used(0, ents[1:])
        got = _rx(pool, side)
        assert [len(_bytes(pool, h)) for h in got] == [cap + 100]
        pool.free_bulk(got)
    finally:
        side.close()
    assert pool.in_use_count == 0


# -- hostile back ends: the kernels against the naive model ---------------------------------
ids = st.integers(0, N + 4)


@settings(deadline=None)
@given(nposted=st.integers(1, 6), segs=st.lists(st.integers(1, 3), min_size=6, max_size=6),
       entries=st.lists(st.tuples(ids, st.integers(0, 4000)), max_size=8),
       extra=st.integers(-2, 3), honest=st.integers(0, 6))
def test_tx_hostile_used_entries_match_the_model(pool, nposted, segs, entries, extra, honest):
    side = Side(pool, N)
    try:
        hs = [_pkt(pool, bytes([i]) * 70, segs[i]) for i in range(nposted)]
        k = _tx(pool, side, hs)
        pool.free_bulk(hs[k:])
        heads = side.avail(1)
        outstanding = {hd: hs[i] for i, hd in enumerate(heads)}
        # a prefix of honest entries, then whatever the fuzzer says
        ents = [(hd, 0) for hd in heads[:honest]] + entries
        delta = max(0, len(ents) + extra)
        side.put_used(1, ents, advance=delta)
        ents = (ents + [(0, 0)] * N)[:max(delta, 0)]
        # the ring memory holds zeros past what we wrote: entry (0, 0)
        want, back = naive.tx_reclaim(dict(outstanding), ents, delta)
        before = pool.in_use_count
        assert _tx(pool, side, []) == 0
        q = side.q[1]
        assert int(q.st[QS_ERR]) == want
        assert bool(q.st[QS_UP]) == (want == 0)
        freed = before - pool.in_use_count
        assert freed == sum(segs[hs.index(p)] for p in back)
    finally:
        side.close()
    assert pool.in_use_count == 0


@settings(deadline=None)
@given(rounds=st.lists(st.tuples(st.lists(st.integers(1, 3), min_size=1, max_size=5),
                                 st.integers(0, 6)), min_size=1, max_size=6))
def test_tx_in_order_reclaims_by_index_and_keeps_chains_consecutive(pool, rounds):
    """IN_ORDER: chains take consecutive descriptors (wrapping at the table's end), and the
    used index alone frees the oldest chains (ids are not read: a device may skip them)."""
    side = Side(pool, N, in_order=True)
    try:
        outstanding = []
        for segs, done in rounds:
            hs = [_pkt(pool, b"\x55" * 90, s) for s in segs]
            k = _tx(pool, side, hs)
            pool.free_bulk(hs[k:])
            new = side.avail(1)
            assert len(new) == k
            for h, hd in zip(hs[:k], new):
                nxt = hd
                for _ in range(pool.mbuf(h).nb_segs):      # header + segments, or pushed
                    _a, _ln, fl, nx = side.desc(1, nxt)
                    if not fl & 1:
                        break
                    assert nx == (nxt + 1) % N
                    nxt = nx
            outstanding += hs[:k]
            done = min(done, len(outstanding) + 1)
            side.put_used(1, [(0xFFFF, 7)] * min(done, N), advance=done)   # ids are junk
            want, back = naive.tx_reclaim_in_order(outstanding, done)
            before = pool.in_use_count
            _tx(pool, side, [])
            assert int(side.q[1].st[QS_ERR]) == want
            if want:
                break
            assert before - pool.in_use_count == sum(len(_segs_of(p)) for p in back)
    finally:
        side.close()
    assert pool.in_use_count == 0


@settings(deadline=None)
@given(entries=st.lists(st.tuples(st.integers(0, N + 2),
                                  st.one_of(st.integers(0, 40), st.integers(2040, 2080),
                                            st.integers(0, 70000)),
                                  st.integers(0, 4)), max_size=10),
       extra=st.integers(-2, 3), mrg=st.booleans(), n=st.integers(1, 8))
def test_rx_hostile_used_entries_match_the_model(pool, entries, extra, mrg, n):
    side = Side(pool, N, mrg=mrg)
    try:
        _rx(pool, side)
        bufs = side.avail(0)
        posted = {hd: side.chain(0, hd)[0][1] for hd in bufs}
        nbufs = {}
        for hd, _ln, nb in entries:       # the back end's num_buffers, in the buffer's header
            if hd in posted and hd not in nbufs:
                a = side.chain(0, hd)[0][0]
                side.view(a + 10, 2)[:] = np.frombuffer(struct.pack("<H", nb), np.uint8)
                nbufs[hd] = nb
        ents = [(hd, ln) for hd, ln, _ in entries]
        delta = max(0, len(ents) + extra)
        side.put_used(0, ents, advance=delta)
        ents = (ents + [(0, 0)] * N)[:delta]
        want, pkts, _short, _j = naive.rx_harvest(dict(posted), ents, delta, nbufs, mrg, n)
        got = _rx(pool, side, n)
        q = side.q[0]
        assert int(q.st[QS_ERR]) == want
        assert [[len(pool.mbuf(int(s)).data) for s in _segments(pool, h)] for h in got] == pkts
        pool.free_bulk(got)
    finally:
        side.close()
    assert pool.in_use_count == 0


_SEGS = {}


def _segs_of(h):
    return _SEGS[h]


def _segments(pool, h):
    out, m = [], pool.mbuf(int(h))
    while m is not None:
        out.append(int(m))
        m = m.next
    return out


def test_the_used_index_running_ahead_fails_the_queue(pool):
    side = Side(pool, N)
    try:
        h = _pkt(pool, b"q" * 64, 1)
        assert _tx(pool, side, [h]) == 1
        side.put_used(1, [], advance=2)
        _tx(pool, side, [])
        assert side.q[1].st[QS_ERR] == V_USED_IDX and not side.q[1].st[QS_UP]
        assert side.release() == 1
    finally:
        side.close()
    assert pool.in_use_count == 0
