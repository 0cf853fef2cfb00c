"""Interop with the real peer: DPDK 22.11 dpdk-testpmd's net_memif, both roles, both modes.

One testpmd per test class (starting one takes seconds); forwarding is started per test and
always stopped before anything disconnects (DPDK 22.11 can crash when its peer vanishes
mid-traffic).  Every testpmd runs under ``timeout`` and is stopped by its PID.
In CI these tests must run: ``.ci/run`` installs dpdk-dev; without it they fail there.
"""
import os
import time

import numpy as np
import pytest

from pktbuf import Memif
from pktbuf.apps import testpmd as T

from .helpers import exchange, make_packet, payloads, sock_name, wait_for

if not T.available():
    if os.environ.get("CI"):
        pytest.fail("dpdk-testpmd is not installed (apt-get install dpdk-dev)", pytrace=False)
    pytest.skip("dpdk-testpmd is not installed", allow_module_level=True)

SMALL = [60, 64, 65, 128, 512, 1000, 1500, 1514, 2048]
CHAINED = [2049, 3000, 4000, 9000]          # bigger than one 2048-byte memif buffer


def _forward(tp, mode):
    tp.stop_forwarding()
    tp.cmd(f"set fwd {mode}")
    mark = len(tp.log())
    tp.cmd("start")
    assert tp.wait_log(r"packet forwarding - ports=", 10, since=mark), tp.log()[-2000:]


def _echo(m, pool, pays, segs=None, timeout=20):
    """Send pays through ``m`` and collect as many echoed packets (bytes) in order."""
    got, _ = exchange(m, m, pool, pays, segs, timeout)
    return [g[0] for g in got]


def _rxonly_counts(m, pool, tp, sizes, seg=None):
    """Send packets of ``sizes`` to testpmd in rxonly mode: its RX-packets grows by exactly
    as many."""
    _forward(tp, "rxonly")
    try:
        before = tp.port_stats()["rx_packets"]
        hs = np.array([make_packet(pool, p, seg) for p in payloads(sizes)], np.int32)
        sent = 0
        end = time.monotonic() + 10
        while sent < hs.size and time.monotonic() < end:
            sent += m.tx_burst(hs[sent:])
        assert sent == hs.size
        assert wait_for(lambda: tp.port_stats().get("rx_packets", 0) - before == len(sizes), 10)
    finally:
        tp.stop_forwarding()


def _macswap(p):
    return p[6:12] + p[0:6] + p[12:]


def _check_echo(m, pool, tp, mode="io", n_rounds=40):
    _forward(tp, mode)
    try:
        pays = payloads(SMALL * n_rounds, seed=11) + payloads(CHAINED * 10, seed=12)
        segs = [None] * (len(SMALL) * n_rounds) + [1024, 1500, 2000, 2048] * 10
        got = _echo(m, pool, pays, segs)
        want = pays if mode == "io" else [_macswap(p) for p in pays]
        assert len(got) == len(want), (len(got), len(want), tp.port_stats())
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, f"{len(bad)} packets differ, first at {bad[0]}"
    finally:
        tp.stop_forwarding()


# -- pktbuf client <-> testpmd server ----------------------------------------------------------
class TestPktbufClient:
    @pytest.fixture(scope="class")
    @classmethod
    def peer(cls, warm):
        import pktbuf
        pool = pktbuf.PktmbufPool(8192, name="tp-client")
        name = sock_name("tpsrv")
        tp = T.Testpmd("server", name, fwd="io").start()
        m = None
        try:
            assert tp.wait_listening(60), tp.log()[-3000:]
            m = Memif.client(name, pool=pool, id=0)
            assert m.wait_connected(30), m.disconnect_reason
            assert tp.wait_log(r"memif_connect\(\): Connected", 10)
            yield m, pool, tp
        finally:
            tp.stop_forwarding()
            if m is not None:
                m.close()
            assert tp.wait_log(r"Disconnect received: Device closed", 10) or not tp.alive()
            tp.cleanup()
            assert not tp.alive()
            pool.close(force=True)

    def test_connected(self, peer):
        m, pool, tp = peer
        assert m.state == "connected"
        assert m.peer_name.startswith(b"DPDK 22.11")

    def test_echo_io_byte_exact(self, peer):
        _check_echo(*peer, mode="io")

    def test_echo_macswap(self, peer):
        _check_echo(*peer, mode="macswap")

    def test_dpdk_polls_so_we_never_signal(self, peer):
        m, pool, tp = peer
        _check_echo(m, pool, tp, mode="io", n_rounds=2)
        assert m.stats()["kicks"] == 0       # testpmd set MASK_INT on C2S: no eventfd writes

    def test_rxonly_counts_every_packet(self, peer):
        _rxonly_counts(*peer, [64] * 1000 + [3000] * 50)


