"""What an AF_PACKET port does besides moving frames: VLAN tags, promiscuity, its own Tx,
MTU, link down, fanout, statistics."""
import struct
import threading
import time

import numpy as np
import pytest

from pktbuf.drivers.af_packet.layout import RX_VLAN, RX_VLAN_STRIPPED, TX_VLAN
from pktbuf.drivers.af_packet.api import AfPacketPort
from pktbuf.ethdev.api import Ports

from .helpers import RawPeer, frames, make_packet, receive, send_all, udp_frame, vlan_tag

MARK = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x09" + b"\x88\xb5" + b"MARKER" + bytes(40)


def _is_mark(b):
    return b == MARK


# -- VLAN ---------------------------------------------------------------------------------------
def test_vlan_tag_reinserted_byte_exact(ns, pool):
    """The kernel strips the tag before packet sockets see the frame; the port puts it back
    (the TPID the kernel reports: 802.1Q and 802.1ad), as libpcap does."""
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
        peer = RawPeer("veth1")
    try:
        base = frames([60, 64, 300, 1500, 1514], seed=7)
        # (the kernel's send path allows the 4 extra bytes for 802.1Q tags only)
        want = [t for f in base for t in (vlan_tag(f, 0x2005), vlan_tag(f, 0x0001))
                ] + [vlan_tag(f, 0xF00F, 0x88A8) for f in base[:4]]
        peer.send(want)
        got = receive(a, pool, len(want), info=True)
        assert [g[0] for g in got] == want
        assert all(fl & RX_VLAN and not fl & RX_VLAN_STRIPPED for _, _, fl, _ in got)
        assert [g[3] for g in got] == [struct.unpack(">H", w[14:16])[0] for w in want]
    finally:
        a.close()
        peer.close()


def test_vlan_strip_keeps_tag_in_vlan_tci(ns, pool):
    with ns.entered():
        a = AfPacketPort(pool, "veth0", vlan_strip=True)
        peer = RawPeer("veth1")
    try:
        base = frames([60, 1514], seed=8)
        peer.send([vlan_tag(f, 0x0123) for f in base] + base)
        got = receive(a, pool, 4, info=True)
        assert [g[0] for g in got] == base + base
        assert [(g[2] & (RX_VLAN | RX_VLAN_STRIPPED), g[3]) for g in got] == \
            [(RX_VLAN | RX_VLAN_STRIPPED, 0x123)] * 2 + [(0, 0)] * 2
    finally:
        a.close()
        peer.close()


def test_tx_vlan_insert(ns, pool):
    """An mbuf with TX_VLAN goes out with vlan_tci inserted after the MAC addresses."""
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
        peer = RawPeer("veth1")
    try:
        base = frames([60, 1514], seed=9)
        hs = []
        for f in base:
            m = pool.mbuf(make_packet(pool, f))
            m.set(ol_flags=TX_VLAN, vlan_tci=0x0abc)
            hs.append(m.handle)
        assert a.tx_burst(hs) == 2
        assert peer.recv(2) == [vlan_tag(f, 0x0abc) for f in base]
    finally:
        a.close()
        peer.close()
    assert pool.avail_count == pool.n


# -- promiscuity, own Tx ------------------------------------------------------------------------
def test_promiscuity_undone_on_close(ns, pool):
    assert ns.link("veth0")["promiscuity"] == 0
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
        b = AfPacketPort(pool, "veth0", promisc=False, port_id=1)
    assert ns.link("veth0")["promiscuity"] == 1
    assert a.promiscuous and not b.promiscuous
    a.promiscuous_disable()
    assert ns.link("veth0")["promiscuity"] == 0
    a.promiscuous_enable()
    b.promiscuous_enable()
    assert ns.link("veth0")["promiscuity"] == 2
    a.close()
    assert ns.link("veth0")["promiscuity"] == 1
    b.close()
    assert ns.link("veth0")["promiscuity"] == 0


@pytest.mark.parametrize("qdisc_bypass", [True, False])
def test_own_tx_not_received(ns, pool, qdisc_bypass):
    """Frames the port sends never come back on its own Rx (nor on another port of the
    interface: PACKET_IGNORE_OUTGOING); a marker the peer sends afterwards arrives, so the
    frames had time to."""
    with ns.entered():
        a = AfPacketPort(pool, "veth0", qdisc_bypass=qdisc_bypass)
        a2 = AfPacketPort(pool, "veth0", qdisc_bypass=qdisc_bypass, port_id=1)
        peer = RawPeer("veth1")
    try:
        mine = frames([60, 500, 1514] * 10, seed=10)
        assert send_all(a, pool, mine) == len(mine)
        assert len(peer.recv(len(mine))) == len(mine)     # they went out
        peer.send([MARK])
        assert receive(a, pool, 100, until=_is_mark) == [MARK]
        assert receive(a2, pool, 100, until=_is_mark) == [MARK]
    finally:
        a.close()
        a2.close()
        peer.close()
    assert pool.avail_count == pool.n


