"""``pktbuf fwd --workers N``: worker processes owning their own queues (AF_PACKET fanout,
AF_XDP one queue each under one shared XDP program, per-worker capture files), telemetry over
the workers, a worker killed mid-traffic."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from pktbuf.apps.fwd.workers import split_vdevs
from pktbuf.errors import InvalidArgument

from ..af_packet.helpers import RawPeer, frames, udp_frame
from ..af_xdp.helpers import need_cpus, send_on_queues, xdp_attached
from ..netns import Netns
from ..pcap import naive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_split_vdevs():
    w = split_vdevs(["net_af_packet0,iface=veth0", "net_pcap1,tx_pcap=/t/o-{worker}.pcap",
                     "net_af_packet2,iface=v2,fanout_id=77,fanout_mode=lb", "net_ring3"], 3,
                    fanout_id=4242)
    assert [x[0] for x in w] == ["net_af_packet0,iface=veth0,fanout_id=4242"] * 3
    assert [x[1] for x in w] == [f"net_pcap1,tx_pcap=/t/o-{i}.pcap" for i in range(3)]
    assert all(x[2] == "net_af_packet2,iface=v2,fanout_id=77,fanout_mode=lb" for x in w)
    assert all(x[3] == "net_ring3" for x in w)
    two = split_vdevs(["net_af_packet0,iface=a", "net_af_packet1,iface=b"], 2, fanout_id=0xFFFF)
    assert two[0] == ["net_af_packet0,iface=a,fanout_id=65535",     # a group is one interface's
                      "net_af_packet1,iface=b,fanout_id=1"]
    x = split_vdevs(["net_af_xdp0,iface=v0,start_queue=2,force_copy=1", "net_ring1"], 2,
                    xsk_maps={0: "123:7"})
    assert [w[0] for w in x] == [f"net_af_xdp0,iface=v0,force_copy=1,start_queue={2 + w},"
                                 "queue_count=1,xsk_map=123:7" for w in range(2)]
    assert split_vdevs(["net_af_xdp0,iface=v0,queue_count=2"], 1) == [
        ["net_af_xdp0,iface=v0,queue_count=2"]]                 # one worker: as given
    for bad, why in (("net_af_xdp0,iface=v0,queue_count=2", "each worker owns one queue"),
                     ("net_af_xdp0,iface=v0,xsk_map=1:2", "leave xsk_map out"),
                     ("net_af_xdp0,iface=v0", "no shared XDP program")):
        with pytest.raises(InvalidArgument, match=why):
            split_vdevs([bad], 2)
    a = split_vdevs(["net_af_packet0,iface=x"], 2)
    assert a[0] == a[1]                                   # one group for all workers
    for bad in ("net_pcap0,rx_pcap=/t/in.pcap", "net_memif0,role=server,socket=/t/s"):
        with pytest.raises(InvalidArgument, match=r"\{worker\}"):
            split_vdevs([bad], 2)
    assert split_vdevs(["net_pcap0,rx_pcap=/t/in.pcap"], 1) == [["net_pcap0,rx_pcap=/t/in.pcap"]]
    with pytest.raises(InvalidArgument):
        split_vdevs(["net_nosuch0"], 2)


def test_cli_refuses_bad_worker_counts_and_unsplittable_ports(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pktbuf.cli", "fwd", "--workers", "65", "--vdev",
                        "net_ring0"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--workers" in r.stderr
    r = subprocess.run([sys.executable, "-m", "pktbuf.cli", "fwd", "--workers", "2", "--vdev",
                        f"net_pcap0,tx_pcap={tmp_path}/o.pcap", "--seconds", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "{worker}" in r.stderr
    assert not (tmp_path / "o.pcap").exists()


def _need_root():
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the --workers AF_PACKET tests need root", pytrace=False)
        pytest.skip("needs root (network namespaces)")


@pytest.fixture
def ns():
    _need_root()
    with Netns() as n:
        n.veth()
        yield n


def _start(ns, args):
    p = subprocess.Popen(ns.exec_argv([sys.executable, "-m", "pktbuf.cli", "fwd", *args,
                                       "--json"]),
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line:
        p.wait(60)
        pytest.fail(f"pktbuf fwd did not start: {p.stderr.read()}")
    ev = json.loads(line)
    assert ev["event"] == "start", ev
    assert ev["idle_backoff"] is ("--no-idle-backoff" not in args)
    return p, ev


def _wait_stats(p, pred, timeout=60.0):
    """Read JSON lines until a stats event satisfies ``pred``; returns it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = p.stdout.readline()
        if not line:
            break
        ev = json.loads(line)
        if ev["event"] == "stats" and pred(ev):
            return ev
    pytest.fail("the counters never got there")


