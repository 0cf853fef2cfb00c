"""Packed rings (``packed_vq=1``) against DPDK 22.11 dpdk-testpmd's ``net_vhost``: one testpmd
for the module; pktbuf's Tx counted exactly by testpmd's rxonly, testpmd's txonly counted
exactly by pktbuf, frames echoed by testpmd's io mode byte for byte (chained mbufs), IN_ORDER
on and off; every mbuf back in its pool at the end."""
from __future__ import annotations

import os
import time

import pytest

import pktbuf
from pktbuf.apps import testpmd as T
from pktbuf.drivers.vhost import proto as P
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort
from pktbuf.drivers.virtio_user.layout import QS_ERRORS, QS_FREE, QS_INFLIGHT, QS_KICKS, QS_WAITS

if not T.available():
    if os.environ.get("CI"):
        pytest.fail("dpdk-testpmd is not installed (apt-get install dpdk-dev)", pytrace=False)
    pytest.skip("dpdk-testpmd is not installed", allow_module_level=True)

from ..vhost.wait_echo import echo_wakes_the_sleeper
from .test_testpmd import _drain, _forward, _frames, _packet


@pytest.fixture(scope="module")
def tp(tmp_path_factory):
    """testpmd with one vhost port; each test connects its own front end to it."""
    sock = str(tmp_path_factory.mktemp("vup") / f"vup{os.getpid()}.sock")
    t = T.Testpmd(vdevs=[f"net_vhost0,iface={sock},queues=1"], fwd="rxonly", mem=512,
                  mbufs=16384)
    t.start()
    try:
        end = time.monotonic() + 60
        while not os.path.exists(sock) and time.monotonic() < end and t.alive():
            time.sleep(0.1)
        assert os.path.exists(sock), t.log()[-2000:]
        assert t.wait_log(r"testpmd>", 60), t.log()[-2000:]
        yield t, sock
    finally:
        t.cleanup()


@pytest.fixture(params=[True, False], ids=["in_order", "any_order"])
def peer(tp, request):
    t, sock = tp
    t.stop_forwarding()
    pool = pktbuf.PktmbufPool(8192)
    port = VirtioUserPort(sock, pool, packed_vq=True, in_order=request.param)
    try:
        assert port.wait_link_up(60), (port.disconnect_reason, t.log()[-3000:])
        assert port.features >> P.VIRTIO_F_RING_PACKED & 1
        assert bool(port.features >> P.VIRTIO_F_IN_ORDER & 1) == request.param
        port.rx_burst(0)
        port.tx_burst([])
        yield port, pool, t
        assert port.link_up, port.disconnect_reason
    finally:
        t.stop_forwarding()
        port.close()
        assert pool.in_use_count == 0
        pool.close()


def test_packed_testpmd_txonly_counts_match(peer):
    port, pool, tp = peer
    port.stats_reset()
    _forward(tp, "txonly")
    got = _drain(port, pool, 1.0)
    tp.stop_forwarding()
    got += _drain(port, pool, 0.3)
    s = tp.port_stats()
    assert len(got) > 500
    assert set(got) == {64}
    assert s["tx_packets"] == len(got) == port.stats()["ipackets"]
    assert port.stats()["ibytes"] == 64 * len(got)
    assert port.stats()["ierrors"] == 0


def test_packed_tx_counts_exact_at_testpmd_rxonly(peer):
    port, pool, tp = peer
    _forward(tp, "rxonly")
    fs = _frames(1500, 1)
    hs = [_packet(pool, f, 1 + i % 3) for i, f in enumerate(fs)]
    i, end = 0, time.monotonic() + 20
    while i < len(hs) and time.monotonic() < end:
        i += port.tx_burst(hs[i:i + 32])
    assert i == len(hs)
    time.sleep(0.3)
    port.tx_burst([])                      # reclaim what testpmd has used
    s = tp.port_stats()
    assert s["rx_packets"] == len(fs), s
    assert s["rx_bytes"] == sum(map(len, fs)), s
    assert port.tx_queue(0).st[QS_ERRORS] == 0          # nothing dropped (missed is retried)


def test_packed_io_echo_is_byte_exact_with_chained_mbufs(peer):
    port, pool, tp = peer
    _forward(tp, "io")
    fs = _frames(400, 2)
    hs = [_packet(pool, f, 1 + i % 3) for i, f in enumerate(fs)]
    back = []
    i, end = 0, time.monotonic() + 20
    while (i < len(hs) or len(back) < len(fs)) and time.monotonic() < end:
        i += port.tx_burst(hs[i:i + 16])
        got = port.rx_burst(32)
        back += [bytes(pool.mbuf(int(h)).read(0, len(pool.mbuf(int(h))))) for h in got]
        pool.free_bulk(got)
    tp.stop_forwarding()
    assert i == len(hs)
    assert back == fs
    port.tx_burst([])


def test_packed_rx_wait_sleeps_until_testpmd_echoes(peer):
    """testpmd's vhost calls while our driver event flags say ENABLE."""
    port, pool, t = peer
    _forward(t, "io")
    assert port.rx_wait(0, 200) == 0
    fs = _frames(3, 13)
    assert echo_wakes_the_sleeper(port, pool, QS_WAITS, _packet, fs) == fs