def test_outgoing_seen_when_asked(ns, pool):
    """The positive control of the test above: with ignore_outgoing=False another port on the
    same interface does see what the first one sends (without qdisc bypass)."""
    with ns.entered():
        a = AfPacketPort(pool, "veth0", qdisc_bypass=False)
        watch = AfPacketPort(pool, "veth0", ignore_outgoing=False, port_id=1)
    try:
        mine = frames([60, 700], seed=11)
        assert send_all(a, pool, mine) == 2
        assert receive(watch, pool, 2) == mine
    finally:
        a.close()
        watch.close()


# -- MTU and bad frames -------------------------------------------------------------------------
def test_bad_frames_dropped_and_counted(ns, pool):
    """Zero-length, shorter than a header, and longer than the MTU allows: taken, freed,
    counted in oerrors -- never sent, never truncated; the good frames around them go out."""
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
        peer = RawPeer("veth1")
    try:
        good = frames([60, 1514, 100], seed=12)
        tagged = vlan_tag(frames([1514], seed=13)[0], 5)      # 1518: allowed with a tag
        empty = pool.alloc().handle
        runt = make_packet(pool, good[0][:13])
        big = make_packet(pool, frames([1515], seed=14)[0])
        hs = [make_packet(pool, good[0]), empty, runt, make_packet(pool, good[1]), big,
              make_packet(pool, tagged), make_packet(pool, good[2])]
        assert a.tx_burst(hs) == len(hs)
        got = peer.recv(4)
        peer.send([MARK])
        assert got == [good[0], good[1], tagged, good[2]]
        s, x = a.stats(), a.xstats()
        assert s["opackets"] == 4 and s["oerrors"] == 3
        assert x["tx_runt_errors"] == 2 and x["tx_too_long_errors"] == 1
    finally:
        a.close()
        peer.close()
    assert pool.avail_count == pool.n


def test_mtu_change_followed(ns, pool):
    with ns.entered():
        a = AfPacketPort(pool, "veth0", framesz=4096, blocksz=16384)
        peer = RawPeer("veth1")
    try:
        ns.run("ip", "link", "set", "veth0", "mtu", "1000")
        assert a.mtu == 1000
        f = frames([1014, 1015], seed=15)
        assert send_all(a, pool, f) == 2
        assert peer.recv(1) == [f[0]]
        assert a.stats()["oerrors"] == 1
    finally:
        a.close()
        peer.close()


