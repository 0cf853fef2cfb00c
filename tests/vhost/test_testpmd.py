"""Interop with the real front end: DPDK 22.11 dpdk-testpmd's ``net_virtio_user`` against
pktbuf's ``net_vhost`` (pktbuf listens, testpmd connects; split rings, mergeable Rx buffers and
IN_ORDER as virtio_user negotiates them by default, ``--no-huge``: its memory is one memfd).

One testpmd for the class (starting one takes seconds); each test switches its forwarding mode
and stops forwarding before the next.  Frames are compared byte for byte, counts against
testpmd's own port statistics, and every mbuf is back in its pool at the end.
"""
from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest

import pktbuf
from pktbuf.apps import testpmd as T
from pktbuf.drivers.vhost import layout as L
from pktbuf.drivers.vhost.api.port import VhostPort

from .wait_echo import echo_wakes_the_sleeper

if not T.available():
    if os.environ.get("CI"):
        pytest.fail("dpdk-testpmd is not installed (apt-get install dpdk-dev)", pytrace=False)
    pytest.skip("dpdk-testpmd is not installed", allow_module_level=True)


def _forward(tp, mode):
    tp.stop_forwarding()
    tp.cmd(f"set fwd {mode}")
    mark = len(tp.log())
    tp.cmd("start")
    assert tp.wait_log(r"packet forwarding - ports=", 10, since=mark), tp.log()[-2000:]


