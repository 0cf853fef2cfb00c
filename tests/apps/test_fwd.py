"""``pktbuf fwd``: every forwarding mode over ring ports, the statistics, the stop conditions."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import pktbuf
from pktbuf.drivers.ring.api import RingPort
from pktbuf.apps.fwd.forwarder import Forwarder
from pktbuf.apps.fwd.main import main
from pktbuf.apps.fwd.loop import F_RX
from pktbuf.apps.txonly import udp_headers


def wired(rx, tx):
    return lambda pool, pid: RingPort([rx], [tx], pool=pool, port_id=pid)


def frames(n):
    rng = np.random.default_rng(n)
    out = []
    for i in range(n):
        size = int(rng.integers(60, 1515))
        f = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        f[0:12] = bytes([0x02, 0, 0, 0, 0, 0xAA, 0x02, 0, 0, 0, 0, 0xBB])
        out.append(bytes(f))
    return out


def inject(fw, ring, payloads):
    """Put packets into a ring as a peer would: mbufs of the forwarder's pool."""
    hs = []
    for p in payloads:
        m = fw.pool.alloc()
        m.append_bytes(p)
        hs.append(m.handle)
    assert ring.enqueue_burst(np.array(hs, np.int32)) == len(hs)


def drain(fw, ring):
    out = []
    while True:
        h = ring.dequeue_burst(256)
        if h.size == 0:
            return out
        for x in h:
            m = pktbuf.Mbuf(fw.pool.domain, int(x))
            out.append(bytes(m.read(0, m.pkt_len)))
        fw.pool.domain.free_bulk(h)


def run(fw, rounds=20):
    for _ in range(rounds):
        fw.run_slice(0.01)


@pytest.mark.parametrize("mode", ["io", "mac", "macswap"])
def test_forwarding_modes_two_ports(mode):
    in0, out0, in1, out1 = (pktbuf.Ring(1024) for _ in range(4))
    fw = Forwarder([wired(in0, out0), wired(in1, out1)], mode, nb_mbufs=4096)
    try:
        a, b = frames(300), frames(200)
        inject(fw, in0, a)
        inject(fw, in1, b)
        run(fw)
        got1, got0 = drain(fw, out1), drain(fw, out0)    # port 0 -> port 1 and back
        m0, m1 = bytes(fw.macs[0]), bytes(fw.macs[1])
        if mode == "io":
            assert got1 == a and got0 == b
        elif mode == "macswap":
            assert got1 == [f[6:12] + f[0:6] + f[12:] for f in a]
            assert got0 == [f[6:12] + f[0:6] + f[12:] for f in b]
        else:                                             # dst = peer of the Tx port, src = its MAC
            assert got1 == [bytes([2, 0, 0, 0, 0, 1]) + m1 + f[12:] for f in a]
            assert got0 == [bytes([2, 0, 0, 0, 0, 0]) + m0 + f[12:] for f in b]
        rows = {r["port_id"]: r for r in fw.rows()}
        assert rows[0]["rx"] == 300 and rows[1]["tx"] == 300
        assert rows[1]["rx"] == 200 and rows[0]["tx"] == 200
        assert rows[0]["rx_bytes"] == sum(map(len, a)) == rows[1]["tx_bytes"]
        assert rows[1]["stats"]["opackets"] == 300 and rows[0]["stats"]["ipackets"] == 300
    finally:
        assert fw.close() == 0


def test_single_port_io_sends_back_out_of_port_0():
    rx, tx = pktbuf.Ring(1024), pktbuf.Ring(1024)
    fw = Forwarder([wired(rx, tx)], "io", nb_mbufs=2048)
    try:
        assert fw.streams.tolist() == [[0, 0]]
        a = frames(100)
        inject(fw, rx, a)
        run(fw)
        assert drain(fw, tx) == a
    finally:
        assert fw.close() == 0


def test_tx_drops_are_freed_and_counted():
    rx, tx = pktbuf.Ring(1024), pktbuf.Ring(64)
    fw = Forwarder([wired(rx, tx)], "io", nb_mbufs=2048)
    try:
        inject(fw, rx, frames(500))
        run(fw)
        row = fw.rows()[0]
        assert row["tx"] == 64 and row["tx_dropped"] == 436 and row["rx"] == 500
        assert fw.pool.in_use_count == 64                 # only what sits in the Tx ring
        drain(fw, tx)
    finally:
        assert fw.close() == 0


