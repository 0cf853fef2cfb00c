"""Polling discipline: back-off when idle, interrupt mode through the ring eventfds."""
import threading
import time

import numpy as np
import pytest

from pktbuf import Memif
from pktbuf.memif import layout as L
from pktbuf.memif.poll import memif_link_wait, memif_rx_wait

from .helpers import make_packet, sock_name, wait_for


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


@pytest.mark.parametrize("who", ["server", "client"])
def test_interrupt_mode_wakes_receiver(pool, who):
    c, s = _pair(pool, **{who: {"interrupt": True}})
    rx, tx = (s, c) if who == "server" else (c, s)
    try:
        flags = _rings_flags(c)
        assert flags == ({"c2s": 0, "s2c": 1} if who == "server" else {"c2s": 1, "s2c": 0})
        q = rx.rx_queue(0)
        memif_rx_wait(q, 0, 1)          # compiled before the thread starts; drains a stale count
        res = []
        t = threading.Thread(target=lambda: res.append(memif_rx_wait(q, 0, 10_000)))
        t.start()
        time.sleep(0.2)
        assert t.is_alive()       # blocked in poll(), not spinning through a back-off
        hs = np.array([make_packet(pool, b"wake")], np.int32)
        assert tx.tx_burst(hs) == 1
        t.join(15)
        assert res == [1]
        assert tx.stats()["kicks"] == 1
        got = rx.rx_burst(4)
        assert [pool.mbuf(h).tobytes() for h in got] == [b"wake"]
        pool.free_bulk(got)
        # nothing pending: the wait times out and reports 0
        assert memif_rx_wait(q, 0, 50) == 0
    finally:
        c.close()
        s.close()


def test_polling_receiver_gets_no_kicks(pool):
    c, s = _pair(pool)
    try:
        assert _rings_flags(c) == {"c2s": 1, "s2c": 1}
        hs = np.array([make_packet(pool, b"p") for _ in range(5)], np.int32)
        assert c.tx_burst(hs) == 5
        got = s.rx_burst(8)
        pool.free_bulk(got)
        assert c.stats()["kicks"] == 0
        assert memif_rx_wait(s.rx_queue(0), 0, 10_000) == 0    # falls back to one back-off step
    finally:
        c.close()
        s.close()


def test_disconnect_wakes_blocked_receiver(pool):
    c, s = _pair(pool, server={"interrupt": True})
    q = s.rx_queue(0)
    res = []
    t = threading.Thread(target=lambda: res.append(memif_rx_wait(q, 0, 30_000)))
    t.start()
    time.sleep(0.2)
    c.close()                         # the server's link goes down while it waits
    t.join(10)
    assert not t.is_alive() and len(res) == 1
    assert wait_for(lambda: s.state == "listening")
    assert memif_rx_wait(q, 0, 10) == 0     # link down: returns at once
    s.close()


def test_link_wait(pool):
    name = sock_name("lw")
    c = Memif.client(name, pool=pool)
    q = c.rx_queue(0)
    assert not memif_link_wait(q, 50)
    s = Memif.server(name, pool=pool)
    assert memif_link_wait(q, 10_000)
    c.close()
    s.close()
