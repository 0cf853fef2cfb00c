"""Indirect descriptors on the front end (``indirect=1``, VIRTIO_RING_F_INDIRECT_DESC): a Tx
packet of 2..16 descriptors (header and segments) takes one ring slot pointing at a table
in the ring memory; longer ones fall back to a direct chain.  Against pktbuf's back end (which
walks and checks the tables) split and packed, IN_ORDER on and off: byte-exact, one slot a
packet, every mbuf back."""
from __future__ import annotations

import pytest

import pktbuf
from pktbuf.drivers.vhost import proto as P
from pktbuf.drivers.vhost.api.port import VhostPort
from pktbuf.drivers.virtio_user import layout as UL
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort

from .test_pair import _frames, _move, _pkt


@pytest.fixture
def pools():
    a, b = pktbuf.PktmbufPool(4096), pktbuf.PktmbufPool(4096)
    yield a, b
    assert a.in_use_count == 0 and b.in_use_count == 0
    a.close()
    b.close()


@pytest.mark.parametrize("packed", [False, True], ids=["split", "packed"])
@pytest.mark.parametrize("in_order", [True, False], ids=["in_order", "any_order"])
def test_indirect_tx_byte_exact_one_slot_a_packet(tmp_path, pools, packed, in_order):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, indirect=True, packed_vq=packed, in_order=in_order,
                        queue_size=64)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20), (fe.disconnect_reason,
                                                             be.disconnect_reason)
        assert fe.features >> P.VIRTIO_RING_F_INDIRECT_DESC & 1
        txq = fe.tx_queue(0)
        assert txq.cfg[UL.Q_IND] != 0 and fe.rx_queue(0).cfg[UL.Q_IND] == 0
        # 40 packets of 3 segments (4 descriptors each direct) fit a 64-entry ring at once
        fs = _frames(40, 5, top=1514)
        hs = [_pkt(pa, f, 3) for f in fs]
        assert fe.tx_burst(hs) == 40
        assert txq.st[UL.QS_FREE] == 64 - 40
        got = []
        while len(got) < 40:
            x = be.rx_burst(32)
            got += [pb.mbuf(int(h)).tobytes() for h in x]
            pb.free_bulk(x)
        assert got == fs
        fe.tx_burst([])
        assert txq.st[UL.QS_FREE] == 64
        # many more, 1..16 segments (a 16-segment packet needs 17 descriptors: a direct
        # chain), through the ring several times
        fs = _frames(300, 6)
        hs = [_pkt(pa, f, 1 + i % 17) for i, f in enumerate(fs)]
        assert _move(fe, hs, be, pb) == fs
        fe.tx_burst([])
        assert fe.link_up and be.link_up, (fe.disconnect_reason, be.disconnect_reason)
        assert be.stats()["ierrors"] == 0
    finally:
        fe.close()
        be.close()


def test_indirect_is_off_by_default(tmp_path, pools):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    ports = pktbuf.Ports(pa)
    try:
        fe = ports.open(f"net_virtio_user0,path={path}")
        assert fe.wait_link_up(20)
        assert not fe.features >> P.VIRTIO_RING_F_INDIRECT_DESC & 1
        assert fe.tx_queue(0).cfg[UL.Q_IND] == 0
    finally:
        ports.close()
        be.close()