def test_rxonly_frees_and_txonly_builds_testpmd_frames():
    rx, tx = pktbuf.Ring(1024), pktbuf.Ring(1024)
    fw = Forwarder([wired(rx, tx)], "rxonly", nb_mbufs=2048)
    try:
        inject(fw, rx, frames(300))
        run(fw)
        assert fw.rows()[0]["rx"] == 300 and fw.pool.in_use_count == 0
    finally:
        assert fw.close() == 0
    fw = Forwarder([wired(rx, tx)], "txonly", nb_mbufs=4096, txpkts=100)
    try:
        fw.run_slice(0.01)
        got = drain(fw, tx)
        assert len(got) >= 1
        hdr = udp_headers(100, bytes(fw.macs[0]), bytes([2, 0, 0, 0, 0, 0])).tobytes()
        assert all(len(f) == 100 and f[:42] == hdr for f in got)
    finally:
        assert fw.close() == 0


def test_bad_arguments_are_refused_without_leaks():
    for kw in ({"mode": "nosuch"}, {"burst": 0}, {"txpkts": 20}):
        with pytest.raises(pktbuf.InvalidArgument):
            Forwarder(["net_ring0"], **kw)
    assert main(["--vdev", "net_ring0,bogus=1", "--seconds", "1"]) == 1
    assert main(["--vdev", "net_nosuch0", "--seconds", "1"]) == 1


def _cli(args, **kw):
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-m", "pktbuf.cli", "fwd"] + args, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_cli_seconds_json_summary():
    p = _cli(["--vdev", "net_ring0", "--vdev", "net_ring1", "--forward-mode", "txonly",
              "--seconds", "1", "--stats-period", "0.3", "--json", "--no-telemetry"])
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "summary"
    assert lines[0]["idle_backoff"] is True
    assert sum(1 for x in lines if x["event"] == "stats") >= 2
    s = lines[-1]
    assert s["stopped_by"] == "seconds" and s["mbufs_in_use_at_close"] == 0
    assert all(r["tx"] > 0 for r in s["ports"])


def test_cli_stops_on_ctrl_c_with_testpmd_summary():
    p = _cli(["--vdev", "net_ring0", "--forward-mode", "txonly", "--stats-period", "0.2",
              "--no-telemetry"])
    try:
        first = p.stdout.readline()                       # printed once the loop is compiled
        assert first.startswith("pktbuf fwd: 1 port(s)")
        while "Port statistics" not in p.stdout.readline():
            pass
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "Stopping (signal)" in out
    assert "Forward statistics for port 0" in out and "Accumulated forward statistics" in out
    assert "Done." in out and "not returned" not in out


