"""VIRTIO_RING_F_EVENT_IDX on the front end (``event_idx=1``): kicks follow the device's
``avail_event`` (split) or its DESC-mode ``off_wrap`` (packed) exactly, counted kick by kick
against the rule of virtio 1.1 §2.6.7.2 / §2.7.10 computed here; against pktbuf's back end
over a real socket the frames are byte-exact both ways, the kicks and calls are the few the
stale events allow, and rx_wait on either side is woken through the event words."""
from __future__ import annotations

import os
import struct
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.drivers.vhost import layout as VL
from pktbuf.drivers.vhost import proto as P
from pktbuf.drivers.vhost.api.port import VhostPort
from pktbuf.drivers.virtio_user import layout as UL
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort
from pktbuf.drivers.virtio_user.tx import virtio_user_tx_burst

from .device_side import Side
from .packed_side import PackedSide
from .test_pair import _frames, _move, _pkt


@pytest.fixture(scope="module")
def pool():
    p = pktbuf.PktmbufPool(2048)
    yield p
    assert p.in_use_count == 0
    p.close()


def _need_event(event, new, old):
    return (new - event - 1) & 0xFFFF < (new - old) & 0xFFFF


def _kicks(fd):
    try:
        return os.eventfd_read(fd)
    except BlockingIOError:
        return 0


def _tx(pool, q, k):
    hs = np.array([_pkt(pool, bytes([i]) * 60, 1) for i in range(k)], np.int32)
    assert virtio_user_tx_burst(pool.domain.state, q, -1, hs, hs.size) == k


@settings(max_examples=60, deadline=None)
@given(start=st.sampled_from([0, 1, 65530, 65535]),
       steps=st.lists(st.tuples(st.integers(1, 4), st.integers(-3, 6)), min_size=1,
                      max_size=12))
def test_split_kicks_follow_avail_event(pool, start, steps):
    """Each burst moves avail.idx from old to new; it kicks iff the rule says so for the
    avail_event the device wrote before it (some behind, some ahead of the index)."""
    kick = os.eventfd(0, os.EFD_NONBLOCK)
    side = Side(pool, n=64, kickfd=kick, event_idx=True)
    try:
        q = side.q[1]
        q.st[UL.QS_AVAIL_IDX] = start
        ev_addr = q.cfg[UL.Q_USED] + 4 + 8 * 64
        idx = start
        for k, rel in steps:
            ev = (idx + rel) & 0xFFFF
            side.view(ev_addr, 2)[:] = np.frombuffer(struct.pack("<H", ev), np.uint8)
            _tx(pool, q, k)
            new = (idx + k) & 0xFFFF
            assert _kicks(kick) == int(_need_event(ev, new, idx)), (ev, idx, new)
            idx = new
        # the flag rule is not used with EVENT_IDX: NO_NOTIFY set, yet the event asks
        side.view(q.cfg[UL.Q_USED], 2)[:] = np.frombuffer(struct.pack("<H", 1), np.uint8)
        side.view(ev_addr, 2)[:] = np.frombuffer(struct.pack("<H", idx), np.uint8)
        _tx(pool, q, 1)
        assert _kicks(kick) == 1
    finally:
        side.close()
        os.close(kick)


def _desc_event(side, q, slot, wrap, flags=VL.EVENT_F_DESC):
    side.view(q.cfg[UL.Q_USED], 4)[:] = np.frombuffer(
        struct.pack("<HH", slot | wrap << 15, flags), np.uint8)


@pytest.mark.parametrize("event_idx", [True, False])
def test_packed_kicks_follow_the_desc_event(pool, event_idx):
    """DESC mode: a kick only for the burst that makes the named descriptor available (slot
    and lap); without EVENT_IDX DESC is not a mode the driver knows, so it kicks."""
    n = 16
    kick = os.eventfd(0, os.EFD_NONBLOCK)
    side = PackedSide(pool, n=n, kickfd=kick, event_idx=event_idx)
    try:
        q = side.q[1]
        _desc_event(side, q, 5, 1)
        got = []
        for _ in range(8):                    # slots 0..7 of lap 1, one per burst
            _tx(pool, q, 1)
            got.append(_kicks(kick))
        assert got == ([0, 0, 0, 0, 0, 1, 0, 0] if event_idx else [1] * 8)
        _desc_event(side, q, 2, 0)           # slot 2 of the next lap
        _tx(pool, q, 3)                      # slots 8..10: no
        assert _kicks(kick) == (0 if event_idx else 1)
        _desc_event(side, q, 2, 1)           # slot 2 of this lap: already passed
        _tx(pool, q, 2)
        assert _kicks(kick) == (0 if event_idx else 1)
        # hand everything back, then the next lap: slots 13..15 of lap 1 and 0..2 of lap 0
        side.put_used(1, [(bid, 0, 1) for bid in [d[0] for d in side.ring(1)[:13]]])
        _desc_event(side, q, 2, 0)
        _tx(pool, q, 3)                      # slots 13..15
        assert _kicks(kick) == (0 if event_idx else 1)
        _tx(pool, q, 3)                      # slots 0..2 of lap 0: the event
        assert _kicks(kick) == 1
        _desc_event(side, q, 0, 0, VL.EVENT_F_DISABLE)
        _tx(pool, q, 1)
        assert _kicks(kick) == 0
    finally:
        side.close()
        os.close(kick)


