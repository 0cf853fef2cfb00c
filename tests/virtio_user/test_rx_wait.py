"""Interrupt mode between pktbuf's two ends over a real socket, split and packed rings:
``port.rx_wait`` on either side sleeps until the other side sends (the frames then arrive
byte-exact), times out when nothing comes, asks for notifications only while it sleeps,
returns -ENETDOWN when the peer goes away while it sleeps, and loses no wake-up when the
back end (compiled, on its own core) sends around the moment the receiver looks (a wait
without its second look fails that test)."""
from __future__ import annotations

import errno
import os
import threading
import time

import numpy as np
import pytest
from numba import njit

import pktbuf
from pktbuf.atomics import cpu_pause, load_acquire
from pktbuf.buf.mbuf.free import pktmbuf_free
from pktbuf.buf.mbuf.raw import pktmbuf_alloc
from pktbuf.drivers.vhost import layout as VL
from pktbuf.drivers.vhost.tx import vhost_tx_burst
from pktbuf.drivers.vhost.api.port import VhostPort
from pktbuf.drivers.virtio_user import layout as UL
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort
from pktbuf.drivers.virtio_user.rx import virtio_user_rx_burst
from pktbuf.drivers.virtio_user.wait import virtio_user_rx_wait
from pktbuf.errors import InvalidArgument
from pktbuf.idle import now_ns, usleep

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


# -- the race at full speed, front end side: pktbuf's back end (compiled) sends one frame at
# a time, timed around the moment the receiver enters virtio_user_rx_wait (its gate count);
# a wait without the second look would sleep through frames the back end did not call for

@njit(nogil=True)
def _device(dom, pid, q, rxst, count, seed):
    """Send ``count`` 60-byte frames on the back end's Tx queue ``q``, each after the front
    end's receiver took the last and entered its gate again (bounded waits), plus a random
    pause of 0..~2 us.  Returns the frames sent."""
    x = np.uint64(seed) | np.uint64(1)
    pk = np.zeros(1, np.int32)
    sent = 0
    mb = dom.mb
    while sent < count:
        h = pktmbuf_alloc(dom, pid, -1)     # before the timing starts
        if h < 0:
            usleep(100)
            continue
        m = mb[h]
        m.data_len = 60
        m.pkt_len = 60
        pk[0] = h
        t = now_ns()
        while load_acquire(rxst, 1) != 0 and now_ns() - t < 20_000:
            cpu_pause()
        while load_acquire(rxst, 1) == 0 and now_ns() - t < 40_000:
            cpu_pause()
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
        for _ in range(np.int64(x % np.uint64(24))):
            cpu_pause()
        if vhost_tx_burst(dom, q, -1, pk, 1) == 1:
            sent += 1
        else:
            pktmbuf_free(dom, -1, np.int64(h))
            usleep(10)
        t = now_ns()                    # until the receiver took it
        while load_acquire(rxst, UL.QS_PACKETS) < sent and now_ns() - t < 5_000_000_000:
            cpu_pause()
    return sent


@njit(nogil=True)
def _receiver(dom, q, count, timeout_ms, out):
    got = 0
    slow = 0
    while got < count:
        t = now_ns()
        r = virtio_user_rx_wait(q, timeout_ms)
        if r < 0:
            break
        timed_out = now_ns() - t >= timeout_ms * 1_000_000
        k = virtio_user_rx_burst(dom, q, -1, out, 32)
        if timed_out and k > 0:
            slow += 1
        for j in range(k):
            pktmbuf_free(dom, -1, np.int64(out[j]))
        got += k
    return got, slow


def test_front_end_no_lost_wake_up_at_full_speed(pair):
    fe, be, pa, pb = pair
    count = 3000
    rxq, txq = fe.rx_queue(0), be.tx_queue(0)
    out = np.zeros(32, np.int32)
    res = {}
    cpus = sorted(os.sched_getaffinity(0))
    pin = len(cpus) >= 2

    def rx():
        if pin:
            os.sched_setaffinity(0, {cpus[0]})
        res["rx"] = _receiver(pa.domain.state, rxq, count, 500, out)

    _device(pb.domain.state, pb.id, txq, rxq.st, 0, 1)          # compiled before
    th = threading.Thread(target=rx)
    th.start()
    try:
        if pin:
            os.sched_setaffinity(0, {cpus[1]})
        sent = _device(pb.domain.state, pb.id, txq, rxq.st, count, 777)
    finally:
        os.sched_setaffinity(0, cpus)
        th.join(60)
    got, slow = res["rx"]
    assert sent == count and got == count
    assert slow == 0, f"{slow} waits slept through their timeout with a frame pending"
    assert rxq.st[UL.QS_WAITS] > 0
