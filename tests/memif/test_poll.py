"""Waiting on a queue: interrupt mode through the ring eventfds, polling-mode back-off, link.

Blocking is proven, not guessed from a sleep: a waiting thread is seen inside ``poll()`` on one
fd with the timeout it was given (/proc/<pid>/task/<tid>/syscall), and a receiver in polling
mode is shown not to touch the eventfd at all.
"""
import os
import threading

import numpy as np
import pytest

from pktbuf import Memif
from pktbuf.drivers.memif import layout as L
from pktbuf.drivers.memif.poll import memif_link_wait, memif_rx_wait

from .helpers import make_packet, sock_name, wait_for

SYS_POLL = 7          # x86_64 syscall numbers
SYS_PPOLL = 271


def _pair(pool, **kw):
    name = sock_name("poll")
    skw = kw.pop("server", {})
    ckw = kw.pop("client", {})
    s = Memif.server(name, pool=pool, **skw)
    c = Memif.client(name, pool=pool, **ckw)
    assert c.wait_connected(10) and s.wait_connected(10)
    return c, s


def _rings_flags(m):
    """MASK_INT of (C2S, S2C) as the client's memory shows it."""
    arr = m.device.regions[0].array
    return {"c2s" if c2s else "s2c": int(L.ring_header_view(arr, off)["flags"]) & 1
            for c2s, _, off in m.device.ring_offsets}


def _in_poll(tid: int, timeout_ms: int) -> bool:
    """True while thread ``tid`` of this process sits in poll() on one fd with ``timeout_ms``."""
    try:
        with open(f"/proc/self/task/{tid}/syscall") as f:
            fields = f.read().split()
    except OSError:
        return False
    if not fields or fields[0] not in (str(SYS_POLL), str(SYS_PPOLL)):
        return False
    nfds = int(fields[2], 16)
    return nfds == 1 and (fields[0] == str(SYS_PPOLL) or int(fields[3], 16) == timeout_ms)


class _Waiter:
    """memif_rx_wait(q, 0, timeout_ms) in a thread; .tid, .result."""

    def __init__(self, q, timeout_ms):
        self.result = []
        self.tid = None
        self._ready = threading.Event()

        def run():
            self.tid = threading.get_native_id()
            self._ready.set()
            self.result.append(memif_rx_wait(q, 0, timeout_ms))

        self.t = threading.Thread(target=run)
        self.t.start()
        assert self._ready.wait(10)

    def wait_blocked(self, timeout_ms, deadline=10.0):
        assert wait_for(lambda: _in_poll(self.tid, timeout_ms), deadline), \
            "the waiter never blocked in poll()"


@pytest.mark.parametrize("who", ["server", "client"])
def test_interrupt_mode_wakes_receiver(pool, who):
    c, s = _pair(pool, **{who: {"interrupt": True}})
    rx, tx = (s, c) if who == "server" else (c, s)
    try:
        flags = _rings_flags(c)
        assert flags == ({"c2s": 0, "s2c": 1} if who == "server" else {"c2s": 1, "s2c": 0})
        q = rx.rx_queue(0)
        memif_rx_wait(q, 0, 1)          # compiled before the thread starts; drains a stale count
        w = _Waiter(q, 10_000)
        w.wait_blocked(10_000)          # blocked in poll(), not spinning through a back-off
        assert w.t.is_alive() and w.result == []
        hs = np.array([make_packet(pool, b"wake")], np.int32)
        assert tx.tx_burst(hs) == 1
        w.t.join(15)
        assert w.result == [1]
        assert tx.stats()["kicks"] == 1
        got = rx.rx_burst(4)
        assert [pool.mbuf(h).tobytes() for h in got] == [b"wake"]
        pool.free_bulk(got)
        # nothing pending: the wait times out and reports 0
        assert memif_rx_wait(q, 0, 50) == 0
    finally:
        c.close()
        s.close()


def test_polling_receiver_gets_no_kicks_and_never_waits_on_the_eventfd(pool):
    c, s = _pair(pool)
    try:
        assert _rings_flags(c) == {"c2s": 1, "s2c": 1}
        hs = np.array([make_packet(pool, b"p") for _ in range(5)], np.int32)
        assert c.tx_burst(hs) == 5
        got = s.rx_burst(8)
        pool.free_bulk(got)
        assert c.stats()["kicks"] == 0
        # polling mode: memif_rx_wait backs off instead of waiting on the eventfd.  With a
        # count in the eventfd, a wait on it would return 1 and drain it; the back-off leaves
        # it alone.
        fd = s.rx_eventfd(0)
        os.eventfd_write(fd, 1)
        assert memif_rx_wait(s.rx_queue(0), 0, 10_000) == 0
        assert os.eventfd_read(fd) == 1
    finally:
        c.close()
        s.close()


def test_disconnect_wakes_blocked_receiver(pool):
    c, s = _pair(pool, server={"interrupt": True})
    q = s.rx_queue(0)
    w = _Waiter(q, 30_000)
    w.wait_blocked(30_000)            # really waiting when the link goes down
    c.close()                         # the server's link goes down while it waits
    w.t.join(10)
    assert not w.t.is_alive() and len(w.result) == 1
    assert wait_for(lambda: s.state == "listening")
    assert memif_rx_wait(q, 0, 10) == 0     # link down: returns at once
    s.close()


def test_link_wait(pool):
    name = sock_name("lw")
    c = Memif.client(name, pool=pool)
    q = c.rx_queue(0)
    assert not memif_link_wait(q, 50)       # no server exists: the link cannot be up
    s = Memif.server(name, pool=pool)
    assert memif_link_wait(q, 10_000)
    c.close()
    s.close()
