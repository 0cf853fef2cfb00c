"""Interop with the real back end: DPDK 22.11 dpdk-testpmd's ``net_vhost`` (it listens,
pktbuf's ``net_virtio_user`` connects; ``--no-huge``).  One testpmd for the module; each test
sets its forwarding mode, clears testpmd's counters and compares them with ours exactly;
frames echoed by testpmd's io mode come back byte for byte; every mbuf is back in its pool at
the end."""
from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest

import pktbuf
from pktbuf.apps import testpmd as T
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort
from pktbuf.drivers.virtio_user.layout import QS_WAITS

from ..vhost.wait_echo import echo_wakes_the_sleeper

if not T.available():
    if os.environ.get("CI"):
        pytest.fail("dpdk-testpmd is not installed (apt-get install dpdk-dev)", pytrace=False)
    pytest.skip("dpdk-testpmd is not installed", allow_module_level=True)


def _frames(n, seed):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = rng.choice([60, 64, 65, 128, 511, 1000, 1500, 1514])
        out.append(b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
                   + i.to_bytes(4, "big") + bytes(rng.getrandbits(8) for _ in range(size - 18)))
    return out


def _packet(pool, f, segs):
    cut = [len(f) * k // segs for k in range(segs + 1)]
    head = pool.alloc().append_bytes(f[cut[0]:cut[1]])
    for a, b in zip(cut[1:], cut[2:]):
        head.chain(pool.alloc().append_bytes(f[a:b]))
    return int(head)


def _forward(tp, mode):
    tp.stop_forwarding()
    tp.cmd(f"set fwd {mode}")
    tp.cmd("clear port stats all")
    mark = len(tp.log())
    tp.cmd("start")
    assert tp.wait_log(r"packet forwarding - ports=", 10, since=mark), tp.log()[-2000:]


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    sock = str(tmp_path_factory.mktemp("vu") / f"vu{os.getpid()}.sock")
    pool = pktbuf.PktmbufPool(8192)
    tp = T.Testpmd(vdevs=[f"net_vhost0,iface={sock},queues=1"], fwd="rxonly", mem=512,
                   mbufs=16384)
    tp.start()
    port = None
    try:
        end = time.monotonic() + 60
        while not os.path.exists(sock) and time.monotonic() < end and tp.alive():
            time.sleep(0.1)
        assert os.path.exists(sock), tp.log()[-2000:]
        port = VirtioUserPort(sock, pool)
        assert port.wait_link_up(60), (port.disconnect_reason, tp.log()[-3000:])
        assert tp.wait_log(r"testpmd>", 60), tp.log()[-2000:]
        port.rx_burst(0)
        port.tx_burst([])
        yield port, pool, tp
    finally:
        tp.cleanup()
        if port is not None:
            port.close()
        assert pool.in_use_count == 0
        pool.close()


def _drain(port, pool, seconds, keep=False):
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        hs = port.rx_burst(32)
        if keep:
            out += [bytes(pool.mbuf(int(h)).read(0, len(pool.mbuf(int(h))))) for h in hs]
        else:
            out += [len(pool.mbuf(int(h))) for h in hs]
        pool.free_bulk(hs)
    return out


def test_testpmd_txonly_arrives_and_counts_match(peer):
    port, pool, tp = peer
    port.stats_reset()
    _forward(tp, "txonly")
    got = _drain(port, pool, 2)
    tp.stop_forwarding()
    got += _drain(port, pool, 0.5)
    s = tp.port_stats()
    assert len(got) > 1000
    assert set(got) == {64}
    assert s["tx_packets"] == len(got) == port.stats()["ipackets"]
    assert port.stats()["ibytes"] == 64 * len(got)


def test_pktbuf_tx_counts_exact_at_testpmd_rxonly(peer):
    port, pool, tp = peer
    _forward(tp, "rxonly")
    fs = _frames(3000, 1)
    hs = [_packet(pool, f, 1 + i % 3) for i, f in enumerate(fs)]
    i, end = 0, time.monotonic() + 20
    while i < len(hs) and time.monotonic() < end:
        i += port.tx_burst(hs[i:i + 32])
    assert i == len(hs)
    time.sleep(0.5)
    port.tx_burst([])                      # reclaim what testpmd has used
    s = tp.port_stats()
    assert s["rx_packets"] == len(fs), s
    assert s["rx_bytes"] == sum(map(len, fs)), s


def test_io_echo_is_byte_exact_with_chained_mbufs(peer):
    port, pool, tp = peer
    _forward(tp, "io")
    fs = _frames(400, 2)
    hs = [_packet(pool, f, 1 + i % 3) for i, f in enumerate(fs)]
    back = []
    i, end = 0, time.monotonic() + 20
    while (i < len(hs) or len(back) < len(fs)) and time.monotonic() < end:
        if i - len(back) <= 48:     # testpmd's io mode drops what our Rx ring cannot take
            i += port.tx_burst(hs[i:i + 16])
        got = port.rx_burst(32)
        back += [bytes(pool.mbuf(int(h)).read(0, len(pool.mbuf(int(h))))) for h in got]
        pool.free_bulk(got)
    tp.stop_forwarding()
    assert i == len(hs)
    assert back == fs
    port.tx_burst([])


def test_rx_wait_sleeps_until_testpmd_echoes(peer):
    """testpmd's vhost calls while we ask for calls (avail flags NO_INTERRUPT clear)."""
    port, pool, tp = peer
    _forward(tp, "io")
    try:
        assert port.rx_wait(0, 200) == 0
        fs = _frames(3, 12)
        assert echo_wakes_the_sleeper(port, pool, QS_WAITS, _packet, fs) == fs
    finally:
        tp.stop_forwarding()


def test_testpmd_quitting_takes_the_link_down_and_mbufs_come_back(peer):
    port, pool, tp = peer
    _forward(tp, "rxonly")
    hs = [_packet(pool, b"\x33" * 300, 2) for _ in range(100)]
    sent = port.tx_burst(hs)
    pool.free_bulk(np.array(hs[sent:], np.int32))
    tp.close()
    end = time.monotonic() + 20
    while port.link_up and time.monotonic() < end:
        time.sleep(0.05)
    assert not port.link_up and "closed" in port.disconnect_reason
    end = time.monotonic() + 10
    while pool.in_use_count and time.monotonic() < end:
        time.sleep(0.05)
    assert pool.in_use_count == 0


def _testpmd_vhost(sock, extra="", app_extra=(), fwd="txonly"):
    tp = T.Testpmd(vdevs=[f"net_vhost0,iface={sock}{extra}"], fwd=fwd, mem=512, mbufs=16384,
                   app_extra=list(app_extra))
    tp.start()
    return tp


def _drain_q(port, pool, queue, seconds):
    got, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        hs = port.rx_burst(32, queue)
        got += len(hs)
        pool.free_bulk(hs)
    return got


def test_two_queue_pairs_against_testpmd(tmp_path):
    """queues=2 on both sides: testpmd's txonly streams on both pairs reach both Rx queues."""
    sock = str(tmp_path / f"vumq{os.getpid()}.sock")
    pool = pktbuf.PktmbufPool(8192)
    tp = _testpmd_vhost(sock, ",queues=2", ["--rxq=2", "--txq=2"])
    port = None
    try:
        end = time.monotonic() + 60
        while not os.path.exists(sock) and time.monotonic() < end and tp.alive():
            time.sleep(0.1)
        port = VirtioUserPort(sock, pool, queues=2)
        assert port.wait_link_up(60), (port.disconnect_reason, tp.log()[-3000:])
        assert tp.wait_log(r"testpmd>", 60)
        _forward(tp, "txonly")
        got = [0, 0]
        end = time.monotonic() + 3
        while time.monotonic() < end:
            for q in (0, 1):
                got[q] += _drain_q(port, pool, q, 0.05)
        tp.stop_forwarding()
        assert min(got) > 500, got
    finally:
        tp.cleanup()
        if port is not None:
            port.close()
    assert pool.in_use_count == 0
    pool.close()


def test_server_mode_with_testpmd_reconnecting(tmp_path):
    """pktbuf ``server=1`` against testpmd ``client=1``: traffic; testpmd replaced by a new
    one (its vhost client connects again, pktbuf replays the setup); traffic again."""
    sock = str(tmp_path / f"vusv{os.getpid()}.sock")
    pool = pktbuf.PktmbufPool(8192)
    port = VirtioUserPort(sock, pool, server=True)
    tp = None
    try:
        for k in range(2):
            tp = _testpmd_vhost(sock, ",client=1")
            assert port.wait_link_up(90), (port.disconnect_reason, tp.log()[-3000:])
            assert tp.wait_log(r"testpmd>", 60), tp.log()[-2000:]
            _forward(tp, "txonly")
            assert _drain_q(port, pool, 0, 2) > 1000
            tp.cleanup()
            end = time.monotonic() + 20
            while port.link_up and time.monotonic() < end:
                time.sleep(0.05)
            assert not port.link_up and "closed" in port.disconnect_reason
            assert pool.in_use_count == 0
            tp = None
        assert port.connects == 2
    finally:
        if tp is not None:
            tp.cleanup()
        port.close()
    assert pool.in_use_count == 0
    pool.close()
