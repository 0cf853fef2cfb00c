"""vhost_rx_wait (interrupt mode on the guest's Tx vring) against a test driver that kicks
only when the back end asked for kicks, as virtio 1.1 §2.6.7.2 / §2.7.10 say a driver does:
split without EVENT_IDX (used flags NO_NOTIFY), split with EVENT_IDX (avail_event) and packed
(device event flags).  The wait returns at once when chains wait, times out with the kicks
off again, is woken by the driver's kick, loses no wake-up whatever the moment the driver
makes its chain available, and returns -ENETDOWN when the queue goes down under it."""
from __future__ import annotations

import errno
import os
import struct
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import pktbuf
from pktbuf.atomics import cpu_pause, fence, load_acquire, load_relaxed, store_release
from pktbuf.buf.mbuf.free import pktmbuf_free
from pktbuf.drivers.vhost import layout as L
from pktbuf.drivers.common.eventfd import eventfd_signal
from pktbuf.drivers.vhost.queue import queue_alloc, queue_down
from pktbuf.drivers.vhost.rx import vhost_rx_burst
from pktbuf.drivers.vhost.vring import need_event
from pktbuf.drivers.vhost.wait import vhost_rx_wait
from pktbuf.idle import now_ns

from .guest import GuestMem, PackedRing, SplitRing

KINDS = ["split", "event_idx", "packed"]
N = 64


@pytest.fixture(scope="module")
def pool():
    p = pktbuf.PktmbufPool(1024)
    yield p
    assert p.in_use_count == 0
    p.close()


class Driver:
    """The guest's Tx side of one vring and its kick eventfd; ``kicks`` counts the kicks."""

    def __init__(self, kind, pool):
        self.kind = kind
        self.mem = GuestMem(1 << 18)
        self.kick = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.q = queue_alloc()
        if kind == "packed":
            self.ring = PackedRing(self.mem, N)
            self.ring.configure(self.q, pool=pool, kickfd=self.kick)
            self.mem.write(self.ring.device + 2, struct.pack("<H", L.EVENT_F_DISABLE))
        else:
            self.ring = SplitRing(self.mem, N)
            self.ring.configure(self.q, pool=pool, event_idx=kind == "event_idx",
                                kickfd=self.kick)
            self.mem.write(self.ring.used, struct.pack("<H", L.USED_F_NO_NOTIFY))
        self.bufs = self.mem.alloc(N * 2048, 64)
        self.sent = 0
        self.kicks = 0

    def asked(self):
        """Whether the back end asks for kicks right now (what a driver reads)."""
        r, m = self.ring, self.mem
        if self.kind == "packed":
            return struct.unpack("<H", m.read(r.device + 2, 2))[0] != L.EVENT_F_DISABLE
        if self.kind == "event_idx":
            return struct.unpack("<H", m.read(r.used + 4 + 8 * N, 2))[0]
        return struct.unpack("<H", m.read(r.used, 2))[0] & L.USED_F_NO_NOTIFY == 0

    def send(self, frame: bytes) -> None:
        """Make one chain (header + frame) available; kick if asked."""
        i = self.sent % N
        off = self.bufs + 2048 * i
        self.mem.write(off, bytes(12) + frame)
        ln = 12 + len(frame)
        r = self.ring
        if self.kind == "packed":
            r.post([(self.mem.gpa + off, ln, 0)])
            call = self.asked()
        else:
            old = r.avail_idx
            r.set_desc(i, self.mem.gpa + off, ln)
            r.make_avail(i)
            if self.kind == "event_idx":
                ev = struct.unpack("<H", self.mem.read(r.used + 4 + 8 * N, 2))[0]
                call = need_event(ev, r.avail_idx, old)
            else:
                call = self.asked()
        self.sent += 1
        if call:
            os.eventfd_write(self.kick, 1)
            self.kicks += 1

    def close(self):
        os.close(self.kick)
        self.mem.region.close()


def _recv(d, pool):
    out = np.zeros(32, np.int32)
    k = vhost_rx_burst(pool.domain.state, d.q, -1, out, 32)
    got = [pool.mbuf(int(h)).tobytes() for h in out[:k]]
    pool.free_bulk(out[:k])
    return got


def _kicks_off(d):
    """The request is withdrawn (split without EVENT_IDX, packed; with EVENT_IDX there is no
    off: avail_event stays where it was)."""
    return d.kind == "event_idx" or not d.asked()


