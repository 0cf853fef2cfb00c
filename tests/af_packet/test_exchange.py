"""pktbuf <-> pktbuf and pktbuf <-> a plain socket over a veth pair: bytes compared."""
import pytest

from pktbuf.drivers.af_packet.api import AfPacketPort

from .helpers import RawPeer, frames, receive, send_all

SIZES = [60, 61, 64, 100, 128, 256, 512, 1000, 1499, 1500, 1513, 1514]


def _ports(ns, pool, **kw):
    with ns.entered():
        a = AfPacketPort(pool, "veth0", **kw)
        b = AfPacketPort(pool, "veth1", port_id=1, **kw)
    return a, b


@pytest.mark.parametrize("qdisc_bypass", [True, False])
def test_pktbuf_to_pktbuf(ns, pool, qdisc_bypass):
    a, b = _ports(ns, pool, qdisc_bypass=qdisc_bypass)
    want = frames(SIZES * 20, seed=3)
    free0 = pool.avail_count
    try:
        assert send_all(a, pool, want) == len(want)
        got = receive(b, pool, len(want))
        assert got == want
        s = a.stats()
        assert s["opackets"] == len(want) and s["obytes"] == sum(map(len, want))
        s = b.stats()
        assert s["ipackets"] == len(want) and s["ibytes"] == sum(map(len, want))
        assert s["imissed"] == 0 and s["ierrors"] == 0
    finally:
        a.close()
        b.close()
    assert pool.avail_count == free0 == pool.n


def test_raw_peer_both_ways(ns, pool):
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
        peer = RawPeer("veth1")
    try:
        assert a.link() == {"status": "UP", "speed": 10000, "duplex": "full-duplex"}
        assert a.mac_addr.hex(":") == ns.link("veth0")["address"]
        assert a.mtu == 1500 and a.info()["iface"] == "veth0"
        want = frames(SIZES * 5, seed=4)
        peer.send(want)
        assert receive(a, pool, len(want)) == want
        want2 = frames(SIZES * 5, seed=5)
        assert send_all(a, pool, want2) == len(want2)
        assert peer.recv(len(want2)) == want2
    finally:
        a.close()
        peer.close()
    assert pool.avail_count == pool.n
