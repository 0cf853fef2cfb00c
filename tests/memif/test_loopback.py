"""pktbuf <-> pktbuf over memif in one process: data path, paths, queues, states."""
import os
import threading
import time

import numpy as np
import pytest
from numba import njit

import pktbuf
from pktbuf import Memif
from pktbuf.drivers.memif import proto as P
from pktbuf.drivers.memif.datapath import memif_rx_burst, memif_tx_burst
from pktbuf.drivers.memif.queue import P_EQ, P_GENERAL, P_GT, P_LT, QS_LAST

from .helpers import exchange, make_packet, payloads, sock_name, wait_for

SIZES = [0, 1, 60, 64, 1500, 2047, 2048, 2049, 3000, 4096, 5000, 9000]
SEGS = [None, None, 16, None, 700, None, None, 1000, 2048, 64, 1500, 2000]


def _pair(pool, **kw):
    name = sock_name()
    ckw = dict(kw)
    skw = dict(kw)
    ckw.update(ckw.pop("client", {}))
    ckw.pop("server", None)
    skw.update(skw.pop("server", {}))
    skw.pop("client", None)
    s = Memif.server(name, pool=pool, **skw)
    c = Memif.client(name, pool=pool, **ckw)
    assert c.wait_connected(10), c.disconnect_reason
    assert s.wait_connected(10), s.disconnect_reason
    return c, s


@pytest.mark.parametrize("bsize,path", [(2048, P_EQ), (1024, P_LT), (4096, P_GT), (512, P_LT),
                                        (2048, P_GENERAL), (1000, P_GENERAL)])