@pytest.mark.parametrize("kind", KINDS)
def test_wait_returns_at_once_when_chains_wait(pool, kind):
    d = Driver(kind, pool)
    try:
        d.send(b"\x01" * 60)
        assert vhost_rx_wait(d.q, 5000) == 1
        assert d.q.st[L.QS_WAITS] == 0                  # no poll()
        assert _recv(d, pool) == [b"\x01" * 60]
    finally:
        d.close()


@pytest.mark.parametrize("kind", KINDS)
def test_wait_times_out_with_the_kicks_off_again(pool, kind):
    d = Driver(kind, pool)
    try:
        os.eventfd_write(d.kick, 1)                     # a stale kick from a polling phase
        t = time.monotonic()
        assert vhost_rx_wait(d.q, 80) == 0
        assert time.monotonic() - t >= 0.07
        assert d.q.st[L.QS_WAITS] == 1
        assert _kicks_off(d)
        with pytest.raises(BlockingIOError):            # the stale kick was read
            os.eventfd_read(d.kick)
    finally:
        d.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_drivers_kick_wakes_the_waiter(pool, kind):
    d = Driver(kind, pool)
    res = {}
    try:
        for k in range(3):
            th = threading.Thread(target=lambda: res.__setitem__("r", vhost_rx_wait(d.q, 10000)))
            t = time.monotonic()
            th.start()
            end = time.monotonic() + 10
            while d.q.st[L.QS_WAITS] == k and time.monotonic() < end:
                time.sleep(0.001)
            time.sleep(0.02)                            # well inside poll() by now
            if kind == "event_idx":                     # a kick for the next avail index
                assert d.asked() == d.q.st[L.QS_LAST_AVAIL] == k
            else:
                assert d.asked()                        # the back end asks for a kick
            d.send(bytes([k]) * 70)
            th.join(10)
            assert not th.is_alive() and res["r"] == 1
            assert time.monotonic() - t < 5             # woken, not timed out
            assert d.kicks == k + 1
            assert _kicks_off(d)
            assert _recv(d, pool) == [bytes([k]) * 70]
        # while the back end polls (no waiter) the driver is not asked to kick (with
        # EVENT_IDX: avail_event stays behind the driver's index)
        d.send(b"\x09" * 60)
        assert d.kicks == 3
        assert _recv(d, pool) == [b"\x09" * 60]
    finally:
        d.close()


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(KINDS), delay_us=st.integers(0, 3000))
def test_no_lost_wake_up_whenever_the_chain_comes(pool, kind, delay_us):
    """The chain is made available at any moment around the waiter's checks: the wait must
    return 1 without sitting out its timeout."""
    d = Driver(kind, pool)
    res = {}
    try:
        th = threading.Thread(target=lambda: res.__setitem__("r", vhost_rx_wait(d.q, 4000)))
        t = time.monotonic()
        th.start()
        if delay_us:
            time.sleep(delay_us / 1e6)
        d.send(b"\x05" * 64)
        th.join(10)
        assert res["r"] == 1
        assert time.monotonic() - t < 3.0
        assert _recv(d, pool) == [b"\x05" * 64]
    finally:
        d.close()


@pytest.mark.parametrize("kind", KINDS)
def test_queue_down_returns_the_waiter(pool, kind):
    d = Driver(kind, pool)
    res = {}
    try:
        th = threading.Thread(target=lambda: res.__setitem__("r", vhost_rx_wait(d.q, -1)))
        th.start()
        end = time.monotonic() + 10
        while d.q.st[L.QS_WAITS] == 0 and time.monotonic() < end:
            time.sleep(0.001)
        queue_down(d.q.st, 0)                           # what VhostDevice._down does
        os.eventfd_write(d.kick, 1)
        assert queue_down(d.q.st, 5_000_000)            # the waiter left the gate
        th.join(5)
        assert res["r"] == -errno.ENETDOWN
        assert vhost_rx_wait(d.q, 5000) == -errno.ENETDOWN   # down: no sleep on the fd
    finally:
        d.close()


def test_no_kick_fd_looks_again_after_a_millisecond(pool):
    d = Driver("split", pool)
    try:
        d.q.cfg[L.Q_KICKFD] = -1
        t = time.monotonic()
        assert vhost_rx_wait(d.q, -1) == 0              # -1 would be forever on an fd
        assert time.monotonic() - t < 1.0
        assert not d.asked()                            # never asked for kicks
    finally:
        d.close()


