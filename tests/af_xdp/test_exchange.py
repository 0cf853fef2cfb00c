"""pktbuf AF_XDP <-> pktbuf AF_PACKET over a veth pair, both directions, byte for byte, and
through the port table with a DPDK device string."""
import time

import numpy as np
import pytest

import pktbuf
from pktbuf.drivers.af_packet.api import AfPacketPort
from pktbuf.ethdev.burst import rx_burst, tx_burst

from ..af_packet.helpers import frames, make_packet, receive, send_all
from .helpers import audit_whole, open_port

SIZES = list(range(60, 1515, 37)) + [1514]


def _pair(ns, pool, **kw):
    x = open_port(ns, pool, "veth0", **kw)
    with ns.entered():
        p = AfPacketPort(pool, "veth1")
    return x, p


def test_af_packet_to_af_xdp_byte_exact(ns, pool):
    x, p = _pair(ns, pool)
    try:
        want = frames(SIZES * 3, seed=31)
        assert send_all(p, pool, want) == len(want)
        got = receive(x, pool, len(want), timeout=10)
        assert got == want
        s = x.stats()
        assert s["ipackets"] == len(want) and s["ibytes"] == sum(map(len, want))
        assert s["ierrors"] == s["imissed"] == s["rx_nombuf"] == 0
    finally:
        x.close()
        p.close()
    audit_whole(pool)


def test_rx_mbuf_fields(ns, pool):
    """A received frame is an mbuf of the pool whose data starts after the kernel's 256-byte
    XDP headroom, with data_len = pkt_len = the frame's length and the port id."""
    x, p = _pair(ns, pool)
    try:
        f = frames([123], seed=32)[0]
        assert send_all(p, pool, [f]) == 1
        x.rx_wait(0, 5000)
        hs = x.rx_burst(8)
        assert hs.size == 1
        m = pool.mbuf(int(hs[0]))
        assert pool.owns(int(hs[0]))
        assert m.data_off == 256 and m.data_len == m.pkt_len == 123 and m.nb_segs == 1
        assert m.port == x.port_id and m.tobytes() == f
        m.free()
    finally:
        x.close()
        p.close()
    audit_whole(pool)


def test_af_xdp_to_af_packet_byte_exact_in_place(ns, pool):
    """Mbufs of the UMEM's pool are sent from their own buffers (nothing copied)."""
    x, p = _pair(ns, pool)
    try:
        want = frames(SIZES * 3, seed=33)
        assert send_all(x, pool, want) == len(want)
        got = receive(p, pool, len(want), timeout=10)
        assert got == want
        xs = x.xstats()
        assert xs["tx_copied_packets"] == 0
        assert x.stats()["opackets"] == len(want)
    finally:
        x.close()
        p.close()
    audit_whole(pool)


def test_foreign_chained_and_indirect_mbufs_are_copied(ns, pool):
    """Packets not in the UMEM -- another pool's, chains, indirect clones -- are copied into
    a UMEM frame and the originals freed; both pools audit whole afterwards."""
    other = pktbuf.PktmbufPool(1024, 0, name="afxdp-foreign")
    x, p = _pair(ns, pool)
    try:
        want = frames([60, 300, 1000, 1514] * 6, seed=34)
        hs = []
        direct = []
        for i, f in enumerate(want):
            if i % 3 == 0:
                hs.append(make_packet(other, f))
            elif i % 3 == 1:
                hs.append(make_packet(pool, f, seg=50))           # a chain
            else:
                d = pool.mbuf(make_packet(pool, f))
                hs.append(d.clone(other).handle)                  # indirect
                direct.append(d)
        sent = 0
        a = np.array(hs, np.int32)
        for _ in range(1000):
            sent += x.tx_burst(a[sent:])
            if sent == a.size:
                break
        assert sent == a.size
        for d in direct:
            d.free()
        got = receive(p, pool, len(want), timeout=10)
        assert got == want
        assert x.xstats()["tx_copied_packets"] == len(want)
    finally:
        x.close()
        p.close()
    audit_whole(pool)
    assert other.audit() == other.n
    other.close()