def test_cli_stops_on_sigint_even_when_started_with_it_ignored():
    """A background job of a non-interactive shell starts with SIGINT ignored; pktbuf fwd
    installs its own handler (as testpmd does), so SIGINT still stops it cleanly."""
    p = _cli(["--vdev", "net_ring0", "--forward-mode", "txonly", "--stats-period", "0.2",
              "--no-telemetry"], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert p.stdout.readline().startswith("pktbuf fwd: 1 port(s)")
        while "Port statistics" not in p.stdout.readline():
            pass
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert "Stopping (signal)" in out and "Done." in out


def test_cli_serves_telemetry_to_dpdk_telemetry_py():
    """A running ``pktbuf fwd`` answers the real dpdk-telemetry.py at its --file-prefix."""
    import shutil
    tool = shutil.which("dpdk-telemetry.py")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("dpdk-telemetry.py is not installed (apt-get install dpdk-dev)",
                        pytrace=False)
        pytest.skip("dpdk-telemetry.py is not installed")
    prefix = f"pktbuf_fwdtel{os.getpid()}"
    p = _cli(["--vdev", "net_ring0", "--vdev", "net_ring1", "--forward-mode", "txonly",
              "--file-prefix", prefix, "--json"])
    try:
        assert json.loads(p.stdout.readline())["event"] == "start"
        cmds = ["/ethdev/list", "/ethdev/stats,1", "/ethdev/info,0", "/mempool/list",
                "/ethdev/link_status,0"]
        r = subprocess.run(["python3", tool, "-f", prefix], input="\n".join(cmds) + "\n",
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        got = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
        assert got[0] == {"/ethdev/list": [0, 1]}
        assert got[1]["/ethdev/stats"]["opackets"] > 0
        assert got[2]["/ethdev/info"]["name"] == "net_ring0"
        assert got[3]["/mempool/list"] == ["fwd"]
        assert got[4]["/ethdev/link_status"]["status"] == "UP"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["mbufs_in_use_at_close"] == 0
    assert not os.path.exists(f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2")
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)


def test_record_core_cycles_counts_busy_iterations_only():
    rx, tx = pktbuf.Ring(4096), pktbuf.Ring(1024)
    for record in (False, True):
        fw = Forwarder([wired(rx, tx)], "rxonly", nb_mbufs=4096, record_cycles=record)
        try:
            run(fw, 5)                                  # idle: nothing counted
            assert fw.rows()[0]["busy_cycles"] == 0
            inject(fw, rx, frames(2000))
            run(fw, 5)
            row = fw.rows()[0]
            assert row["rx"] == 2000
            if record:
                assert 0 < row["busy_cycles"] / row["rx"] < 1e6
            else:
                assert row["busy_cycles"] == 0
        finally:
            assert fw.close() == 0


@pytest.mark.parametrize("two_ports", [False, True])
def test_cli_replays_a_capture_until_its_end(tmp_path, two_ports):
    """io forwarding from a capture file into another: stops by itself at the end of the
    input, every frame written once, in order, byte for byte."""
    src, dst = tmp_path / "in.pcap", tmp_path / "out.pcap"
    a = frames(700)
    with pktbuf.PcapWriter(str(src), nano=True) as w:
        for i, f in enumerate(a):
            w.writepkt_ns(f, 1_700_000_000_000_000_000 + 1000 * i)
    vdevs = (["--vdev", f"net_pcap0,rx_pcap={src}", "--vdev", f"net_pcap1,tx_pcap={dst}"]
             if two_ports else ["--vdev", f"net_pcap0,rx_pcap={src},tx_pcap={dst}"])
    p = _cli(vdevs + ["--json", "--no-telemetry"])
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    s = json.loads(out.splitlines()[-1])
    assert s["stopped_by"] == "eof" and s["mbufs_in_use_at_close"] == 0
    assert s["accumulated"]["rx"] == s["accumulated"]["tx"] == len(a)
    got = [(ts, f) for ts, f in pktbuf.PcapReader(str(dst))]
    assert [f for _, f in got] == a


def test_telemetry_that_cannot_start_is_reported_and_forwarding_goes_on(capsys):
    """A file prefix whose socket path is too long for AF_UNIX: a clear message, and the
    forwarder runs anyway (DPDK's EAL would refuse to start; a forwarder need not)."""
    import shutil
    prefix = f"pktbuf_fwdlong{os.getpid()}_" + "p" * 100
    try:
        rc = main(["--vdev", "net_ring0", "--forward-mode", "txonly", "--seconds", "0.3",
                   "--json", "--file-prefix", prefix])
    finally:
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)   # EAL's directory
    out, err = capsys.readouterr()
    assert rc == 0
    assert "no telemetry" in err
    assert json.loads(out.splitlines()[-1])["stopped_by"] == "seconds"


def _idle_cpu(idle_backoff: bool, seconds: float = 1.0) -> tuple[float, int]:
    """CPU time this thread spends forwarding nothing for ``seconds``, and the packets that
    still went through (a few injected first)."""
    import time
    rx, tx = pktbuf.Ring(1024), pktbuf.Ring(1024)
    fw = Forwarder([wired(rx, tx)], "io", nb_mbufs=1024, idle_backoff=idle_backoff)
    try:
        fw.warm()
        a = frames(10)
        inject(fw, rx, a)
        t = time.thread_time()
        fw.run_slice(seconds)
        cpu = time.thread_time() - t
        assert drain(fw, tx) == a
        return cpu, int(fw.cnt[0, F_RX])
    finally:
        assert fw.close() == 0


def test_idle_backoff_sleeps_and_no_idle_backoff_keeps_polling():
    backoff, n1 = _idle_cpu(True)
    busy, n2 = _idle_cpu(False)
    assert n1 == n2 == 10
    # backing off: about a thousand short wake-ups a second; busy polling: the whole second
    assert backoff < 0.25, backoff
    assert busy > 0.5 and busy > 3 * backoff, (busy, backoff)


def test_cli_no_idle_backoff():
    p = _cli(["--vdev", "net_ring0", "--forward-mode", "io", "--seconds", "0.5", "--json",
              "--no-telemetry", "--no-idle-backoff"])
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    ev = [json.loads(x) for x in out.splitlines()]
    assert ev[0]["event"] == "start" and ev[0]["idle_backoff"] is False
    s = ev[-1]
    assert s["stopped_by"] == "seconds" and s["mbufs_in_use_at_close"] == 0