def _finish(p, sig=signal.SIGINT):
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    return lines[-1], lines, err


@pytest.mark.parametrize("busy", [False, True])
def test_two_workers_share_an_interface_by_flow(ns, tmp_path, busy):
    """Two workers in one fanout group on veth0, each writing what it receives to its own
    capture file: every frame the peer sent is in exactly one file, every flow in one file
    only, and both workers got flows (also with workers that poll without pause)."""
    out = tmp_path / "o-{worker}.pcap"
    p, ev = _start(ns, ["--workers", "2", "--vdev", "net_af_packet0,iface=veth0",
                        "--vdev", f"net_pcap1,tx_pcap={out}", "--forward-mode", "io",
                        "--stats-period", "0.2", "--no-telemetry"]
                   + (["--no-idle-backoff"] if busy else []))
    assert ev["workers"] == 2 and len(set(ev["worker_pids"])) == 2
    try:
        want = []
        for i in range(1200):
            f = bytearray(udp_frame(i % 48, 60 + i % 200))
            f[50:54] = i.to_bytes(4, "big")             # a sequence number in the payload
            want.append(bytes(f))
        with ns.entered():
            peer = RawPeer("veth1")
        try:
            for k in range(0, len(want), 100):
                peer.send(want[k:k + 100])
                time.sleep(0.01)
        finally:
            peer.close()
        _wait_stats(p, lambda e: e["ports"][1]["opackets"] >= len(want))
        summary, _, err = _finish(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert summary["mbufs_in_use_at_close"] == 0
    assert [w["state"] for w in summary["workers"]] == ["done", "done"]
    files = [naive.read_any((tmp_path / f"o-{w}.pcap").read_bytes()) for w in range(2)]
    got = [[r[1] for r in fl] for fl in files]
    assert sorted(got[0] + got[1]) == sorted(want)          # each frame exactly once
    flows = [{f[26:30] for f in g} for g in got]             # the source address is the flow
    assert flows[0] and flows[1] and not flows[0] & flows[1]
    rx = [sum(pp["rx"] for pp in w["ports"]) for w in summary["workers"]]
    assert rx == [len(got[0]), len(got[1])]


def test_killed_worker_is_reported_and_the_other_goes_on(ns):
    p, ev = _start(ns, ["--workers", "2", "--vdev", "net_af_packet0,iface=veth0",
                        "--forward-mode", "rxonly", "--stats-period", "0.2",
                        "--no-telemetry"])
    try:
        os.kill(ev["worker_pids"][1], signal.SIGKILL)
        line = p.stdout.readline()
        while json.loads(line)["event"] != "worker_died":
            line = p.stdout.readline()
        died = json.loads(line)
        assert died["worker"] == 1 and died["exitcode"] == -signal.SIGKILL
        want = [udp_frame(i, 60) for i in range(500)]     # 500 flows: all to the survivor
        with ns.entered():
            peer = RawPeer("veth1")
        try:
            peer.send(want)
        finally:
            peer.close()
        st = _wait_stats(p, lambda e: e["workers"][0]["rx"] >= len(want))
        assert st["workers"][1]["state"] in ("died", "running")
        summary, _, err = _finish(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1                                 # a worker did not finish cleanly
    w0, w1 = summary["workers"]
    assert w0["state"] == "done" and w0["mbufs_in_use_at_close"] == 0
    assert sum(pp["rx"] for pp in w0["ports"]) == len(want)
    assert w1["state"] == "died" and w1["exitcode"] == -signal.SIGKILL


def test_telemetry_shows_each_worker_as_a_queue(ns):
    tool = shutil.which("dpdk-telemetry.py")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("dpdk-telemetry.py is not installed", pytrace=False)
        pytest.skip("dpdk-telemetry.py is not installed")
    prefix = f"pktbuf_workers{os.getpid()}"
    p, ev = _start(ns, ["--workers", "2", "--vdev", "net_af_packet0,iface=veth0",
                        "--forward-mode", "rxonly", "--stats-period", "0.2",
                        "--file-prefix", prefix])
    try:
        with ns.entered():
            peer = RawPeer("veth1")
        try:
            peer.send([udp_frame(i, 60) for i in range(400)])
        finally:
            peer.close()
        _wait_stats(p, lambda e: e["ports"][0]["ipackets"] >= 400)
        r = subprocess.run(ns.exec_argv(["python3", tool, "-f", prefix]),
                           input="/ethdev/stats,0\n/pktbuf/workers\n/ethdev/info,0\n",
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        got = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
        st = got[0]["/ethdev/stats"]
        assert st["ipackets"] == 400
        assert sum(st["q_ipackets"][:2]) == 400 and min(st["q_ipackets"][:2]) > 0
        ws = got[1]["/pktbuf/workers"]
        assert [w["pid"] for w in ws] == ev["worker_pids"]
        assert got[2]["/ethdev/info"]["nb_rx_queues"] == 2
        summary, _, err = _finish(p)
    finally:
        if p.poll() is None:
            p.kill()
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    assert p.returncode == 0, err


@pytest.fixture
def ns2():
    _need_root()
    with Netns() as n:
        n.veth(queues=2)
        yield n


def test_af_xdp_two_workers_one_queue_each(ns2, tmp_path):
    """Two workers on a two-queue veth0: the parent attaches one XDP program, worker w puts
    its socket at queue w.  Frames sent so that they land on Rx queue 0 or 1 are each forwarded
    exactly once, by the worker owning that queue (its own capture file, its own counters), and
    both workers' pools are whole at the end; the program goes with the parent."""
    need_cpus(2)
    ns = ns2
    out = tmp_path / "o-{worker}.pcap"
    p, ev = _start(ns, ["--workers", "2", "--vdev", "net_af_xdp0,iface=veth0",
                        "--vdev", f"net_pcap1,tx_pcap={out}", "--forward-mode", "io",
                        "--stats-period", "0.2", "--no-telemetry"])
    try:
        assert ev["workers"] == 2 and len(set(ev["worker_pids"])) == 2
        assert xdp_attached(ns) is not None
        sent = {0: frames([64 + i % 300 for i in range(300)], seed=61),
                1: frames([70 + i % 200 for i in range(200)], seed=62)}
        send_on_queues(ns, "veth1", sent)
        _wait_stats(p, lambda e: e["ports"][1]["opackets"] >= 500)
        summary, _, err = _finish(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert xdp_attached(ns) is None                       # detached with the parent's link
    assert summary["mbufs_in_use_at_close"] == 0
    ws = summary["workers"]
    assert [w["state"] for w in ws] == ["done", "done"]
    assert all(w["mbufs_in_use_at_close"] == 0 and w["pool_audit"] == w["pool_size"] > 0
               for w in ws)
    for w in range(2):
        got = [r[1] for r in naive.read_any((tmp_path / f"o-{w}.pcap").read_bytes())]
        assert got == sent[w]                             # queue w's frames, in order, once
        assert ws[w]["ports"][0]["rx"] == ws[w]["ports"][0]["ipackets"] == len(sent[w])
        assert ws[w]["ports"][1]["tx"] == len(sent[w])


def test_af_xdp_killed_worker_leaves_the_other_queue_working(ns2):
    """Worker 1 is killed: the kernel takes its socket out of the shared map (its queue's
    frames go on to the kernel's stack, where a packet socket on veth0 sees them) and worker 0
    still gets every frame of queue 0."""
    need_cpus(2)
    ns = ns2
    p, ev = _start(ns, ["--workers", "2", "--vdev", "net_af_xdp0,iface=veth0",
                        "--forward-mode", "rxonly", "--stats-period", "0.2",
                        "--no-telemetry"])
    try:
        os.kill(ev["worker_pids"][1], signal.SIGKILL)
        line = p.stdout.readline()
        while json.loads(line)["event"] != "worker_died":
            line = p.stdout.readline()
        assert json.loads(line)["worker"] == 1
        with ns.entered():
            stack = RawPeer("veth0")
        try:
            sent = {0: frames([80] * 150, seed=63), 1: frames([81] * 120, seed=64)}
            send_on_queues(ns, "veth1", sent)
            seen = stack.recv(120, timeout=20, until=lambda b: b == sent[1][-1])
        finally:
            stack.close()
        assert [b for b in seen if len(b) == 81] == sent[1]
        assert not [b for b in seen if len(b) == 80]      # queue 0's went to worker 0
        _wait_stats(p, lambda e: e["workers"][0]["rx"] >= 150)
        summary, _, err = _finish(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1                              # a worker did not finish cleanly
    w0, w1 = summary["workers"]
    assert w0["state"] == "done" and sum(pp["rx"] for pp in w0["ports"]) == 150
    assert w0["pool_audit"] == w0["pool_size"] > 0
    assert w1["state"] == "died"


def test_af_xdp_more_workers_than_queues_is_refused(ns2):
    for args, why in ((["--workers", "3", "--vdev", "net_af_xdp0,iface=veth0"],
                       "needs queues 0..2 of 'veth0', which has only 2 Rx queues"),
                      (["--workers", "2", "--vdev", "net_af_xdp0,iface=veth0,start_queue=1"],
                       "needs queues 1..2 of 'veth0', which has only 2 Rx queues"),
                      (["--workers", "2", "--vdev", "net_af_xdp0,iface=veth0,queue_count=2"],
                       "each worker owns one queue")):
        r = subprocess.run(ns2.exec_argv([sys.executable, "-m", "pktbuf.cli", "fwd", *args,
                                          "--no-telemetry", "--seconds", "1"]),
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert r.returncode == 1 and why in r.stderr, r.stderr
        assert xdp_attached(ns2) is None


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_af_xdp_parent_killed_takes_the_program_and_the_workers_stop(ns2):
    """kill -9 of the parent: its BPF link closes, so the shared program is detached (nothing
    pinned stays behind), and the workers, whose parent is gone, stop by themselves."""
    ns = ns2
    p, ev = _start(ns, ["--workers", "2", "--vdev", "net_af_xdp0,iface=veth0",
                        "--forward-mode", "rxonly", "--stats-period", "0.2",
                        "--no-telemetry"])
    try:
        assert xdp_attached(ns) is not None
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        end = time.monotonic() + 30
        while xdp_attached(ns) is not None and time.monotonic() < end:
            time.sleep(0.02)
        assert xdp_attached(ns) is None
        while not all(_ended(pid) for pid in ev["worker_pids"]) and time.monotonic() < end:
            time.sleep(0.05)
        assert all(_ended(pid) for pid in ev["worker_pids"])
    finally:
        if p.poll() is None:
            p.kill()
        for pid in ev["worker_pids"]:
            if not _ended(pid):
                os.kill(pid, signal.SIGKILL)
