"""pktbuf's front end with packed rings (``packed_vq=1``) against pktbuf's back end over a
real socket: byte-exact both ways with chains of 1-3 mbufs up to 6000 bytes, mergeable Rx
on and off, IN_ORDER on and off, two queue pairs, the back end going away with packets in
flight, and a bad used descriptor taking the link down with the reason; every mbuf back."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import pktbuf
from pktbuf.drivers.vhost import proto as P
from pktbuf.drivers.vhost.api.port import VhostPort
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort

from .test_pair import _frames, _move, _pkt, _wait


@pytest.fixture
def pools():
    a, b = pktbuf.PktmbufPool(2048), pktbuf.PktmbufPool(2048)
    yield a, b
    assert a.in_use_count == 0 and b.in_use_count == 0
    a.close()
    b.close()


@pytest.mark.parametrize("mrg,in_order", [(True, True), (False, True), (True, False),
                                          (False, False)])
def test_packed_byte_exact_both_ways_with_chains(tmp_path, pools, mrg, in_order):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, mrg_rxbuf=mrg, in_order=in_order, packed_vq=True,
                        queue_size=64)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20), (fe.disconnect_reason,
                                                             be.disconnect_reason)
        assert fe.features >> P.VIRTIO_F_RING_PACKED & 1
        assert bool(fe.features >> P.VIRTIO_NET_F_MRG_RXBUF & 1) == mrg
        assert bool(fe.features >> P.VIRTIO_F_IN_ORDER & 1) == in_order
        # 150 packets through a 64-entry ring: the wrap counters flip several times
        fs = _frames(150, 1)
        assert _move(fe, [_pkt(pa, f, 1 + i % 3) for i, f in enumerate(fs)], be, pb) == fs
        fe.tx_burst([])
        fs = _frames(150, 2, top=6000 if mrg else 1514)
        if not mrg:
            fs = [f for f in fs if len(f) <= 1514]
        assert _move(be, [_pkt(pb, f, 1 + i % 3) for i, f in enumerate(fs)], fe, pa) == fs
        s = fe.stats()
        assert s["ipackets"] == len(fs) and s["ibytes"] == sum(map(len, fs))
        assert s["ierrors"] == 0
        assert fe.link_up and be.link_up
    finally:
        fe.close()
        be.close()


def test_packed_two_queue_pairs(tmp_path, pools):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb, queues=2)
    ports = pktbuf.Ports(pa)
    try:
        fe = ports.open(f"net_virtio_user0,path={path},queues=2,packed_vq=1")
        assert fe.wait_link_up(20) and be.wait_link_up(20), fe.disconnect_reason
        assert fe.features >> P.VIRTIO_F_RING_PACKED & 1
        for q in (0, 1):
            fs = _frames(60, 10 + q)
            assert _move(fe, [_pkt(pa, f, 2) for f in fs], be, pb, queue=q) == fs
            fs = _frames(60, 20 + q)
            assert _move(be, [_pkt(pb, f, 1) for f in fs], fe, pa, queue=q) == fs
        x = fe.xstats()
        assert x["rx_q0_packets"] == 60 and x["rx_q1_packets"] == 60
        fe.tx_burst([])
        fe.tx_burst([], 1)
    finally:
        ports.close()
        be.close()


def test_packed_back_end_gone_with_packets_in_flight(tmp_path, pools):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, packed_vq=True)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20)
        hs = [_pkt(pa, b"\x11" * 200, 1 + i % 3) for i in range(60)]
        sent = fe.tx_burst(hs)                  # the back end never reads them
        assert sent > 0
        pa.free_bulk(hs[sent:])
        be.close()
        assert _wait(lambda: not fe.link_up)
        assert "closed" in fe.disconnect_reason
        assert _wait(lambda: pa.in_use_count == 0), pa.in_use_count
    finally:
        fe.close()


@pytest.mark.parametrize("bid,flags,why", [
    (999, 0x8080, "vring 1: used id"),                    # id past the ring, flags used
    (2, 0x8080, "vring 1: used id"),                      # an id never given
    (0, 0x8000, "vring 1: packed descriptor flags"),      # USED without AVAIL: wrong wrap
])
def test_packed_bad_used_descriptor_takes_the_link_down(tmp_path, pools, bid, flags, why):
    """The back end writes a bad used descriptor at slot 0 of the Tx ring: the next Tx burst
    fails the ring, the link goes down saying why, and every mbuf the rings held is back."""
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, packed_vq=True, in_order=False)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20)
        hs = [_pkt(pa, b"\x44" * 100, 1) for _ in range(2)]
        assert fe.tx_burst(hs) == 2                      # the back end does not read them
        mem = fe.device._mem
        desc, _, _, _ = mem.ring(1)
        d = mem.region.array[desc - mem.region.address:][:16]
        d[8:16] = np.frombuffer(struct.pack("<IHH", 0, bid, flags), np.uint8)
        assert fe.tx_burst([]) == 0
        assert _wait(lambda: not fe.link_up)
        assert why in fe.disconnect_reason and f"({bid if bid else flags})" in \
            fe.disconnect_reason, fe.disconnect_reason
        assert _wait(lambda: pa.in_use_count == 0), pa.in_use_count
    finally:
        fe.close()
        be.close()
