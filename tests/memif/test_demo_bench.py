"""The apps and the memif benchmark run end to end (short), with real processes.

What is checked is what the figures rest on: every packet a ring took arrives (conservation),
each run has exactly the samples its schedule asks for, zero samples count, and a testpmd that
cannot run is reported as failed -- "not available" only when it is not installed.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pktbuf.apps import demo, forwarder, testpmd as T, traffic
from pktbuf.apps.txonly import HDR_LEN, udp_headers
from pktbuf.bench import memif as B
from pktbuf.bench import memif_runs as R

SHORT = R.Schedule(warmup=0.3, samples=3, interval=0.3)


@pytest.fixture(scope="module")
def bench_warm(warm):
    B.warm()


@pytest.mark.parametrize("mode", ["l2fwd", "macswap"])
def test_demo_runs_and_checks_macs(warm, capsys, mode):
    assert demo.main(["--mode", mode, "--seconds", "1.5"]) == 0
    out = capsys.readouterr().out
    assert "result: OK" in out and "summary" in out
    line = [x for x in out.splitlines() if x.strip().startswith("received with wrong MACs")][0]
    assert line.split()[-1] == "0"
    back = [x for x in out.splitlines() if x.strip().startswith("received back")][0]
    assert int(back.split()[-3].replace(",", "")) > 0     # packets, pps, "M"


def test_txonly_headers_are_a_valid_udp_frame():
    h = udp_headers(64, bytes([2, 0, 0, 0, 0, 1]), bytes([2, 0, 0, 0, 0, 2])).tobytes()
    assert len(h) == HDR_LEN == 42
    assert h[0:6] == bytes([2, 0, 0, 0, 0, 2]) and h[6:12] == bytes([2, 0, 0, 0, 0, 1])
    assert h[12:14] == b"\x08\x00" and h[14] == 0x45 and h[23] == 17
    assert int.from_bytes(h[16:18], "big") == 64 - 14          # IP total length
    assert int.from_bytes(h[38:40], "big") == 64 - 34          # UDP length
    words = [int.from_bytes(h[i:i + 2], "big") for i in range(14, 34, 2)]
    s = sum(words)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    assert s == 0xFFFF                                         # IP checksum verifies


def test_loopback_moves_every_packet(bench_warm):
    lo = R.Loopback()
    try:
        assert lo.run(64, 50) == 50 * 32
        assert lo.run(1500, 50, direction="s2c") == 50 * 32
        assert lo.s.rx_burst(1).size == 0 and lo.c.rx_burst(1).size == 0   # nothing left
    finally:
        lo.close()


def test_loopback_ratio_reports_both_paths(bench_warm):
    r = B.loopback_ratio(64, "eq", repeat=1, iters=50)
    assert set(r) == {"fast_ns", "general_ns", "ratio"}
    assert r["ratio"] == pytest.approx(r["general_ns"] / r["fast_ns"])
    assert all(np.isfinite(v) and v > 0 for v in r.values())


@pytest.mark.parametrize("case", ["oneway", "roundtrip"])
def test_pktbuf_pair_conserves_packets(bench_warm, case):
    res = R.pktbuf_pair(case, 64, SHORT)
    assert res.ok, res.reason
    assert len(res.pps) == SHORT.samples
    assert res.sent > 0
    assert res.received == res.sent       # every packet the ring took arrived (came back)


def test_zero_samples_count():
    assert R._sample_rates([{"t": 0.0, "rx": 0}, {"t": 0.5, "rx": 0}, {"t": 1.0, "rx": 500}]) \
        == [0.0, 1000.0]
    r = R.PairResult(pps=[0.0, 0.0, 3e6])
    assert r.zero_samples == 2 and r.mpps == 0.0


def test_compare_interleaves_rounds_and_keeps_the_clean_ones(monkeypatch):
    """Rounds alternate the order; a round counts when no polling thread of either run waited
    for its CPU; rounds are added until enough are clean."""
    calls = []
    waits = iter([0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0])   # one per run, in run order

    def fake(who, mpps):
        def run(*a, **k):
            calls.append(who)
            return R.PairResult(pps=[mpps * 1e6] * 3, waited=next(waits))
        return run
    monkeypatch.setattr(B, "pktbuf_pair", fake("pk", 3.0))
    monkeypatch.setattr(B, "testpmd_pair", fake("tp", 2.0))
    c = B.compare(64, rounds=3, sched=SHORT, max_wait=0.1)
    assert calls == ["tp", "pk", "pk", "tp", "tp", "pk", "pk", "tp"]
    assert c["clean"] == [True, False, True, True] and c["ratio"] == pytest.approx(1.5)
    assert c["testpmd_status"] == "ok"


def test_compare_without_a_clean_round_uses_all_and_says_so(monkeypatch):
    monkeypatch.setattr(B, "pktbuf_pair", lambda *a, **k: R.PairResult(pps=[3e6], waited=0.5))
    monkeypatch.setattr(B, "testpmd_pair", lambda *a, **k: R.PairResult(pps=[1e6], waited=0.5))
    c = B.compare(64, rounds=2, sched=SHORT, max_wait=0.1)
    assert c["clean"] == [False] * 6 and c["ratio"] == pytest.approx(3.0)


def test_testpmd_not_installed_is_not_available(monkeypatch):
    monkeypatch.setattr(T, "TESTPMD", "/nonexistent/dpdk-testpmd")
    r = R.testpmd_pair(64, SHORT)
    assert r.status == "not available" and r.mpps is None


def test_testpmd_that_fails_to_start_is_failed(monkeypatch):
    monkeypatch.setattr(T, "TESTPMD", "false")           # installed, exits at once
    before = T.own_runtime_dirs()
    r = R.testpmd_pair(64, SHORT)
    assert r.status == "failed" and "did not start" in r.reason and r.mpps is None
    assert T.own_runtime_dirs() == before


def test_bench_command_reports_a_failed_testpmd(bench_warm, monkeypatch, capsys):
    monkeypatch.setattr(T, "TESTPMD", "false")
    rc = B.main(["--only-compare", "--rounds", "1", "--samples", "2", "--interval", "0.3",
                 "--warmup", "0.3"])
    out = capsys.readouterr().out
    assert rc == 1
    ref = [x for x in out.splitlines() if "testpmd -> testpmd 64 B" in x][0]
    assert "FAILED" in ref and "not available" not in ref
    assert "pktbuf -> pktbuf 64 B" in out


@pytest.mark.skipif(not T.available(), reason="dpdk-testpmd is not installed")
def test_testpmd_pair_measures_on_the_same_schedule(bench_warm):
    before = T.own_runtime_dirs()
    r = R.testpmd_pair(64, SHORT)
    assert r.ok, (r.reason, r.log)
    assert len(r.pps) == SHORT.samples
    assert r.sent > 0 and r.received > 0
    assert T.own_runtime_dirs() == before


def test_example_scripts_forward_between_processes(warm):
    """examples/memif_forwarder.py + examples/memif_traffic.py, started by hand as a user would."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    forwarder.warm()
    traffic.warm()
    tag = f"/pktbuf-ex-{os.getpid()}"
    common = ["--sock0", tag + "-0", "--sock1", tag + "-1", "--mode", "l2fwd"]
    fwd = subprocess.Popen([sys.executable, os.path.join(root, "examples", "memif_forwarder.py")]
                           + common + ["--seconds", "2.5"], stdout=subprocess.PIPE, text=True,
                           env=env)
    try:
        assert fwd.stdout.readline().strip() == "READY"
        gen = subprocess.run([sys.executable, os.path.join(root, "examples", "memif_traffic.py")]
                             + common + ["--seconds", "1.5"], capture_output=True, text=True,
                             env=env, timeout=120)
        out, _ = fwd.communicate(timeout=60)
    finally:
        if fwd.poll() is None:
            fwd.kill()
            fwd.wait()
    assert gen.returncode == 0 and fwd.returncode == 0, gen.stderr
    g = json.loads(gen.stdout.splitlines()[-1])
    f = json.loads(out.splitlines()[-1])
    assert g["final"] and f["final"]
    assert g["rx"] > 0 and g["bad"] == 0
    assert f["rx"] >= g["rx"] and f["tx"] >= g["rx"]