def test_jumbo_pktbuf_to_pktbuf():
    """MTU 9000 on both ends: frames up to 9014 bytes cross whole, received as chains of
    2048-byte mbufs, sent from chains too."""
    import pktbuf
    from ..netns import Netns
    from .conftest import _need_root
    _need_root()
    pool = pktbuf.PktmbufPool(8192, 64)
    with Netns() as ns:
        ns.veth(mtu=9000)
        with ns.entered():
            a = AfPacketPort(pool, "veth0")
            b = AfPacketPort(pool, "veth1", port_id=1)
        try:
            assert a.mtu == 9000 and a.info()["framesz"] >= 9018 + 48
            want = frames([60, 1514, 1515, 2048, 4000, 8000, 9014] * 10, seed=16)
            assert send_all(a, pool, want, seg=1000) == len(want)
            got = receive(b, pool, len(want), info=True)
            assert [g[0] for g in got] == want
            assert [g[1] for g in got] == [-(-len(w) // 2048) for w in want]
        finally:
            a.close()
            b.close()
    assert pool.avail_count == pool.n
    pool.close()


# -- link down ----------------------------------------------------------------------------------
def test_link_down_mid_traffic(ns, pool):
    """Taking the interface down while a sender runs: link() says DOWN, Tx stops taking
    packets once the ring is full (the caller keeps them), the kick errors are counted,
    nothing raises; once the link is back the frames held in the ring go out first; every
    mbuf is back after close."""
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
        b = AfPacketPort(pool, "veth1", port_id=1)
    try:
        f = frames([1000] * 64, seed=17)
        stop = threading.Event()
        counts = {"taken": 0}

        def sender():
            while not stop.is_set():
                counts["taken"] += send_all(a, pool, f, timeout=0.05)

        t = threading.Thread(target=sender)
        t.start()
        assert len(receive(b, pool, 200)) >= 200
        ns.set_link("veth0", False)
        time.sleep(0.5)
        assert a.link()["status"] == "DOWN"
        taken = counts["taken"]
        time.sleep(0.3)
        assert counts["taken"] == taken                # ring full: nothing more is taken
        stop.set()
        t.join()
        x = a.xstats()
        assert x["tx_kick_errors"] > 0 and x["tx_kick_last_errno"] == 100   # ENETDOWN
        assert a.rx_wait(0, 10) in (0, -100)
        receive(b, pool, 1 << 30, timeout=0.5)          # whatever left before the link fell
        ns.set_link("veth0", True)
        assert a.link()["status"] == "UP"
        # the next burst kicks the full ring: the frames held in it go out, then ours
        assert send_all(a, pool, [MARK], timeout=10) == 1
        late = receive(b, pool, 1 << 30, until=_is_mark)
        assert late[-1] == MARK and len(late) > 1
        assert set(late[:-1]) <= set(f)
    finally:
        a.close()
        b.close()
    assert pool.avail_count == pool.n


# -- fanout -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["hash", "lb", "cpu"])
def test_fanout_every_frame_once(ns, pool, mode):
    """Four queues of one port in one fanout group (and, for lb, a second port joining the same
    group by id): every frame the peer sends is received exactly once over all of them."""
    with ns.entered():
        a = AfPacketPort(pool, "veth0", qpairs=4, fanout_mode=mode)
        extra = (AfPacketPort(pool, "veth0", fanout_mode=mode, fanout_id=a.fanout_id,
                              port_id=1) if mode == "lb" else None)
        peer = RawPeer("veth1")
    try:
        # distinct flows (IPv4 source address and port) so the hash spreads them
        want = [udp_frame(i, 60 + i % 200) for i in range(400)]
        peer.send(want)
        queues = [(a, q) for q in range(4)] + ([(extra, 0)] if extra else [])
        got = []
        per = []
        end = time.monotonic() + 10
        while len(got) < len(want) and time.monotonic() < end:
            for p, q in queues:
                r = receive(p, pool, 1 << 30, queue=q, timeout=0.05)
                got += r
        for p, q in queues:
            per.append(p.stats()["q_ipackets"][q])
        assert sorted(got) == sorted(want)
        assert len(got) == len(set(got)) == len(want)
        if mode == "lb":
            assert all(c > 0 for c in per), per
        if mode == "hash":
            assert sum(c > 0 for c in per) >= 2, per
    finally:
        a.close()
        if extra:
            extra.close()
        peer.close()
    assert pool.avail_count == pool.n


# -- statistics ---------------------------------------------------------------------------------
def test_imissed_from_packet_statistics(ns, pool):
    """A ring nobody reads fills up: the kernel's drops show as imissed, and what was received
    plus what was missed is what was sent."""
    with ns.entered():
        a = AfPacketPort(pool, "veth0", blocksz=4096, framesz=2048, framecnt=8)   # 4 blocks
        peer = RawPeer("veth1")
    try:
        want = frames([1000] * 200, seed=18)
        peer.send(want)
        time.sleep(0.3)
        got = receive(a, pool, 1 << 30, timeout=1.0)
        s = a.stats()
        assert 0 < len(got) < 200 and s["ipackets"] == len(got)
        assert s["ipackets"] + s["imissed"] == 200
        a.stats_reset()
        assert a.stats()["imissed"] == 0
    finally:
        a.close()
        peer.close()


def test_ports_table_dispatch(ns, pool):
    """Through the port table: device strings with DPDK's arguments, and the dispatching
    rx_burst/tx_burst kernels in compiled code echoing what a peer sends."""
    from numba import njit
    from pktbuf.kernels import rx_burst, tx_burst

    @njit
    def echo(eth, rounds):
        pk = np.empty(32, np.int32)
        moved = 0
        for _ in range(rounds):
            n = rx_burst(eth, 0, 0, 0, pk, 32)
            k = tx_burst(eth, 0, 0, 0, pk, n)
            moved += k
            if k < n:
                return -1
        return moved

    ports = Ports(pool)
    with ns.entered():
        a = ports.open("net_af_packet0,iface=veth0,qpairs=1,blocksz=8192,framesz=2048,"
                       "framecnt=64,qdisc_bypass=0")
        b = ports.open("eth_af_packet1,iface=veth1")
        peer = RawPeer("veth1")
    try:
        assert (a.port_id, b.port_id) == (0, 1) and a.info()["blocksz"] == 8192
        want = frames([60, 1514] * 20, seed=19)
        peer.send(want)                       # veth1 -> veth0: port 0 echoes them back
        moved = 0
        end = time.monotonic() + 10
        while moved < len(want) and time.monotonic() < end:
            r = echo(ports.state, 100)
            assert r >= 0
            moved += r
        assert moved == len(want)
        assert peer.recv(len(want)) == want
        # port 1 (veth1) saw the echoes arrive, not the peer's own sends on its interface
        assert receive(b, pool, len(want)) == want
        peer.send([MARK])
        assert receive(b, pool, 10, timeout=1.0) == []
    finally:
        ports.close()
        peer.close()
    assert pool.avail_count == pool.n
