"""The Memif facade refuses bad input with a PktbufError, before any kernel runs, and a refused
call changes nothing: no packet sent or received, every mbuf where it was, no fd or socket left.
"""
import math
import os

import numpy as np
import pytest

import pktbuf
from pktbuf import Memif
from pktbuf.errors import (DoubleFree, InvalidArgument, InvalidHandle, MemifDisconnected,
                           MemifError, MemifSocketError, PktbufError, ProtocolError,
                           SanityCheckError)
from pktbuf.drivers.memif import proto as P

from .helpers import make_packet, sock_name, wait_for


def _fds() -> set:
    return set(os.listdir("/proc/self/fd"))


@pytest.fixture
def pair(pool):
    name = sock_name("fac")
    s = Memif.server(name, pool=pool)
    c = Memif.client(name, pool=pool)
    assert c.wait_connected(10) and s.wait_connected(10)
    yield c, s
    c.close()
    s.close()


def test_exceptions_are_one_hierarchy():
    for cls in (MemifDisconnected, MemifSocketError, ProtocolError):
        assert issubclass(cls, MemifError) and issubclass(cls, PktbufError)
    assert P.ProtocolError is ProtocolError
    assert pktbuf.MemifDisconnected is MemifDisconnected


# -- constructor --------------------------------------------------------------------------------
BAD_KW = [
    ("id", -1), ("id", 2 ** 32), ("id", 1.5), ("id", True), ("id", "3"),
    ("secret", "x" * 25), ("secret", 7), ("secret", b"a\0b"),
    ("name", "n" * 32), ("name", 5), ("name", "a\0b"),
    ("rx_queues", -1), ("rx_queues", 256), ("tx_queues", 256), ("tx_queues", 2.0),
    ("ring_size_log2", 0), ("ring_size_log2", 15),
    ("buffer_size", 0), ("buffer_size", 65536),
    ("port", -1), ("port", 65535),
    ("abstract", "yes"), ("reconnect", "no"), ("interrupt", 1), ("force_general", None),
    ("connect", 0), ("allow_unsealed", "true"), ("zero_copy", "yes"),
    ("pool", "pool"), ("tx_pools", 5), ("tx_pools", "abc"),
]


@pytest.mark.parametrize("key,value", BAD_KW)
@pytest.mark.parametrize("role", ["client", "server"])
def test_constructor_refuses_bad_values(pool, role, key, value):
    kw = {"pool": pool, "connect": False} if role == "client" else {"pool": pool}
    kw[key] = value
    fds = _fds()
    with pytest.raises(InvalidArgument):
        Memif(role, sock_name("bad"), **kw)
    assert _fds() == fds


@pytest.mark.parametrize("sock", [b"/bytes", 5, None, "", "a\0b", "/" + "x" * 107])
def test_constructor_refuses_bad_socket_paths(pool, sock):
    with pytest.raises(InvalidArgument):
        Memif.server(sock, pool=pool)


def test_constructor_refuses_other_combinations(pool, tmp_path):
    with pytest.raises(InvalidArgument):
        Memif("peer", sock_name(), pool=pool)
    with pytest.raises(InvalidArgument):
        Memif.server(sock_name(), pool=pool, zero_copy=True)
    with pytest.raises(InvalidArgument):
        Memif.client(sock_name(), pool=pool, rx_queues=0, tx_queues=0, connect=False)
    with pytest.raises(InvalidArgument):          # missing directory of a filesystem socket
        Memif.server(str(tmp_path / "nodir" / "memif.sock"), pool=pool, abstract=False)
    with pytest.raises(InvalidArgument):          # region 0 would exceed 4 GiB
        Memif.client(sock_name(), pool=pool, rx_queues=255, tx_queues=255, ring_size_log2=14,
                     buffer_size=65535, connect=False)
    mp = pktbuf.Mempool(16, 64)
    other = pktbuf.PktmbufPool(16, domain=pktbuf.Domain(1024, 1024))
    closed = pktbuf.PktmbufPool(16)
    closed.close()
    try:
        with pytest.raises(InvalidArgument):
            Memif.client(sock_name(), pool=mp, connect=False)
        with pytest.raises(InvalidArgument):
            Memif.client(sock_name(), pool=pool, tx_pools=[other], connect=False)
        with pytest.raises(InvalidArgument):
            Memif.client(sock_name(), pool=closed, connect=False)
        with pytest.raises(InvalidArgument):
            Memif.client(sock_name(), pool=pool, tx_pools=[mp], connect=False)
    finally:
        mp.close()
        other.close()


