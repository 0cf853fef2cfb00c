"""The front end's packed-ring kernels against a back end played in Python (packed_side.py)
and against the naive model (naive.py): chains at consecutive slots with the first flags
written last, Rx into posted mbufs with mergeable buffers, IN_ORDER batches, wrap counters
flipping, and hostile used descriptors -- every violation rejected with the right code,
nothing leaked, every mbuf back once the rings are released."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.drivers.virtio_user.layout import (QS_ERR, QS_UP, QS_USED_SEEN, QS_USED_WRAP,
                                               V_USED_IDX, V_USED_LEN)
from pktbuf.drivers.virtio_user.rx import virtio_user_rx_burst
from pktbuf.drivers.virtio_user.tx import virtio_user_tx_burst

from . import naive
from .packed_side import F_AVAIL, F_NEXT, F_USED, F_WRITE, PackedSide

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


def _nsegs(pool, h) -> int:
    return int(pool.mbuf(int(h)).nb_segs)


def test_packed_tx_chains_are_consecutive_and_come_back(pool):
    side = PackedSide(pool, N)
    try:
        frames = [bytes([i]) * (60 + 37 * i) for i in range(5)]
        hs = [_pkt(pool, f, 1 + i % 3) for i, f in enumerate(frames)]
        assert _tx(pool, side, hs) == 5
        chains = side.avail(1)
        assert len(chains) == 5
        assert len({bid for bid, _ in chains}) == 5
        for k, (bid, descs) in enumerate(chains):
            assert all(fl & F_AVAIL and not fl & F_USED for _, _, fl in descs)
            assert [bool(fl & F_NEXT) for _, _, fl in descs] == [True] * (len(descs) - 1) + [False]
            body = b"".join(side.view(a, ln).tobytes() for a, ln, _ in descs)
            assert body == bytes(12) + frames[k]
            assert len(descs) == (1 if k % 3 == 0 else 1 + k % 3 + 1)
        # hand them back out of order
        side.put_used(1, [(bid, 0, len(d)) for bid, d in reversed(chains)])
        assert _tx(pool, side, []) == 0
        assert pool.in_use_count == 0
    finally:
        side.close()


def test_packed_tx_in_order_batch_and_wrap(pool):
    """IN_ORDER: ids are the first slots; one used descriptor naming the last chain of a batch
    frees the whole batch; many rounds flip the wrap counters."""
    side = PackedSide(pool, N, in_order=True)
    wraps = set()
    try:
        for r in range(7):
            hs = [_pkt(pool, b"\x55" * 90, 1 + (r + i) % 3) for i in range(3)]
            assert _tx(pool, side, hs) == 3
            chains = side.avail(1)
            first = side.used_pos[1][0]
            assert chains[0][0] == first
            nd = sum(len(d) for _, d in chains)
            side.put_used(1, [(chains[-1][0], 0, nd)])          # one descriptor: the batch
            _tx(pool, side, [])
            assert side.q[1].st[QS_ERR] == 0
            assert pool.in_use_count == 0
            assert [int(side.q[1].st[QS_USED_SEEN]), int(side.q[1].st[QS_USED_WRAP])] \
                == side.used_pos[1]
            wraps.add(side.used_pos[1][1])
        assert wraps == {0, 1}
    finally:
        side.close()


def _device_write(side, bufs, frame: bytes):
    """Write ``frame`` across the posted buffers ``bufs`` (``(id, addr, cap)``); returns the
    used entries ``(id, len, 1)``."""
    ents, rest = [], bytes(10) + struct.pack("<H", len(bufs)) + frame
    for k, (bid, a, cap) in enumerate(bufs):
        c = rest[:cap] if k < len(bufs) - 1 else rest
        assert len(c) <= cap
        side.view(a, len(c))[:] = np.frombuffer(c, np.uint8)
        rest = rest[len(c):]
        ents.append((bid, len(c), 1))
    return ents


def _posted(side):
    out = []
    for bid, descs in side.avail(0):
        (a, cap, fl), = descs
        assert fl & F_WRITE
        out.append((bid, a, cap))
    return out


def test_packed_rx_mergeable_chains_and_waiting_for_the_rest(pool):
    side = PackedSide(pool, N)
    try:
        assert _rx(pool, side).size == 0                       # posts the ring
        bufs = _posted(side)
        assert len(bufs) == N and pool.in_use_count == N
        cap = bufs[0][2]
        frames = [b"a" * 60, b"b" * (cap - 12 + 500), b"c" * 1500]
        e0 = _device_write(side, bufs[:1], frames[0])
        e1 = _device_write(side, bufs[1:3], frames[1])
        e2 = _device_write(side, bufs[3:4], frames[2])
        side.put_used(0, e0)
        side.put_used(0, e1[:1])                               # half of the second packet
        got = _rx(pool, side)
        assert [_bytes(pool, h) for h in got] == frames[:1]
        pool.free_bulk(got)
        side.put_used(0, e1[1:] + e2)
        got = _rx(pool, side)
        assert [_bytes(pool, h) for h in got] == frames[1:]
        assert [_nsegs(pool, h) for h in got] == [2, 1]
        assert all(pool.mbuf(int(h)).port == 3 for h in got)
        pool.free_bulk(got)
        assert pool.in_use_count == N                          # refilled
    finally:
        side.close()
    assert pool.in_use_count == 0


# -- hostile back ends: the kernels against the naive model ---------------------------------
def _id(choice, known):
    kind, v = choice
    return known[v % len(known)] if kind == "known" and known else v


id_choice = st.one_of(st.tuples(st.just("known"), st.integers(0, 15)),
                      st.tuples(st.just("raw"), st.integers(0, N + 3)))
modes = st.sampled_from([0, 0, 0, 1, 2, 3])     # 0 used, 1 pending, 2 stale, 3 neither
gaps = st.sampled_from([0, 0, 0, 1, 2, 3])      # slots skipped before the next descriptor


def _flags(mode, wrap, ln):
    a, u = [(wrap, wrap), (wrap, 1 - wrap), (1 - wrap, 1 - wrap), (1 - wrap, wrap)][mode]
    return (F_AVAIL if a else 0) | (F_USED if u else 0) | (F_WRITE if ln else 0)


def _scribble(side, v, entries, known):
    """Write the fuzzer's descriptors from the device's used slot on, at the given gaps."""
    slot, wrap = side.used_pos[v]
    out = []
    for gap, choice, ln, mode in entries:
        slot += gap
        if slot >= N:
            slot, wrap = slot - N, wrap ^ 1
        bid = _id(choice, known)
        side.write(v, slot, bid, ln, _flags(mode, wrap, ln))
        out.append(bid)
    return out


@settings(deadline=None, max_examples=150)
@given(pre=st.integers(0, 4), segs=st.lists(st.integers(1, 3), min_size=6, max_size=6),
       nposted=st.integers(0, 6), honest=st.integers(0, 6), in_order=st.booleans(),
       entries=st.lists(st.tuples(gaps, id_choice, st.integers(0, 100), modes),
                        max_size=6))
def test_packed_tx_hostile_used_descriptors_match_the_model(pool, pre, segs, nposted, honest,
                                                            in_order, entries):
    side = PackedSide(pool, N, in_order=in_order)
    try:
        for r in range(pre):                   # honest rounds: the slots move, wraps flip
            hs = [_pkt(pool, b"\x01" * 80, 2) for _ in range(4)]
            assert _tx(pool, side, hs) == 4
            side.put_used(1, [(bid, 0, len(d)) for bid, d in side.avail(1)])
            _tx(pool, side, [])
            assert pool.in_use_count == 0 and side.q[1].st[QS_ERR] == 0
        hs = [_pkt(pool, bytes([i]) * 70, segs[i]) for i in range(nposted)]
        k = _tx(pool, side, hs)
        pool.free_bulk(hs[k:])
        chains = side.avail(1)
        assert len(chains) == k
        outstanding = {bid: (hs[i], len(d)) for i, (bid, d) in enumerate(chains)}
        slot0, wrap0 = side.used_pos[1]
        side.put_used(1, [(bid, 0, len(d)) for bid, d in chains[:honest]])
        _scribble(side, 1, entries, list(outstanding))
        want, back, slot, wrap = naive.packed_tx_reclaim(side.ring(1), slot0, wrap0,
                                                         dict(outstanding), in_order)
        event(f"violation {want}, {len(back)} back")
        before = pool.in_use_count
        assert _tx(pool, side, []) == 0
        q = side.q[1]
        assert int(q.st[QS_ERR]) == want
        assert bool(q.st[QS_UP]) == (want == 0)
        nsegs = {h: segs[i] for i, h in enumerate(hs)}
        assert before - pool.in_use_count == sum(nsegs[p] for p in back)
        if want == 0:
            assert [int(q.st[QS_USED_SEEN]), int(q.st[QS_USED_WRAP])] == [slot, wrap]
    finally:
        side.close()
    assert pool.in_use_count == 0


@settings(deadline=None, max_examples=150)
@given(pre=st.integers(0, 3), mrg=st.booleans(), n=st.integers(1, 8),
       honest=st.lists(st.tuples(st.integers(14, 3000), st.booleans()), max_size=4),
       entries=st.lists(st.tuples(gaps, id_choice,
                                  st.one_of(st.integers(0, 40),
                                            st.integers(-2, 2).map(lambda d: ("cap", d)),
                                            st.integers(2040, 2080), st.integers(0, 70000)),
                                  modes, st.integers(0, 4)), max_size=8))
def test_packed_rx_hostile_used_descriptors_match_the_model(pool, pre, mrg, n, honest,
                                                            entries):
    side = PackedSide(pool, N, mrg=mrg)
    try:
        _rx(pool, side)
        held = _posted(side)
        for r in range(pre):                   # honest rounds: 5 one-buffer frames each
            ents = []
            for b in held[:5]:
                ents += _device_write(side, [b], bytes([r]) * 100)
            side.put_used(0, ents)
            got = _rx(pool, side)
            assert [len(_bytes(pool, h)) for h in got] == [100] * 5
            pool.free_bulk(got)
            held = held[5:] + _posted(side)
        posted = {bid: cap for bid, _a, cap in held}
        addr = {bid: a for bid, a, _cap in held}
        slot0, wrap0 = side.used_pos[0]
        nbufs, i = {}, 0
        for size, two in honest:               # well formed packets first, 1 or 2 buffers
            nb = 2 if two and mrg else 1
            size = min(size, held[0][2] - 12) if nb == 1 else size
            if i + nb > len(held):
                break
            side.put_used(0, _device_write(side, held[i:i + nb], bytes(size)))
            nbufs[held[i][0]] = nb
            i += nb
        cap = held[0][2]                       # -2..2: that far from the buffers' capacity
        entries = [(g, c, cap + ln[1] if isinstance(ln, tuple) else ln, m, nb)
                   for g, c, ln, m, nb in entries]
        bids = _scribble(side, 0, [e[:4] for e in entries], list(posted))
        for bid, (_g, _c, _ln, _m, nb) in zip(bids, entries):   # num_buffers in the header
            if bid in posted and bid not in nbufs:
                side.view(addr[bid] + 10, 2)[:] = np.frombuffer(struct.pack("<H", nb), np.uint8)
                nbufs[bid] = nb
        want, pkts, _short = naive.packed_rx_harvest(side.ring(0), slot0, wrap0, dict(posted),
                                                     nbufs, mrg, n)
        event(f"violation {want}, {len(pkts)} packets")
        got = _rx(pool, side, n)
        q = side.q[0]
        assert int(q.st[QS_ERR]) == want
        assert [[len(pool.mbuf(s).data) for s in _segments(pool, h)] for h in got] == pkts
        pool.free_bulk(got)
    finally:
        side.close()
    assert pool.in_use_count == 0


def _segments(pool, h):
    out, m = [], pool.mbuf(int(h))
    while m is not None:
        out.append(int(m))
        m = m.next
    return out


def test_packed_used_descriptor_with_nothing_outstanding_fails_the_queue(pool):
    side = PackedSide(pool, N)
    try:
        side.write(1, 0, 0, 0, F_AVAIL | F_USED)      # used, wrap 1, but nothing was posted
        _tx(pool, side, [])
        assert side.q[1].st[QS_ERR] == V_USED_IDX and not side.q[1].st[QS_UP]
        assert side.release() == 0
    finally:
        side.close()
    assert pool.in_use_count == 0


@pytest.mark.parametrize("extra,want", [(0, 0), (1, V_USED_LEN)])
def test_packed_rx_length_up_to_the_buffer_and_not_one_past(pool, extra, want):
    side = PackedSide(pool, N, mrg=False)
    try:
        _rx(pool, side)
        (bid, a, cap), = _posted(side)[:1]
        side.view(a, cap)[:] = 7
        side.put_used(0, [(bid, cap + extra, 1)])
        got = _rx(pool, side)
        assert int(side.q[0].st[QS_ERR]) == want
        assert [len(_bytes(pool, h)) for h in got] == ([cap - 12] if want == 0 else [])
        pool.free_bulk(got)
    finally:
        side.close()
    assert pool.in_use_count == 0