def _frames(n, seed):
    """n frames of 60..1514 bytes: a sequence number after the MACs, random bytes."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = rng.choice([60, 64, 65, 128, 511, 1000, 1500, 1514])
        body = bytes(rng.getrandbits(8) for _ in range(size - 18))
        out.append(b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
                   + i.to_bytes(4, "big") + body)
    return out


def _packet(pool, f, segs):
    """``f`` as a chain of ``segs`` mbufs."""
    cut = [len(f) * k // segs for k in range(segs + 1)]
    head = pool.alloc().append_bytes(f[cut[0]:cut[1]])
    for a, b in zip(cut[1:], cut[2:]):
        head.chain(pool.alloc().append_bytes(f[a:b]))
    return int(head)


@pytest.fixture(scope="class", params=["split", "packed"])
def peer(request, tmp_path_factory):
    sock = str(tmp_path_factory.mktemp("vhost") / f"vh{os.getpid()}.sock")
    pool = pktbuf.PktmbufPool(8192)
    port = VhostPort(sock, pool)
    extra = ",packed_vq=1" if request.param == "packed" else ""
    tp = T.Testpmd(vdevs=[f"net_virtio_user0,path={sock},queues=1{extra}"], fwd="rxonly",
                   mem=512, mbufs=16384)
    tp.start()
    try:
        assert port.wait_link_up(90), (port.disconnect_reason, tp.log()[-3000:])
        assert tp.wait_log(r"testpmd>", 60), tp.log()[-2000:]
        assert port.device.packed == (request.param == "packed")
        port.rx_burst(0)                      # compile (or load) the kernels before any timing
        port.tx_burst([])
        yield port, pool, tp
    finally:
        tp.cleanup()
        port.close()
        pool.close()


class TestVirtioUser:
    def test_txonly_frames_arrive_byte_exact(self, peer):
        port, pool, tp = peer
        base = port.stats()["ipackets"]
        _forward(tp, "txonly")
        got, first = 0, None
        end = time.monotonic() + 3
        try:
            while time.monotonic() < end:
                hs = port.rx_burst(32)
                for h in hs:
                    b = pool.mbuf(int(h)).tobytes()
                    if first is None:
                        first = b
                    # testpmd txonly: 64-byte IPv4/UDP frames, 198.18.0.1 -> 198.18.0.2, port 9
                    assert b == first, (b.hex(), first.hex())
                got += len(hs)
                pool.free_bulk(hs)
        finally:
            tp.stop_forwarding()
        assert got > 1000, (got, port.disconnect_reason, port.link(), tp.port_stats(), port.stats())
        assert len(first) == 64
        assert first[12:14] == b"\x08\x00" and first[14] == 0x45
        assert first[16:18] == (50).to_bytes(2, "big")          # IPv4 total length
        assert first[23] == 17                                   # UDP
        assert first[26:34] == bytes([198, 18, 0, 1, 198, 18, 0, 2])
        assert first[34:38] == b"\x00\x09\x00\x09"
        sent = tp.port_stats()["tx_packets"]
        # everything we took was counted; what testpmd sent and we did not take is still in
        # the ring (at most its 256 entries)
        assert port.stats()["ipackets"] - base == got
        while True:                                              # drain the ring
            hs = port.rx_burst(256)
            if not len(hs):
                break
            got += len(hs)
            pool.free_bulk(hs)
        assert got <= sent and sent - got <= 256, (got, sent)

    def test_io_echo_is_byte_exact_with_chained_mbufs(self, peer):
        port, pool, tp = peer
        _forward(tp, "io")
        frames = _frames(3000, seed=7)
        want = list(frames)
        got = []
        i = 0
        end = time.monotonic() + 20
        try:
            while len(got) < len(want) and time.monotonic() < end:
                # at most 64 frames in flight: testpmd's io mode drops what its Tx virtqueue
                # (256 descriptors, up to 3 a frame here) cannot take, and this loop, in
                # Python on a loaded machine, may fall behind its echo
                if i < len(frames) and i - len(got) <= 32:
                    hs = [_packet(pool, f, 1 + (i + k) % 3) for k, f in
                          enumerate(frames[i:i + 32])]
                    k = port.tx_burst(hs)
                    if k < len(hs):
                        pool.free_bulk(np.array(hs[k:], np.int32))
                    i += k
                for h in port.rx_burst(64):
                    got.append(pool.mbuf(int(h)).tobytes())
                    pool.mbuf(int(h)).free()
        finally:
            tp.stop_forwarding()
        assert len(got) == len(want), (len(got), tp.port_stats())
        bad = [j for j, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, f"{len(bad)} frames differ, first at {bad[0]}"

    def test_rxonly_counts_every_frame_and_byte(self, peer):
        port, pool, tp = peer
        _forward(tp, "rxonly")
        try:
            before = tp.port_stats()
            frames = _frames(5000, seed=3)
            sent = 0
            end = time.monotonic() + 20
            while sent < len(frames) and time.monotonic() < end:
                hs = [_packet(pool, f, 1) for f in frames[sent:sent + 64]]
                k = port.tx_burst(hs)
                pool.free_bulk(np.array(hs[k:], np.int32))
                sent += k
            assert sent == len(frames)
            nbytes = sum(len(f) for f in frames)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                after = tp.port_stats()
                if after.get("rx_packets", 0) - before["rx_packets"] >= sent:
                    break
                time.sleep(0.2)
            assert after["rx_packets"] - before["rx_packets"] == sent
            assert after["rx_bytes"] - before["rx_bytes"] == nbytes
        finally:
            tp.stop_forwarding()

    def test_rx_wait_sleeps_until_testpmd_echoes(self, peer):
        """testpmd's virtio_user kicks while we ask for kicks (split: used flags; packed:
        device event flags); a wait with nothing coming times out."""
        port, pool, tp = peer
        _forward(tp, "io")
        try:
            assert port.rx_wait(0, 200) == 0
            fs = _frames(3, seed=11)
            assert echo_wakes_the_sleeper(port, pool, L.QS_WAITS, _packet, fs) == fs
        finally:
            tp.stop_forwarding()

    def test_testpmd_quitting_takes_the_link_down_and_mbufs_come_back(self, peer):
        port, pool, tp = peer
        assert port.link()["status"] == "UP"
        tp.close()
        deadline = time.monotonic() + 15
        while port.link_up and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not port.link_up
        assert port.disconnect_reason == "front end closed the connection"
        assert port.rx_burst(32).size == 0
        assert pool.avail_count == pool.n


def _drain(port, pool, queue, seconds):
    """Frames received on ``queue`` in ``seconds`` (freed), all 64-byte txonly frames."""
    got = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hs = port.rx_burst(32, queue)
        for h in hs:
            assert len(pool.mbuf(int(h))) == 64
        got += len(hs)
        pool.free_bulk(hs)
    return got


def test_two_queue_pairs(tmp_path):
    """queues=2 on both sides: pair 1 is enabled later (through virtio_user's local control
    queue) and both pairs carry testpmd's txonly streams."""
    sock = str(tmp_path / f"vhmq{os.getpid()}.sock")
    pool = pktbuf.PktmbufPool(8192)
    port = VhostPort(sock, pool, queues=2)
    tp = T.Testpmd(vdevs=[f"net_virtio_user0,path={sock},queues=2"], fwd="txonly", mem=512,
                   mbufs=16384, app_extra=["--rxq=2", "--txq=2"])
    tp.start()
    try:
        assert port.wait_link_up(90), (port.disconnect_reason, tp.log()[-3000:])
        assert tp.wait_log(r"testpmd>", 60)
        _forward(tp, "txonly")
        got = [0, 0]
        end = time.monotonic() + 3
        while time.monotonic() < end:
            for q in (0, 1):
                got[q] += _drain(port, pool, q, 0.05)
        tp.stop_forwarding()
        assert min(got) > 1000, got
        assert [v.up for v in port.device.vrings] == [True] * 4
        s = port.stats()
        assert s["q_ipackets"] == got
    finally:
        tp.cleanup()
        port.close()
    assert pool.avail_count == pool.n
    pool.close()