def test_address_in_use_is_a_socket_error_and_leaks_nothing(pool, tmp_path):
    path = tmp_path / "taken.sock"
    path.write_bytes(b"")                      # a file where the socket would be
    fds = _fds()
    with pytest.raises(MemifSocketError) as e:
        Memif.server(str(path), pool=pool, abstract=False)
    assert e.value.errno is not None
    assert _fds() == fds
    path.unlink()                              # and nothing was registered: the path works now
    s = Memif.server(str(path), pool=pool, abstract=False)
    s.close()


def test_refused_interface_without_a_pool_closes_the_pool_it_made(pool):
    name = sock_name("own")
    s = Memif.server(name, pool=pool, id=3)
    try:
        n = len(pool.domain.pools)
        with pytest.raises(InvalidArgument):      # duplicate id: refused after the pool was made
            Memif.server(name, id=3)
        assert len(pool.domain.pools) == n
    finally:
        s.close()


def test_duplicate_server_id_is_refused_and_the_first_keeps_working(pool):
    name = sock_name("dup")
    s = Memif.server(name, pool=pool, id=4)
    try:
        with pytest.raises(InvalidArgument):
            Memif.server(name, pool=pool, id=4)
        c = Memif.client(name, pool=pool, id=4)
        assert c.wait_connected(10)
        c.close()
    finally:
        s.close()


# -- rx_burst ------------------------------------------------------------------------------------
def _send(pool, c, n):
    hs = np.array([make_packet(pool, bytes([i]) * 60) for i in range(n)], np.int32)
    assert c.tx_burst(hs) == n


RX_BAD = [
    dict(n=-1), dict(n=(1 << 16) + 1), dict(n=1.5), dict(n=True),
    dict(qid=1), dict(qid=-1),
    dict(lcore=128), dict(lcore=-2), dict(lcore="0"),
    dict(out=[0] * 8), dict(out=np.zeros(8, np.int64)), dict(out=np.zeros((2, 4), np.int32)),
    dict(out=np.zeros(16, np.int32)[::2]), dict(out=np.zeros(2, np.int32)),
]


@pytest.mark.parametrize("kw", RX_BAD, ids=[str(k) for k in RX_BAD])
def test_rx_burst_refuses_bad_arguments_and_receives_nothing(pool, pair, kw):
    c, s = pair
    _send(pool, c, 3)
    args = dict(n=4)
    args.update(kw)
    with pytest.raises(InvalidArgument):
        s.rx_burst(**args)
    got = s.rx_burst(8)                          # the packets are all still there
    assert [pool.mbuf(h).tobytes() for h in got] == [bytes([i]) * 60 for i in range(3)]
    pool.free_bulk(got)


def test_rx_burst_refuses_a_read_only_out(pool, pair):
    c, s = pair
    _send(pool, c, 1)
    out = np.zeros(4, np.int32)
    out.flags.writeable = False
    with pytest.raises(InvalidArgument):
        s.rx_burst(4, out=out)
    pool.free_bulk(s.rx_burst(4))


def test_rx_burst_into_out_returns_a_view(pool, pair):
    c, s = pair
    _send(pool, c, 2)
    out = np.full(8, -7, np.int32)
    got = s.rx_burst(8, out=out)
    assert got.size == 2 and np.shares_memory(got, out) and (out[2:] == -7).all()
    pool.free_bulk(got)


# -- tx_burst ------------------------------------------------------------------------------------
def _state(pool, c, s):
    return pool.avail_count, c.stats()["tx_packets"], s.stats()["rx_packets"]


def _refused(pool, pair, handles, exc):
    c, s = pair
    before = _state(pool, c, s)
    with pytest.raises(exc):
        c.tx_burst(handles)
    assert _state(pool, c, s) == before
    assert s.rx_burst(8).size == 0               # the peer got nothing


def test_tx_burst_refuses_non_integer_and_2d_arrays(pool, pair):
    _refused(pool, pair, np.zeros(2, np.float64), InvalidHandle)
    _refused(pool, pair, np.zeros(2, np.bool_), InvalidHandle)
    _refused(pool, pair, ["a"], InvalidHandle)
    _refused(pool, pair, np.zeros((2, 2), np.int32), InvalidArgument)
    _refused(pool, pair, [2 ** 40], InvalidHandle)