@pytest.mark.parametrize("direction", ["c2s", "s2c"])
def test_payloads_byte_exact(pool, bsize, path, direction):
    c, s = _pair(pool, buffer_size=bsize, force_general=(path == P_GENERAL), ring_size_log2=7)
    try:
        assert c.path == path and s.path == path
        tx, rx = (c, s) if direction == "c2s" else (s, c)
        pays = payloads(SIZES * 3, seed=bsize)
        got, sent = exchange(tx, rx, pool, pays, SEGS * 3)
        assert sent == len(pays)
        assert [g[0] for g in got] == pays
        cap = pool.data_room - pool.headroom
        for (data, nseg), p in zip(got, pays):
            assert nseg >= max(1, -(-len(p) // cap))
        assert rx.stats()["rx_packets"] == len(pays)
        assert rx.stats()["rx_bytes"] == sum(map(len, pays))
        assert c.stats()["fallbacks"] + s.stats()["fallbacks"] == 0
    finally:
        c.close()
        s.close()
    assert pool.avail_count == pool.n, "mbufs leaked"


def test_general_path_segments_pack_bytes(pool):
    """Forced general path packs a chain of small segments into as few mbufs as fit."""
    c, s = _pair(pool, force_general=True)
    try:
        pays = payloads([3000])
        got, _ = exchange(c, s, pool, pays, [100])
        assert got == [(pays[0], 2)]
    finally:
        c.close()
        s.close()


def test_ring_full_leaves_rest_with_caller(pool):
    c, s = _pair(pool, ring_size_log2=4)   # 16 slots
    try:
        hs = np.array([make_packet(pool, b"x" * 100) for _ in range(40)], np.int32)
        before = pool.avail_count
        k = c.tx_burst(hs)
        assert k == 16
        assert pool.avail_count == before + 16     # sent ones freed (copy mode)
        # the rest are still ours: valid, allocated, untouched
        for h in hs[16:]:
            assert pool.mbuf(h).tobytes() == b"x" * 100
        # chains never split over a full ring: a 3-segment packet needs 3 slots
        got = s.rx_burst(32)
        assert len(got) == 16
        pool.free_bulk(got)
        big = np.array([make_packet(pool, b"y" * 3000, 1000) for _ in range(6)], np.int32)
        assert c.tx_burst(big) == 5          # 5 x 3 = 15 slots, the 6th does not fit
        got = s.rx_burst(32)
        assert [pool.mbuf(h).tobytes() for h in got] == [b"y" * 3000] * 5
        pool.free_bulk(got)
        pool.free_bulk(big[5:])
        pool.free_bulk(hs[16:])
    finally:
        c.close()
        s.close()
    assert pool.avail_count == pool.n


def test_rx_without_mbufs_keeps_packets_in_ring(pool):
    small = pktbuf.PktmbufPool(64, 0, name="tiny")
    name = sock_name()
    s = Memif.server(name, pool=small)
    c = Memif.client(name, pool=pool)
    try:
        assert c.wait_connected(10) and s.wait_connected(10)
        hold = small.alloc_bulk(64)        # Rx pool empty
        hs = np.array([make_packet(pool, bytes([i]) * 64) for i in range(10)], np.int32)
        assert c.tx_burst(hs) == 10
        assert len(s.rx_burst(32)) == 0
        assert s.stats()["rx_nombuf"] == 1
        small.free_bulk(hold)
        got = s.rx_burst(32)
        assert [small.mbuf(h).tobytes() for h in got] == [bytes([i]) * 64 for i in range(10)]
        small.free_bulk(got)
    finally:
        c.close()
        s.close()
    assert small.avail_count == small.n
    small.close()


def test_multi_queue(pool):
    # the client wants 3 Rx / 2 Tx; the server offers 3 Rx (C2S) / 2 Tx (S2C): 2 rings each way
    c, s = _pair(pool, rx_queues=3, tx_queues=2)
    try:
        for q in range(2):   # client tx q -> server rx q
            pays = payloads([64 + q, 1500], seed=q)
            got, _ = exchange(c, s, pool, pays, tx_qid=q, rx_qid=q)
            assert [g[0] for g in got] == pays
            for other in range(3):
                if other != q:
                    assert len(s.rx_burst(32, other)) == 0
        for q in range(2):   # server tx q -> client rx q
            pays = payloads([100 + q], seed=10 + q)
            got, _ = exchange(s, c, pool, pays, tx_qid=q, rx_qid=q)
            assert [g[0] for g in got] == pays
        # no ring was negotiated for the third Rx queue of either side: it stays down
        assert len(s.rx_burst(32, 2)) == 0 and len(c.rx_burst(32, 2)) == 0
    finally:
        c.close()
        s.close()


def test_zero_copy_client(pool):
    c, s = _pair(pool, client={"zero_copy": True}, ring_size_log2=6)
    try:
        assert c.path_name == "zero-copy"
        pays = payloads(SIZES * 4, seed=7)
        got, sent = exchange(c, s, pool, pays, SEGS * 4)
        assert [g[0] for g in got] == pays
        got, sent = exchange(s, c, pool, pays, SEGS * 4)
        assert [g[0] for g in got] == pays
        # zero-copy Tx really shares the buffers: a descriptor points into the pool region
        h = make_packet(pool, b"z" * 64)
        off = int(pool.domain.state.mb[h]["buf_iova"]) + int(pool.domain.state.mb[h]["data_off"])
        q = c.tx_queue(0)
        cur = int(q.st[QS_LAST])
        assert c.tx_burst([h]) == 1
        from pktbuf.drivers.memif import layout as L
        d = L.desc_view(c.device.regions[0].array, 0, 6)[cur % 64]
        assert int(d["region"]) == 1 and int(d["offset"]) == off and int(d["length"]) == 64
        got = s.rx_burst(32)
        assert [pool.mbuf(x).tobytes() for x in got] == [b"z" * 64]
        pool.free_bulk(got)
    finally:
        c.close()
        s.close()
    assert pool.avail_count == pool.n, "zero-copy mbufs leaked"


def test_zero_copy_tx_of_unshared_pool_stays_with_caller(pool):
    other = pktbuf.PktmbufPool(16, 0, name="private")
    c, s = _pair(pool, client={"zero_copy": True})
    try:
        h = make_packet(other, b"p" * 10)
        assert c.tx_burst([h]) == 0
        assert other.mbuf(h).tobytes() == b"p" * 10
        other.free_bulk([h])
    finally:
        c.close()
        s.close()
    other.close()


@njit(nogil=True)
def _echo_loop(dom, tq, rq, lcore, pkts, n_total, spins):
    """A user's own jitted loop calling the kernels directly."""
    out = np.empty(32, np.int32)
    got = 0
    it = 0
    sent = 0
    while got < n_total and it < spins:
        if sent < n_total:
            k = memif_tx_burst(dom, tq, lcore, pkts[sent:], min(32, n_total - sent))
            sent += k
        r = memif_rx_burst(dom, rq, lcore, out, 32)
        for i in range(r):
            pkts[got + i] = out[i]
        got += r
        it += 1
    return got


def test_kernels_from_user_njit(pool):
    c, s = _pair(pool)
    try:
        pays = payloads([64 + i for i in range(200)], seed=3)
        hs = np.array([make_packet(pool, p) for p in pays], np.int32)
        got = _echo_loop(pool.domain.state, c.tx_queue(0), s.rx_queue(0), 0, hs, len(hs), 10**7)
        assert got == 200
        assert [pool.mbuf(h).tobytes() for h in hs] == pays
        pool.free_bulk(hs)
    finally:
        c.close()
        s.close()


def test_states_and_clean_disconnect(pool):
    name = sock_name()
    s = Memif.server(name, pool=pool)
    assert s.state == "listening"
    c = Memif.client(name, pool=pool, connect=True)
    assert c.wait_connected(10) and s.wait_connected(10)
    assert c.state == "connected" and s.state == "connected"
    assert c.peer_name == b"pktbuf" and s.peer_name == b"pktbuf"
    c.close()
    assert c.state == "closed"
    assert wait_for(lambda: s.state == "listening")
    assert s.disconnect_reason == P.R_CLOSED
    assert len(s.rx_burst(32)) == 0
    with pytest.raises(pktbuf.PktbufError):
        c.rx_burst(32)
    # the server accepts the next client
    c2 = Memif.client(name, pool=pool)
    assert c2.wait_connected(10)
    got, _ = exchange(c2, s, pool, [b"again"])
    assert got == [(b"again", 1)]
    c2.close()
    s.close()
    assert s.state == "closed"


def test_client_reconnects_when_server_returns(pool):
    name = sock_name()
    c = Memif.client(name, pool=pool, reconnect=True)
    assert not c.wait_connected(0.3)
    assert c.state == "disconnected" and "connect failed" in (c.disconnect_reason or "")
    s = Memif.server(name, pool=pool)
    assert c.wait_connected(10)
    rq = c.rx_queue(0)     # taken once, must keep working across the reconnect
    s.close()
    assert wait_for(lambda: c.state == "disconnected")
    assert c.disconnect_reason == P.R_CLOSED
    s = Memif.server(name, pool=pool)
    assert c.wait_connected(10) and s.wait_connected(10)
    assert c.connect_count == 2 and c.device.control.attempts >= 2
    hs = np.array([make_packet(pool, b"back")], np.int32)
    assert s.tx_burst(hs) == 1
    out = np.empty(4, np.int32)
    assert wait_for(lambda: _rx1(pool, rq, out) == 1)
    assert pool.mbuf(out[0]).tobytes() == b"back"
    pool.free_bulk(out[:1])
    c.close()
    s.close()


def _rx1(pool, rq, out):
    return memif_rx_burst(pool.domain.state, rq, 0, out, 4)


def test_client_without_reconnect_stays_down(pool):
    name = sock_name()
    s = Memif.server(name, pool=pool)
    c = Memif.client(name, pool=pool, reconnect=False)
    assert c.wait_connected(10)
    s.close()
    assert wait_for(lambda: c.state == "disconnected")
    loop = c.device.control
    attempts = loop.attempts
    s = Memif.server(name, pool=pool)
    # Prove the negative by the client's own control loop: it has come round more than once
    # after its reconnect back-off expired -- a client that reconnects attempts then (see
    # test_client_reconnects_when_server_returns) -- and it attempted nothing.
    assert wait_for(lambda: time.monotonic() > loop.next_attempt)
    steps = loop.steps
    assert wait_for(lambda: loop.steps >= steps + 3)
    assert loop.attempts == attempts
    assert s.device.control.accepted == 0
    assert c.state == "disconnected" and c.connect_count == 1
    c.close()
    s.close()


@pytest.mark.parametrize("server_kw,client_kw,reason", [
    ({"id": 1}, {"id": 2}, P.R_ID),
    ({"secret": "abc"}, {}, P.R_SECRET_REQUIRED),
    ({"secret": "abc"}, {"secret": "abd"}, P.R_SECRET),
])
def test_rejected_clients_get_the_reason(pool, server_kw, client_kw, reason):
    name = sock_name()
    s = Memif.server(name, pool=pool, **server_kw)
    c = Memif.client(name, pool=pool, reconnect=False, **client_kw)
    try:
        assert wait_for(lambda: c.disconnect_reason == reason)
        assert c.state == "disconnected" and s.state == "listening"
    finally:
        c.close()
        s.close()


def test_secret_and_id_accepted(pool):
    c, s = _pair(pool, server={"secret": "abc", "id": 9}, client={"secret": "abc", "id": 9})
    got, _ = exchange(c, s, pool, [b"ok"])
    assert got == [(b"ok", 1)]
    c.close()
    s.close()


def test_two_interfaces_on_one_socket(pool):
    name = sock_name()
    s1 = Memif.server(name, pool=pool, id=1)
    s2 = Memif.server(name, pool=pool, id=2)
    with pytest.raises(pktbuf.InvalidArgument):
        Memif.server(name, pool=pool, id=1)
    c1 = Memif.client(name, pool=pool, id=1)
    c2 = Memif.client(name, pool=pool, id=2)
    assert all(m.wait_connected(10) for m in (s1, s2, c1, c2))
    assert exchange(c1, s1, pool, [b"one"])[0] == [(b"one", 1)]
    assert exchange(c2, s2, pool, [b"two"])[0] == [(b"two", 1)]
    # a second client for id 1 is refused while the first is connected
    c3 = Memif.client(name, pool=pool, id=1, reconnect=False)
    assert wait_for(lambda: c3.disconnect_reason == P.R_ALREADY)
    for m in (c3, c1, c2, s1):
        m.close()
    assert s2.state in ("connected", "listening")
    s2.close()


def test_filesystem_socket(pool, tmp_path):
    path = str(tmp_path / "memif.sock")
    s = Memif.server(path, pool=pool, abstract=False)
    assert os.path.exists(path)
    c = Memif.client(path, pool=pool, abstract=False)
    assert c.wait_connected(10)
    assert exchange(c, s, pool, [b"fs"])[0] == [(b"fs", 1)]
    c.close()
    s.close()
    assert not os.path.exists(path)


def test_disconnect_while_traffic_runs(pool):
    """A thread hammers tx/rx kernels while the peer disconnects and comes back: the busy
    counter keeps unmapping away from running bursts (no crash, no leak)."""
    name = sock_name()
    s = Memif.server(name, pool=pool)
    c = Memif.client(name, pool=pool)
    assert c.wait_connected(10) and s.wait_connected(10)
    stop = threading.Event()
    dom = pool.domain.state
    counts = [0, 0]

    def pump():
        out = np.empty(32, np.int32)
        while not stop.is_set():
            hs = pool.alloc_bulk(16)
            for h in hs:
                pool.domain.state.mb[h]["data_len"] = 60
                pool.domain.state.mb[h]["pkt_len"] = 60
            k = memif_tx_burst(dom, c.tx_queue(0), 5, hs, 16)
            counts[0] += k
            if k < 16:
                pool.free_bulk(hs[k:])
            r = memif_rx_burst(dom, s.rx_queue(0), 6, out, 32)
            counts[1] += r
            if r:
                pool.free_bulk(out[:r])

    t = threading.Thread(target=pump)
    t.start()
    try:
        for _ in range(3):
            time.sleep(0.2)
            s.disconnect("test bounce")
            assert wait_for(lambda: c.state == "connected" and s.state == "connected", 10)
    finally:
        stop.set()
        t.join()
    c.close()
    s.close()
    from pktbuf.buf.mempool.kernels import mempool_cache_flush
    for lc in (5, 6):
        mempool_cache_flush(dom, pool.id, lc)
    assert counts[0] > 0 and counts[1] > 0
    assert pool.avail_count == pool.n
