"""``pktbuf fwd --workers N --distributor``: one Rx/Tx process, worker processes fed by the
software distributor over a capture file (one queue), every packet once, flows placed as the
RSS model says, a worker killed mid-traffic."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

import pktbuf
from pktbuf.net.distrib import naive as dnaive
from pktbuf.net.rss.thash import DEFAULT_RSS_KEY, SYMMETRIC_RSS_KEY

from ..distrib.test_distributor import flow_frame, model_hash
from ..pcap import naive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLOWS = 40


def frames(n, both_directions=False):
    out = []
    for seq in range(n):
        f = bytearray(flow_frame(seq % FLOWS, reverse=both_directions and seq % 2 == 1))
        f[42:46] = seq.to_bytes(4, "big")
        out.append(bytes(f))
    return out


def write_input(path, fr):
    path.write_bytes(naive.write_pcap([(1_000_000 * i, f) for i, f in enumerate(fr)]))


def run(args, timeout=300):
    return subprocess.run([sys.executable, "-m", "pktbuf.cli", "fwd", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def events(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


def expected_per_worker(fr, workers, key):
    reta = pktbuf.Rss(queues=workers, symmetric=key == SYMMETRIC_RSS_KEY).reta
    return Counter(dnaive.worker_of(model_hash(f, key), reta) for f in fr)


def swap(f: bytes) -> bytes:
    return f[6:12] + f[0:6] + f[12:]


@pytest.mark.parametrize("symmetric,busy", [(False, False), (True, False), (False, True)])
def test_every_packet_once_and_flows_placed_by_rss(tmp_path, symmetric, busy):
    fr = frames(6000, both_directions=symmetric)
    write_input(tmp_path / "in.pcap", fr)
    args = ["--workers", "2", "--distributor", "--forward-mode", "macswap", "--json",
            "--no-telemetry", "--dist-ring-size", "64", "--vdev",
            f"net_pcap0,rx_pcap={tmp_path}/in.pcap,tx_pcap={tmp_path}/out.pcap"]
    r = run(args + (["--symmetric"] if symmetric else [])
            + (["--no-idle-backoff"] if busy else []))       # every process polls without pause
    assert r.returncode == 0, r.stdout + r.stderr
    ev = events(r.stdout)
    assert ev[0]["event"] == "start" and ev[0]["idle_backoff"] is not busy
    summary = ev[-1]
    assert summary["event"] == "summary" and summary["stopped_by"] == "eof"
    assert summary["mbufs_in_use_at_close"] == 0 and summary["unrouted"] == 0
    key = SYMMETRIC_RSS_KEY if symmetric else DEFAULT_RSS_KEY
    want = expected_per_worker(fr, 2, key)
    got = {w["worker"]: w["rx"] for w in summary["workers"]}
    assert got == {0: want[0], 1: want[1]} and want[0] and want[1]
    assert all(w["tx"] == w["rx"] and w["state"] == "done" for w in summary["workers"])
    if symmetric:             # both directions of every flow: one worker
        reta = pktbuf.Rss(queues=2, symmetric=True).reta
        for f in range(FLOWS):
            a, b = (dnaive.worker_of(model_hash(flow_frame(f, rev), key), reta)
                    for rev in (False, True))
            assert a == b
    out = [p[1] for p in naive.read_pcap((tmp_path / "out.pcap").read_bytes())]
    assert sorted(out) == sorted(swap(f) for f in fr)          # every packet, once
    seqs: dict[int, list[int]] = {}
    for f in out:
        seq = int.from_bytes(f[42:46], "big")
        seqs.setdefault(seq % FLOWS, []).append(seq)
    assert all(s == sorted(s) for s in seqs.values())          # each flow in order


def test_killed_worker_is_counted_and_the_other_goes_on(tmp_path):
    fr = frames(4000)
    write_input(tmp_path / "in.pcap", fr)
    p = subprocess.Popen([sys.executable, "-m", "pktbuf.cli", "fwd", "--workers", "2",
                          "--distributor", "--forward-mode", "io", "--json", "--no-telemetry",
                          "--stats-period", "0.2", "--vdev",
                          f"net_pcap0,rx_pcap={tmp_path}/in.pcap,infinite_rx=1,"
                          f"tx_pcap=/dev/null"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        def wait(pred, timeout=120.0):
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                line = p.stdout.readline()
                if not line:
                    break
                if line.startswith("{"):
                    e = json.loads(line)
                    seen.append(e)
                    if pred(e):
                        return e
            raise AssertionError(f"not seen; last events {seen[-3:]}; rc {p.poll()}")
        start = wait(lambda e: e["event"] == "start")
        wait(lambda e: e["event"] == "stats" and all(w["rx"] > 0 for w in e["workers"]))
        os.kill(start["worker_pids"][1], signal.SIGKILL)
        died = wait(lambda e: e["event"] == "worker_died")
        assert died["worker"] == 1 and died["exitcode"] == -signal.SIGKILL
        assert 0 <= died["lost_in_hand"] <= 32                 # at most one burst
        after = wait(lambda e: e["event"] == "stats")
        later = wait(lambda e: e["event"] == "stats" and e["workers"][0]["rx"]
                     > after["workers"][0]["rx"] + 1000)      # worker 0 goes on
        assert later["workers"][1]["state"] == "died"
        p.send_signal(signal.SIGINT)
        summary = wait(lambda e: e["event"] == "summary")
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1                                   # a worker died: not clean
    assert summary["lost_with_dead_workers"] == died["lost_in_hand"]
    assert summary["mbufs_in_use_at_close"] == died["lost_in_hand"]  # nothing else lost
    w0 = summary["workers"][0]
    assert w0["state"] == "done" and w0["tx"] == w0["rx"] and w0["in_hand"] == 0


def test_cli_refusals(tmp_path):
    r = run(["--distributor", "--vdev", "net_ring0"])
    assert r.returncode == 2 and "--workers" in r.stderr
    r = run(["--workers", "2", "--distributor", "--forward-mode", "txonly", "--vdev",
             "net_ring0", "--seconds", "1", "--no-telemetry"])
    assert r.returncode == 1 and "io, mac, macswap, rxonly" in r.stderr
    r = run(["--workers", "2", "--distributor", "--dist-ring-size", "1000", "--vdev",
             "net_ring0", "--seconds", "1", "--no-telemetry"])
    assert r.returncode == 1 and "power of two" in r.stderr


def test_workers_stop_when_the_rx_tx_process_is_killed(tmp_path):
    """kill -9 of the Rx/Tx process: its workers notice (they are reparented) and exit."""
    write_input(tmp_path / "in.pcap", frames(500))
    p = subprocess.Popen([sys.executable, "-m", "pktbuf.cli", "fwd", "--workers", "2",
                          "--distributor", "--json", "--no-telemetry", "--vdev",
                          f"net_pcap0,rx_pcap={tmp_path}/in.pcap,infinite_rx=1,"
                          f"tx_pcap=/dev/null"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        start = json.loads(p.stdout.readline())
        assert start["event"] == "start", start
        pids = start["worker_pids"]
        assert all(_alive(x) for x in pids)
        p.kill()
        p.wait()
        end = time.monotonic() + 30
        while any(_alive(x) for x in pids) and time.monotonic() < end:
            time.sleep(0.05)
        assert not any(_alive(x) for x in pids), "workers outlived their Rx/Tx process"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