def test_tx_burst_refuses_handles_that_are_no_live_packets(pool, pair):
    ok = make_packet(pool, b"ok" * 30)
    free = make_packet(pool, b"f")
    pool.free_bulk([free])
    mp = pktbuf.Mempool(4, 64)
    obj = mp.get_bulk(1)[0]
    try:
        for bad, exc in ((-1, InvalidHandle), (pool.domain.state.mb.size, InvalidHandle),
                         (int(obj), InvalidHandle), (free, DoubleFree)):
            _refused(pool, pair, np.array([ok, bad], np.int32), exc)
            assert pool.mbuf(ok).tobytes() == b"ok" * 30       # untouched, still ours
        _refused(pool, pair, np.array([ok, ok], np.int32), DoubleFree)   # listed twice
    finally:
        mp.put_bulk([obj])
        mp.close()
    c, s = pair
    assert c.tx_burst([ok]) == 1                   # and it can still be sent
    got = []
    assert wait_for(lambda: got.extend(s.rx_burst(4)) or len(got) == 1)
    assert pool.mbuf(got[0]).tobytes() == b"ok" * 30
    pool.free_bulk(got)


def test_tx_burst_refuses_a_corrupt_packet(pool, pair):
    h = make_packet(pool, b"x" * 100)
    mb = pool.domain.state.mb
    mb[h]["data_len"] = 60000                    # beyond the buffer
    try:
        _refused(pool, pair, [h], SanityCheckError)
    finally:
        mb[h]["data_len"] = 100
        pool.free_bulk([h])


def test_tx_burst_takes_read_only_and_strided_arrays_in_order(pool, pair):
    c, s = pair
    hs = np.array([make_packet(pool, bytes([i]) * 61) for i in range(6)], np.int32)
    ro = hs[:3].copy()
    ro.flags.writeable = False
    assert c.tx_burst(ro) == 3
    assert c.tx_burst(hs[3:].repeat(2)[::2]) == 3          # non-contiguous view
    got = []
    assert wait_for(lambda: got.extend(s.rx_burst(8)) or len(got) == 6)
    assert [pool.mbuf(h).tobytes() for h in got] == [bytes([i]) * 61 for i in range(6)]
    pool.free_bulk(got)


@pytest.mark.parametrize("kw", [dict(qid=1), dict(lcore=200), dict(lcore=1.0)],
                         ids=["qid", "lcore", "lcore-float"])
def test_tx_burst_refuses_bad_queue_and_lcore(pool, pair, kw):
    c, s = pair
    h = make_packet(pool, b"q")
    before = _state(pool, c, s)
    with pytest.raises(InvalidArgument):
        c.tx_burst([h], **kw)
    assert _state(pool, c, s) == before
    pool.free_bulk([h])


# -- timeouts, disconnect, closed ------------------------------------------------------------------
@pytest.mark.parametrize("t", [-1, "1", math.nan, True, [1]])
def test_waits_refuse_bad_timeouts(pair, t):
    c, s = pair
    with pytest.raises(InvalidArgument):
        c.wait_connected(t)
    with pytest.raises(InvalidArgument):
        c.wait_disconnected(t)


def test_waits_take_none_zero_and_infinity(pair):
    c, s = pair
    assert c.wait_connected(None) and c.wait_connected(0) and c.wait_connected(math.inf)
    assert not c.wait_disconnected(0)


@pytest.mark.parametrize("reason", [5, b"bytes", "r" * 96, "a\0b"])
def test_disconnect_refuses_bad_reasons(pair, reason):
    c, s = pair
    with pytest.raises(InvalidArgument):
        c.disconnect(reason)
    assert c.connected


def test_queues_and_eventfds_check_qid(pair):
    c, s = pair
    for f in (c.rx_queue, c.tx_queue, c.rx_eventfd):
        for q in (-1, 1, "0", 0.0):
            with pytest.raises(InvalidArgument):
                f(q)


def test_closed_interface_and_closed_pool(pool):
    name = sock_name("cl")
    s = Memif.server(name, pool=pool)
    c = Memif.client(name, pool=pool)
    assert c.wait_connected(10)
    h = make_packet(pool, b"c")
    c.close()
    c.close()                                         # idempotent
    with pytest.raises(MemifDisconnected):
        c.rx_burst(4)
    with pytest.raises(MemifDisconnected):
        c.tx_burst([h])
    with pytest.raises(MemifDisconnected):
        c.disconnect()
    assert pool.mbuf(h).tobytes() == b"c"
    pool.free_bulk([h])
    small = pktbuf.PktmbufPool(16)
    s2 = Memif.server(sock_name("cp"), pool=small)
    small.close()
    try:
        with pytest.raises(InvalidArgument):
            s2.rx_burst(4)
    finally:
        s2.close()
        s.close()