def test_client_mode_reconnects_both_ways(tmp_path):
    """pktbuf ``client=1`` against testpmd ``server=1``: traffic; pktbuf's port replaced by a
    new one (virtio_user replays the setup, its split rings keep their indices: we adopt
    ``used.idx``); testpmd replaced by a new one (pktbuf's client retries and reconnects)."""
    sock = str(tmp_path / f"vhcl{os.getpid()}.sock")
    pool = pktbuf.PktmbufPool(8192)

    def server():
        tp = T.Testpmd(vdevs=[f"net_virtio_user0,path={sock},queues=1,server=1"],
                       socket=sock, abstract=False, fwd="txonly", mem=512, mbufs=16384)
        tp.start()
        assert tp.wait_listening(60), tp.log()[-2000:]
        return tp

    tp = server()
    port = None
    try:
        port = VhostPort(sock, pool, client=True)
        assert port.wait_link_up(90), (port.disconnect_reason, tp.log()[-3000:])
        assert tp.wait_log(r"testpmd>", 60)
        _forward(tp, "txonly")
        assert _drain(port, pool, 0, 2) > 1000
        # 1. our side goes away and comes back, testpmd keeps running (and sending)
        port.close()
        port = VhostPort(sock, pool, client=True)
        assert port.wait_link_up(30), (port.disconnect_reason, tp.log()[-3000:])
        assert _drain(port, pool, 0, 2) > 1000
        tp.stop_forwarding()
        # 2. testpmd goes away; a new one listens on the path; our client reconnects
        tp.cleanup()
        assert not port.link_up or _wait_down(port)
        assert "closed" in port.disconnect_reason
        tp = server()
        assert port.wait_link_up(60), (port.disconnect_reason, tp.log()[-3000:])
        assert port.connects == 2
        assert tp.wait_log(r"testpmd>", 60)
        _forward(tp, "txonly")
        assert _drain(port, pool, 0, 2) > 1000
        tp.stop_forwarding()
    finally:
        tp.cleanup()
        if port is not None:
            port.close()
    assert pool.avail_count == pool.n
    pool.close()


def _wait_down(port, timeout=15):
    end = time.monotonic() + timeout
    while port.link_up and time.monotonic() < end:
        time.sleep(0.05)
    return not port.link_up


def test_32768_entry_rings_from_testpmd(tmp_path):
    """testpmd's net_virtio_user with queue_size=32768 (split): the back end takes rings of
    32768 entries, and testpmd's txonly frames arrive, all the same 64 bytes."""
    sock = str(tmp_path / f"vhbig{os.getpid()}.sock")
    pool = pktbuf.PktmbufPool(8192)
    port = VhostPort(sock, pool)
    tp = T.Testpmd(vdevs=[f"net_virtio_user0,path={sock},queues=1,queue_size=32768"],
                   fwd="txonly", mem=1024, mbufs=65536)
    tp.start()
    try:
        assert port.wait_link_up(90), (port.disconnect_reason, tp.log()[-3000:])
        assert tp.wait_log(r"testpmd>", 60)
        assert [v.num for v in port.device.vrings] == [32768, 32768]
        _forward(tp, "txonly")
        got = _drain(port, pool, 0, 3)
        tp.stop_forwarding()
        assert got > 1000, (got, tp.port_stats(), port.disconnect_reason)
    finally:
        tp.cleanup()
        port.close()
    assert pool.avail_count == pool.n
    pool.close()