# -- testpmd client <-> pktbuf server ----------------------------------------------------------
def _server_fixture(zero_copy):
    import pktbuf
    pool = pktbuf.PktmbufPool(8192, name="tp-server")
    name = sock_name("tpcli")
    m = Memif.server(name, pool=pool, id=0, allow_unsealed=zero_copy)
    tp = T.Testpmd("client", name, fwd="io",
                   vdev_extra="zero-copy=yes" if zero_copy else "",
                   eal_extra=["--single-file-segments"] if zero_copy else []).start()
    return pool, m, tp


class _ServerRole:
    zero_copy = False

    @pytest.fixture(scope="class")
    @classmethod
    def peer(cls, warm):
        pool, m, tp = _server_fixture(cls.zero_copy)
        try:
            assert m.wait_connected(60), (m.disconnect_reason, tp.log()[-3000:])
            assert tp.wait_log(r"memif_connect\(\): Connected", 10)
            yield m, pool, tp
        finally:
            tp.stop_forwarding()
            tp.close()          # testpmd quits: it just closes the socket
            assert wait_for(lambda: m.state == "listening", 10)
            assert m.disconnect_reason == "Peer closed the connection"
            m.close()
            tp.cleanup()
            assert not tp.alive()
            pool.close(force=True)

    def test_echo_io_byte_exact(self, peer):
        _check_echo(*peer, mode="io")

    def test_echo_macswap(self, peer):
        _check_echo(*peer, mode="macswap", n_rounds=10)

    def test_txonly_from_testpmd(self, peer):
        m, pool, tp = peer
        _forward(tp, "txonly")
        got = 0
        ok = 0
        try:
            end = time.monotonic() + 5
            while got < 20000 and time.monotonic() < end:
                for h in m.rx_burst(32):
                    b = pool.mbuf(h).tobytes()
                    # testpmd txonly: 64-byte IPv4/UDP frames
                    ok += len(b) == 64 and b[12:14] == b"\x08\x00" and b[23] == 17
                    got += 1
                    pool.free_bulk([h])
        finally:
            tp.stop_forwarding()
        time.sleep(0.2)
        for h in m.rx_burst(1024):      # drain what was in flight
            pool.free_bulk([h])
        assert got >= 20000 and ok == got

    def test_rxonly_counts_every_packet(self, peer):
        _rxonly_counts(*peer, [64] * 500 + [5000] * 20, seg=1000)


class TestPktbufServerCopy(_ServerRole):
    zero_copy = False


class TestPktbufServerDpdkZeroCopy(_ServerRole):
    zero_copy = True

    def test_zero_copy_descriptors_point_into_region_1(self, peer):
        m, pool, tp = peer
        assert len(m.device.regions) >= 2       # region 0: rings, 1..: DPDK's EAL memory
        _check_echo(m, pool, tp, mode="io", n_rounds=5)


def test_unsealed_zero_copy_region_is_refused_by_default(warm):
    import pktbuf
    pool = pktbuf.PktmbufPool(1024, name="tp-refuse")
    name = sock_name("tpzc")
    m = Memif.server(name, pool=pool)
    tp = T.Testpmd("client", name, fwd="io", vdev_extra="zero-copy=yes",
                   eal_extra=["--single-file-segments"]).start()
    try:
        assert wait_for(lambda: m.disconnect_reason is not None, 60), tp.log()[-2000:]
        assert m.disconnect_reason == "Region not sealed against shrinking"
        assert tp.wait_log(r"Disconnect received: Region not sealed", 10)
        assert m.state == "listening"
    finally:
        tp.cleanup()
        m.close()
        pool.close(force=True)