@pytest.mark.parametrize("packed", [False, True], ids=["split", "packed"])
def test_event_idx_against_testpmd(tp, packed):
    """event_idx=1 with testpmd's net_vhost (it offers EVENT_IDX): the io echo is byte-exact,
    the kicks are the few the back end's stale event allows (a kick per burst would be a
    wrong rule), and rx_wait is woken by testpmd's call through used_event / ENABLE."""
    t, sock = tp
    t.stop_forwarding()
    pool = pktbuf.PktmbufPool(8192)
    port = VirtioUserPort(sock, pool, packed_vq=packed, event_idx=True)
    try:
        assert port.wait_link_up(60), (port.disconnect_reason, t.log()[-3000:])
        assert port.features >> P.VIRTIO_RING_F_EVENT_IDX & 1
        assert bool(port.features >> P.VIRTIO_F_RING_PACKED & 1) == packed
        port.rx_burst(0)
        port.tx_burst([])
        _forward(t, "io")
        fs = _frames(400, 21)
        hs = [_packet(pool, f, 1 + i % 3) for i, f in enumerate(fs)]
        back, i, bursts = [], 0, 0
        end = time.monotonic() + 20
        while (i < len(hs) or len(back) < len(fs)) and time.monotonic() < end:
            if i < len(hs):
                i += port.tx_burst(hs[i:i + 16])
                bursts += 1
            got = port.rx_burst(32)
            back += [pool.mbuf(int(h)).tobytes() for h in got]
            pool.free_bulk(got)
        assert i == len(hs) and back == fs
        kicks = int(port.tx_queue(0).st[QS_KICKS])
        assert bursts >= 25 and kicks <= 2, (kicks, bursts)
        fs = _frames(3, 22)
        assert echo_wakes_the_sleeper(port, pool, QS_WAITS, _packet, fs) == fs
    finally:
        t.stop_forwarding()
        port.close()
        assert pool.in_use_count == 0
        pool.close()


@pytest.mark.parametrize("packed", [False, True], ids=["split", "packed"])
def test_32768_entry_rings_against_testpmd(tp, packed):
    """queue_size=32768 with testpmd's net_vhost: 3000 frames in flight before testpmd
    forwards any, echoed byte-exact; every Rx descriptor was posted."""
    t, sock = tp
    t.stop_forwarding()
    pool = pktbuf.PktmbufPool(32768 + 8192)
    port = VirtioUserPort(sock, pool, packed_vq=packed, queue_size=32768)
    try:
        assert port.wait_link_up(60), (port.disconnect_reason, t.log()[-3000:])
        assert port.rx_queue(0).st[QS_INFLIGHT] == 32768
        fs = _frames(3000, 31)
        hs = [_packet(pool, f, 1 + i % 2) for i, f in enumerate(fs)]
        sent = sum(port.tx_burst(hs[i:i + 64]) for i in range(0, len(hs), 64))
        assert sent == len(hs)
        _forward(t, "io")
        back, end = [], time.monotonic() + 30
        while len(back) < len(fs) and time.monotonic() < end:
            got = port.rx_burst(32)
            back += [pool.mbuf(int(h)).tobytes() for h in got]
            pool.free_bulk(got)
        assert back == fs, (len(back), t.port_stats())
        port.tx_burst([])
    finally:
        t.stop_forwarding()
        port.close()
        assert pool.in_use_count == 0
        pool.close()


@pytest.mark.parametrize("packed", [False, True], ids=["split", "packed"])
def test_indirect_tx_against_testpmd(tp, packed):
    """indirect=1 with testpmd's net_vhost: 100 three-segment packets take 100 ring slots
    (not 400) before testpmd forwards any, and the io echo brings them back byte-exact."""
    t, sock = tp
    t.stop_forwarding()
    pool = pktbuf.PktmbufPool(8192)
    port = VirtioUserPort(sock, pool, packed_vq=packed, indirect=True)
    try:
        assert port.wait_link_up(60), (port.disconnect_reason, t.log()[-3000:])
        assert port.features >> P.VIRTIO_RING_F_INDIRECT_DESC & 1
        port.rx_burst(0)
        port.tx_burst([])
        fs = _frames(100, 41)
        hs = [_packet(pool, f, 3) for f in fs]
        assert port.tx_burst(hs) == 100
        assert port.tx_queue(0).st[QS_FREE] == 256 - 100
        _forward(t, "io")
        back, end = [], time.monotonic() + 20
        while len(back) < len(fs) and time.monotonic() < end:
            got = port.rx_burst(32)
            back += [pool.mbuf(int(h)).tobytes() for h in got]
            pool.free_bulk(got)
        assert back == fs, (len(back), t.port_stats())
        port.tx_burst([])
        assert port.link_up, port.disconnect_reason
    finally:
        t.stop_forwarding()
        port.close()
        assert pool.in_use_count == 0
        pool.close()
