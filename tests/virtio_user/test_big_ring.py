"""Rings above 1024 entries (``queue_size`` up to 32768, the split ring's limit) between
pktbuf's two ends, split and packed: thousands of chains in flight one way and thousands of
posted buffers filled the other way, byte-exact; a ring larger than the pool is filled as
far as the pool allows; sizes past 32768 are refused."""
from __future__ import annotations

import os
import random
import time

import pytest

import pktbuf
from pktbuf.drivers.vhost.api.port import VhostPort
from pktbuf.drivers.virtio_user import layout as UL
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort
from pktbuf.errors import InvalidArgument

from .test_pair import _bytes, _pkt

BIG = 32768


def _frames(n, seed):
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice([60, 64, 200, 1000, 1514])) for _ in range(n)]


def _drain(port, pool, want, timeout=30.0):
    got, end = [], time.monotonic() + timeout
    while len(got) < want and time.monotonic() < end:
        hs = port.rx_burst(32)
        got += [_bytes(pool, h) for h in hs]
        pool.free_bulk(hs)
    return got


@pytest.mark.parametrize("packed", [False, True], ids=["split", "packed"])
def test_32768_entries_both_ways(tmp_path, packed):
    pa = pktbuf.PktmbufPool(BIG + 8192)        # the Rx ring takes 32768 of them
    pb = pktbuf.PktmbufPool(8192)
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, queue_size=BIG, packed_vq=packed)
    try:
        assert fe.wait_link_up(30) and be.wait_link_up(30), (fe.disconnect_reason,
                                                             be.disconnect_reason)
        assert be.device.vrings[1].num == BIG and be.device.packed == packed
        rxq = fe.rx_queue(0)
        assert rxq.st[UL.QS_INFLIGHT] == BIG          # every Rx descriptor posted
        # front end -> back end: 3000 chains in flight at once before the back end looks
        fs = _frames(3000, 1)
        hs = [_pkt(pa, f, 1 + i % 2) for i, f in enumerate(fs)]
        sent = 0
        for i in range(0, len(hs), 64):
            sent += fe.tx_burst(hs[i:i + 64])
        assert sent == len(hs)
        assert fe.tx_queue(0).st[UL.QS_INFLIGHT] == len(hs)
        assert _drain(be, pb, len(fs)) == fs
        fe.tx_burst([])                                # reclaim
        assert fe.tx_queue(0).st[UL.QS_INFLIGHT] == 0
        # back end -> front end: 3000 frames into posted buffers before the front end looks
        fs = _frames(3000, 2)
        hs = [_pkt(pb, f, 1 + i % 3) for i, f in enumerate(fs)]
        sent = 0
        for i in range(0, len(hs), 64):
            sent += be.tx_burst(hs[i:i + 64])
        assert sent == len(hs)
        assert _drain(fe, pa, len(fs)) == fs
        assert fe.link_up and be.link_up
    finally:
        fe.close()
        be.close()
    assert pa.in_use_count == 0 and pb.in_use_count == 0
    pa.close()
    pb.close()


def test_a_ring_larger_than_the_pool_is_filled_as_far_as_it_goes(tmp_path):
    pa, pb = pktbuf.PktmbufPool(4096), pktbuf.PktmbufPool(4096)
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, queue_size=BIG)
    try:
        assert fe.wait_link_up(30) and be.wait_link_up(30), fe.disconnect_reason
        rxq = fe.rx_queue(0)
        assert rxq.st[UL.QS_INFLIGHT] == 4096 and pa.avail_count == 0
        for k in range(3):                             # received, freed, posted again
            fs = _frames(500, 10 + k)
            hs = [_pkt(pb, f, 1) for f in fs]
            assert be.tx_burst(hs) == len(hs)
            assert _drain(fe, pa, len(fs)) == fs
        fe.rx_burst(0)
        assert rxq.st[UL.QS_INFLIGHT] + pa.avail_count == 4096
    finally:
        fe.close()
        be.close()
    assert pa.in_use_count == 0 and pb.in_use_count == 0
    pa.close()
    pb.close()


def test_queue_size_limits(tmp_path):
    pool = pktbuf.PktmbufPool(64)
    try:
        for bad in (BIG * 2, 3000, 1):
            with pytest.raises(InvalidArgument):
                VirtioUserPort(str(tmp_path / "x"), pool, queue_size=bad, server=True)
        ports = pktbuf.Ports(pool)
        try:
            with pytest.raises(InvalidArgument):
                ports.open(f"net_virtio_user0,path={tmp_path / 'y'},server=1,queue_size=65536")
        finally:
            ports.close()
        p = VirtioUserPort(str(tmp_path / "z"), pool, queue_size=BIG, server=True)
        p.close()
        assert not os.path.exists(tmp_path / "x")
    finally:
        pool.close()