def test_dpdk_sender_wakes_interrupt_mode_server(warm):
    """pktbuf server in interrupt mode (MASK_INT clear on C2S): DPDK's copy Tx writes the
    eventfd, and memif_rx_wait sleeps in poll() until it does."""
    import pktbuf
    from pktbuf.drivers.memif.poll import memif_rx_wait
    pool = pktbuf.PktmbufPool(4096, name="tp-irq")
    name = sock_name("tpirq")
    m = Memif.server(name, pool=pool, interrupt=True)
    tp = T.Testpmd("client", name, fwd="io").start()
    try:
        assert m.wait_connected(60), tp.log()[-2000:]
        q = m.rx_queue(0)
        while memif_rx_wait(q, 0, 0):       # drain anything pending
            pass
        assert tp.port_stats()["tx_packets"] == 0
        assert memif_rx_wait(q, 0, 200) == 0        # nothing sent: the wait times out
        assert tp.port_stats()["tx_packets"] == 0   # (and nothing was sent meanwhile)
        _forward(tp, "txonly")
        woke = memif_rx_wait(q, 0, 10_000)
        tp.stop_forwarding()
        assert woke == 1
        got = 0
        end = time.monotonic() + 5
        while time.monotonic() < end:
            r = m.rx_burst(256)
            got += r.size
            pool.free_bulk(r)
            if r.size == 0 and got:
                break
        assert got > 0
    finally:
        tp.stop_forwarding()
        tp.cleanup()
        m.close()
        pool.close(force=True)


def test_pktbuf_zero_copy_client_with_testpmd_server(warm):
    """pktbuf's own zero-copy mode against DPDK: testpmd (server) reads and writes our mbufs
    in place, through the pool regions we announce as regions 1..; every mbuf comes back."""
    import pktbuf
    pool = pktbuf.PktmbufPool(8192, name="tp-zc-client")
    name = sock_name("tpzcsrv")
    tp = T.Testpmd("server", name, fwd="io").start()
    m = None
    try:
        assert tp.wait_listening(60), tp.log()[-2000:]
        m = Memif.client(name, pool=pool, zero_copy=True)
        assert m.wait_connected(30), m.disconnect_reason
        _forward(tp, "io")
        pays = payloads(SMALL * 20 + CHAINED * 10, seed=21)
        got = _echo(m, pool, pays, [None] * (len(SMALL) * 20) + [1024, 1500, 2000, 2048] * 10)
        assert got == pays
    finally:
        tp.stop_forwarding()
        if m is not None:
            m.close()
        tp.cleanup()
    assert pool.avail_count == pool.n
    pool.close()


@pytest.mark.parametrize("how", ["quit", "killed", "eal-fails"])
def test_testpmd_leaves_no_runtime_directory(warm, how):
    """EAL creates /var/run/dpdk/<prefix> (or its user equivalent) and leaves it behind even on
    a clean quit; the driver removes it once the process is gone, however it ended."""
    before = T.own_runtime_dirs()
    # EAL 22.11 refuses --in-memory with --no-huge, after it made the runtime directory
    extra = ["--in-memory"] if how == "eal-fails" else []
    tp = T.Testpmd("server", sock_name("tprt"), fwd="io", eal_extra=extra).start()
    try:
        if how == "eal-fails":
            tp.proc.wait(60)
            assert tp.proc.returncode != 0
        else:
            assert tp.wait_listening(60), tp.log()[-2000:]
        # the directory really is there (so the check below can fail)
        assert os.path.isdir(tp.runtime_dir), (tp.runtime_dir, tp.log()[-1000:])
        if how == "killed":
            os.killpg(tp.proc.pid, 9)
            tp.proc.wait(10)
    finally:
        tp.cleanup()
    assert not tp.alive()
    assert not os.path.exists(tp.runtime_dir)
    assert T.own_runtime_dirs() == before


def test_zz_no_runtime_directories_left_by_this_module():
    """Runs last in this module: every testpmd above has been cleaned up, directories too."""
    assert T.own_runtime_dirs() == []