# -- the race, at full speed: a compiled driver against a compiled receiver -------------------
# The window a lost wake-up needs (the driver publishes and reads "no kicks wanted" after the
# waiter's first look but before its request) is a few microseconds wide: Python threads
# never land in it, compiled loops on two cores do.

@njit(nogil=True)
def _drive(av, u16, qst, n, evidx, fd, count, seed, stop):
    """Make chains 0, 1, ... available one at a time (descriptor i % n, written beforehand),
    kicking exactly when asked; wait until each was consumed.  Adversarial timing: after a
    chain was consumed, wait until the receiver enters the queue's gate again (its next
    vhost_rx_wait), then publish after a random pause of 0..~2 us -- around the waiter's
    first look and its request for kicks.  Returns the kicks made, or -1 when the receiver
    stopped consuming."""
    x = np.uint64(seed) | np.uint64(1)
    kicks = 0
    idx = 0
    for _ in range(count):
        t = now_ns()                     # (bounded: the receiver may be asleep already)
        while load_acquire(qst, 1) != 0 and now_ns() - t < 20_000:
            cpu_pause()                  # the burst that consumed the last chain has left
        while load_acquire(qst, 1) == 0 and now_ns() - t < 40_000:
            cpu_pause()                  # ... and the receiver is inside again
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
        for _ in range(np.int64(x % np.uint64(40))):
            cpu_pause()
        av[2 + idx % n] = np.uint16(idx % n)
        old = idx
        idx = (idx + 1) & 0xFFFF
        store_release(av, 1, np.uint16(idx))
        fence()
        if evidx:
            ev = np.int64(load_relaxed(u16, 2 + 4 * n))
            call = ((idx - ev - 1) & 0xFFFF) < ((idx - old) & 0xFFFF)
        else:
            call = (np.int64(load_relaxed(u16, 0)) & 1) == 0
        if call:
            eventfd_signal(fd)
            kicks += 1
        t = now_ns()
        while np.int64(load_acquire(u16, 1)) != idx:
            if stop[0] != 0 or now_ns() - t > 5_000_000_000:
                return -1
            cpu_pause()
    return kicks


@njit(nogil=True)
def _receive(dom, q, count, timeout_ms, out):
    """Take ``count`` frames, sleeping in vhost_rx_wait whenever the ring is empty.  Returns
    (frames, waits that sat out the whole timeout with a chain pending)."""
    got = 0
    slow = 0
    while got < count:
        t = now_ns()
        r = vhost_rx_wait(q, timeout_ms)
        if r < 0:
            break
        timed_out = now_ns() - t >= timeout_ms * 1_000_000
        k = vhost_rx_burst(dom, q, -1, out, 32)
        if timed_out and k > 0:
            slow += 1
        for j in range(k):
            pktmbuf_free(dom, -1, np.int64(out[j]))
        got += k
    return got, slow


@pytest.mark.parametrize("kind", ["split", "event_idx"])
def test_no_lost_wake_up_at_full_speed(pool, kind):
    d = Driver(kind, pool)
    count = 3000
    try:
        r = d.ring
        for i in range(N):
            off = d.bufs + 2048 * i
            d.mem.write(off, bytes(12) + bytes([i]) * 60)
            r.set_desc(i, d.mem.gpa + off, 72)
        av = np.frombuffer(d.mem.a, np.uint16, 3 + N, r.avail)
        u16 = np.frombuffer(d.mem.a, np.uint16, 3 + 4 * N, r.used)
        stop = np.zeros(1, np.int64)
        out = np.zeros(32, np.int32)
        res = {}
        _drive(av, u16, d.q.st, N, False, d.kick, 0, 1, stop)        # compiled before
        cpus = sorted(os.sched_getaffinity(0))
        pin = len(cpus) >= 2        # one core each, or the two loops rarely run at once

        def rx():
            if pin:
                os.sched_setaffinity(0, {cpus[0]})
            res["rx"] = _receive(pool.domain.state, d.q, count, 500, out)

        th = threading.Thread(target=rx)
        th.start()
        try:
            if pin:
                os.sched_setaffinity(0, {cpus[1]})
            kicks = _drive(av, u16, d.q.st, N, kind == "event_idx", d.kick, count, 12345, stop)
        finally:
            os.sched_setaffinity(0, cpus)
            stop[0] = 1
            th.join(60)
        got, slow = res["rx"]
        assert kicks > 0 and got == count
        assert slow == 0, f"{slow} waits slept through their timeout with a chain pending"
        assert d.q.st[L.QS_WAITS] > 0
    finally:
        d.close()
