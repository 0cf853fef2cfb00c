"""Interrupt mode between pktbuf's two ends over a real socket, split and packed rings:
``port.rx_wait`` on either side sleeps until the other side sends (the frames then arrive
byte-exact), times out when nothing comes, asks for notifications only while it sleeps, and
returns -ENETDOWN when the peer goes away while it sleeps."""
from __future__ import annotations

import errno
import threading
import time

import pytest

import pktbuf
from pktbuf.drivers.vhost import layout as VL
from pktbuf.drivers.vhost.api.port import VhostPort
from pktbuf.drivers.virtio_user import layout as UL
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort
from pktbuf.errors import InvalidArgument

from .test_pair import _bytes, _frames, _pkt


@pytest.fixture
def pools():
    a, b = pktbuf.PktmbufPool(2048), pktbuf.PktmbufPool(2048)
    yield a, b
    assert a.in_use_count == 0 and b.in_use_count == 0
    a.close()
    b.close()


@pytest.fixture(params=["split", "packed"])
def pair(request, tmp_path, pools):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, packed_vq=request.param == "packed", queue_size=64)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20), (fe.disconnect_reason,
                                                             be.disconnect_reason)
        assert be.device.packed == (request.param == "packed")
        yield fe, be, pa, pb
    finally:
        fe.close()
        be.close()


def _u16(addr):
    import ctypes
    return ctypes.c_uint16.from_address(int(addr)).value


def _be_asks_for_kicks(be):
    """The back end's request on its Rx vring (the guest's Tx), as the front end reads it."""
    q = be.rx_queue(0)
    if q.cfg[VL.Q_PACKED]:
        return _u16(q.cfg[VL.Q_USED] + 2) != VL.EVENT_F_DISABLE
    return _u16(q.cfg[VL.Q_USED]) & VL.USED_F_NO_NOTIFY == 0


def _fe_asks_for_calls(fe):
    q = fe.rx_queue(0)
    if q.cfg[UL.Q_PACKED]:
        return _u16(q.cfg[UL.Q_AVAIL] + 2) != VL.EVENT_F_DISABLE
    return _u16(q.cfg[UL.Q_AVAIL]) & VL.AVAIL_F_NO_INTERRUPT == 0


def _wake_case(rx, tx, rx_pool, tx_pool, asks, waits_word, frames):
    """``rx`` sleeps in rx_wait while ``tx`` sends ``frames`` a moment later; the wait
    returns 1 and the frames arrive byte-exact."""
    q = rx.rx_queue(0)
    res = {}
    w0 = int(q.st[waits_word])
    th = threading.Thread(target=lambda: res.__setitem__("r", rx.rx_wait(0, 15000)))
    t = time.monotonic()
    th.start()
    end = time.monotonic() + 10
    while q.st[waits_word] == w0 and time.monotonic() < end:
        time.sleep(0.002)
    time.sleep(0.02)
    assert q.st[waits_word] == w0 + 1          # it sleeps in poll() ...
    assert asks()                              # ... and asked the peer to notify it
    hs = [_pkt(tx_pool, f, 1 + i % 2) for i, f in enumerate(frames)]
    sent = tx.tx_burst(hs)
    assert sent == len(hs)
    th.join(15)
    assert not th.is_alive() and res["r"] == 1
    assert time.monotonic() - t < 10           # woken, not timed out
    assert not asks()                          # polling again: no notifications wanted
    got, end = [], time.monotonic() + 10
    while len(got) < len(frames) and time.monotonic() < end:
        hs = rx.rx_burst(32)
        got += [_bytes(rx_pool, h) for h in hs]
        rx_pool.free_bulk(hs)
    return got


def test_back_end_sleeps_until_the_front_end_sends(pair):
    fe, be, pa, pb = pair
    for k in range(3):
        fs = _frames(5, 30 + k, top=1514)
        assert _wake_case(be, fe, pb, pa, lambda: _be_asks_for_kicks(be), VL.QS_WAITS,
                          fs) == fs
    fe.tx_burst([])
    assert be.rx_queue(0).st[VL.QS_WAITS] == 3


def test_front_end_sleeps_until_the_back_end_sends(pair):
    fe, be, pa, pb = pair
    fe.rx_burst(0)
    calls0 = int(be.tx_queue(0).st[VL.QS_CALLS])
    for k in range(3):
        fs = _frames(5, 40 + k, top=1514)
        assert _wake_case(fe, be, pa, pb, lambda: _fe_asks_for_calls(fe), UL.QS_WAITS,
                          fs) == fs
    assert fe.rx_queue(0).st[UL.QS_WAITS] == 3
    # the back end called for the bursts sent while the front end slept, and not for one
    # sent while it polls
    calls = int(be.tx_queue(0).st[VL.QS_CALLS]) - calls0
    assert calls >= 3
    hs = [_pkt(pb, b"\x07" * 64, 1)]
    assert be.tx_burst(hs) == 1
    assert int(be.tx_queue(0).st[VL.QS_CALLS]) - calls0 == calls
    end = time.monotonic() + 5
    while time.monotonic() < end:
        got = fe.rx_burst(32)
        if len(got):
            pa.free_bulk(got)
            break


def test_waits_time_out_when_nothing_comes(pair):
    fe, be, pa, pb = pair
    for port, asks in ((be, lambda: _be_asks_for_kicks(be)),
                       (fe, lambda: _fe_asks_for_calls(fe))):
        t = time.monotonic()
        assert port.rx_wait(0, 150) == 0
        assert time.monotonic() - t >= 0.14
        assert not asks()


def test_a_frame_already_waiting_returns_at_once(pair):
    fe, be, pa, pb = pair
    assert fe.tx_burst([_pkt(pa, b"\x01" * 80, 1)]) == 1
    w = int(be.rx_queue(0).st[VL.QS_WAITS])
    assert be.rx_wait(0, 15000) == 1
    assert int(be.rx_queue(0).st[VL.QS_WAITS]) == w
    hs = be.rx_burst(32)
    assert [_bytes(pb, h) for h in hs] == [b"\x01" * 80]
    pb.free_bulk(hs)
    fe.tx_burst([])


@pytest.mark.parametrize("who", ["front end", "back end"])
def test_the_peer_going_away_returns_a_sleeper(tmp_path, pools, who):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, queue_size=64)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20)
        sleeper, leaver = (be, fe) if who == "front end" else (fe, be)
        res = {}
        th = threading.Thread(target=lambda: res.__setitem__("r", sleeper.rx_wait(0, -1)))
        th.start()
        time.sleep(0.2)
        assert th.is_alive()
        leaver.close()
        th.join(10)
        assert not th.is_alive() and res["r"] == -errno.ENETDOWN
        assert sleeper.rx_wait(0, -1) == -errno.ENETDOWN       # down: at once
    finally:
        fe.close()
        be.close()


def test_rx_wait_arguments(pair):
    fe, be, pa, pb = pair
    for port in (fe, be):
        with pytest.raises(InvalidArgument):
            port.rx_wait(1, 10)
        with pytest.raises(InvalidArgument):
            port.rx_wait(0, -2)
        with pytest.raises(InvalidArgument):
            port.rx_wait(0, 1.5)