# -- against pktbuf's back end over a socket -----------------------------------------------

@pytest.fixture
def pools():
    a, b = pktbuf.PktmbufPool(2048), pktbuf.PktmbufPool(2048)
    yield a, b
    assert a.in_use_count == 0 and b.in_use_count == 0
    a.close()
    b.close()


def _sleep_then(port, q, waits_word, send):
    res = {}
    w0 = int(q.st[waits_word])
    th = threading.Thread(target=lambda: res.__setitem__("r", port.rx_wait(0, 15000)))
    t = time.monotonic()
    th.start()
    end = time.monotonic() + 10
    while q.st[waits_word] == w0 and time.monotonic() < end:
        time.sleep(0.002)
    time.sleep(0.02)
    assert q.st[waits_word] == w0 + 1 and th.is_alive()
    send()
    th.join(15)
    assert not th.is_alive() and res["r"] == 1
    assert time.monotonic() - t < 10, "slept through: the peer did not notify"


@pytest.mark.parametrize("packed", [False, True], ids=["split", "packed"])
def test_event_idx_with_pktbufs_back_end(tmp_path, pools, packed):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, event_idx=True, packed_vq=packed, queue_size=64)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20), fe.disconnect_reason
        assert fe.features >> P.VIRTIO_RING_F_EVENT_IDX & 1
        assert fe.tx_queue(0).cfg[UL.Q_EVENT_IDX] == 1
        calls0 = int(be.tx_queue(0).st[VL.QS_CALLS])
        fs = _frames(150, 1)
        assert _move(fe, [_pkt(pa, f, 1 + i % 3) for i, f in enumerate(fs)], be, pb) == fs
        fe.tx_burst([])
        fs = _frames(150, 2)
        assert _move(be, [_pkt(pb, f, 1 + i % 3) for i, f in enumerate(fs)], fe, pa) == fs
        if not packed:
            # the back end polls and leaves avail_event at 0: the first burst passes it (one
            # kick), the rest do not; likewise used_event for its calls
            assert int(fe.tx_queue(0).st[UL.QS_KICKS]) == 1
            assert int(be.tx_queue(0).st[VL.QS_CALLS]) - calls0 == 1
        else:
            # packed: the back end's device area says DISABLE, ours DISABLE
            assert int(fe.tx_queue(0).st[UL.QS_KICKS]) == 0
            assert int(be.tx_queue(0).st[VL.QS_CALLS]) - calls0 == 0
        # interrupt mode through the event words: the back end asks with avail_event, the
        # front end with used_event (split); ENABLE (packed)
        for k in range(2):
            _sleep_then(be, be.rx_queue(0), VL.QS_WAITS,
                        lambda: fe.tx_burst([_pkt(pa, b"\x11" * 64, 1)]))
            hs = be.rx_burst(32)
            assert len(hs) == 1
            pb.free_bulk(hs)
            _sleep_then(fe, fe.rx_queue(0), UL.QS_WAITS,
                        lambda: be.tx_burst([_pkt(pb, b"\x22" * 64, 1)]))
            hs = fe.rx_burst(32)
            assert len(hs) == 1
            pa.free_bulk(hs)
        fe.tx_burst([])
        assert fe.link_up and be.link_up
    finally:
        fe.close()
        be.close()


def test_event_idx_devarg(tmp_path, pools):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    ports = pktbuf.Ports(pa)
    try:
        fe = ports.open(f"net_virtio_user0,path={path},event_idx=1")
        assert fe.wait_link_up(20)
        assert fe.features >> P.VIRTIO_RING_F_EVENT_IDX & 1
        fe2 = VirtioUserPort(str(tmp_path / "t"), pa, server=True)
        try:
            assert not fe2.device.wanted >> P.VIRTIO_RING_F_EVENT_IDX & 1   # off by default
        finally:
            fe2.close()
    finally:
        ports.close()
        be.close()