def test_device_string_and_ethdev_bursts(ns, pool):
    """`Ports.open("net_af_xdp0,iface=...")` and the dispatching rx_burst/tx_burst kernels: a
    frame looped veth1 (AF_PACKET) -> veth0 (AF_XDP) -> veth1."""
    ports = pktbuf.Ports(pool)
    with ns.entered():
        x = ports.open("net_af_xdp0,iface=veth0,start_queue=0,queue_count=1,force_copy=1,"
                       "busy_budget=0")
        p = ports.open("net_af_packet0,iface=veth1")
    try:
        assert x.info()["bind_flags"] & 2          # XDP_COPY
        assert x.info()["busy_budget"] == 0
        want = frames([60, 777, 1514] * 10, seed=35)
        assert send_all(p, pool, want) == len(want)
        eth = ports.state
        buf = np.empty(64, np.int32)
        got = 0
        for _ in range(20000):
            n = rx_burst(eth, x.port_id, 0, 0, buf, 64)
            k = 0
            while k < n:
                k += tx_burst(eth, x.port_id, 0, 0, buf[k:n], n - k)
            got += n
            if got == len(want):
                break
            x.rx_wait(0, 10)
        assert got == len(want)
        back = receive(p, pool, len(want), timeout=10)
        assert back == want
    finally:
        ports.close()
    audit_whole(pool)


def test_rx_coalescing(ns, pool):
    """rx_coalesce_us: a short ring is held back until its first frame has waited that long
    (the first burst that sees it always holds it); a ring with rx_batch frames is delivered
    at once."""
    x, p = _pair(ns, pool, rx_coalesce_us=200_000, rx_batch=32)
    try:
        few = frames([70] * 5, seed=36)
        assert send_all(p, pool, few) == 5
        assert x.rx_wait(0, 5000) == 1
        t0 = time.monotonic()
        assert x.rx_burst(32).size == 0                  # first sight: held
        got = []
        while len(got) < 5 and time.monotonic() - t0 < 10:
            got += [int(h) for h in x.rx_burst(32)]
        assert time.monotonic() - t0 >= 0.2
        assert [pool.mbuf(h).tobytes() for h in got] == few
        pool.free_bulk(np.array(got, np.int32))
        many = frames([70] * 40, seed=37)
        assert send_all(p, pool, many) == 40
        end = time.monotonic() + 10
        while x.rx_count() < 40 and time.monotonic() < end:
            time.sleep(0.001)
        hs = x.rx_burst(32)                              # a full batch: no waiting
        assert hs.size == 32
        assert [pool.mbuf(int(h)).tobytes() for h in hs] == many[:32]
        pool.free_bulk(hs)
        assert x.xstats()["rx_bursts"] == 2
    finally:
        x.close()
        p.close()
    audit_whole(pool)


def test_two_queues(pool):
    """queue_count=2 on a two-queue veth: one socket per queue, the program redirects by Rx
    queue index.  A packet socket with PACKET_QDISC_BYPASS sends on the queue of its CPU, and
    veth delivers on the peer's Rx queue of that index: frames sent from CPU 0 arrive on
    queue 0, from CPU 1 on queue 1."""
    import os
    import socket
    import threading

    from ..netns import Netns
    from .conftest import need_root
    need_root()
    if (os.cpu_count() or 1) < 2 or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    with Netns() as ns:
        ns.veth(queues=2)
        x = open_port(ns, pool, queue_count=2)
        try:
            assert x.nb_rx_queues == x.nb_tx_queues == 2
            with ns.entered():
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            s.setsockopt(263, 20, 1)                      # PACKET_QDISC_BYPASS
            s.bind(("veth1", 0))
            sent = {0: frames([80] * 10, seed=38), 1: frames([90] * 10, seed=39)}

            def send_from(cpu):
                os.sched_setaffinity(0, {cpu})
                for f in sent[cpu]:
                    s.send(f)

            for cpu in (0, 1):
                t = threading.Thread(target=send_from, args=(cpu,))
                t.start()
                t.join()
            s.close()
            for q in (0, 1):
                assert receive(x, pool, 10, queue=q, timeout=10) == sent[q]
            assert x.stats()["q_ipackets"] == [10, 10]
            assert send_all(x, pool, sent[0], queue=1) == 10      # Tx on queue 1 too
        finally:
            x.close()
    audit_whole(pool)


def test_without_need_wakeup_or_busy_polling(ns, pool):
    """bind without XDP_USE_NEED_WAKEUP, no busy polling: the Tx kick still goes out (copy
    mode always flags the Tx ring), frames cross both ways."""
    x, p = _pair(ns, pool, need_wakeup=False, busy_budget=0)
    try:
        assert x.info()["bind_flags"] == 0 and x.info()["busy_budget"] == 0
        want = frames([64, 1514] * 8, seed=40)
        assert send_all(x, pool, want) == len(want)
        assert receive(p, pool, len(want), timeout=10) == want
        assert send_all(p, pool, want) == len(want)
        assert receive(x, pool, len(want), timeout=10) == want
    finally:
        x.close()
        p.close()
    audit_whole(pool)
