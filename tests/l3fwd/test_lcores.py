"""``pktbuf l3fwd`` with two lcores as two processes (pktbuf/apps/l3fwd/lcores.py): over AF_XDP
queues of two-queue veth pairs, every frame forwarded exactly once and byte-identical to what
one lcore makes of it (the model, tests/l3fwd/test_naive.py checks the stage against it);
SIGTERM stops both and the XDP program goes; a killed lcore process is reported and the
command exits 1; where the ports cannot be split the lcores stay threads, and say why."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest

from pktbuf.apps.l3fwd import naive, routes
from pktbuf.apps.l3fwd.lcores import why_threads
from pktbuf.apps.l3fwd.options import parse

from ..af_packet.helpers import RawPeer
from ..af_xdp.helpers import need_cpus, send_on_queues, xdp_attached
from ..netns import Netns
from .frames import ether, ipv4, udp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = "(0,0,1),(1,0,1),(0,1,2),(1,1,2)"
PIDS = re.compile(r"L3FWD: lcores 1 \(pid (\d+)\), 2 \(pid (\d+)\) as processes")


def test_which_configs_become_processes():
    def why(vdevs, config=CONFIG):
        argv = [x for v in vdevs for x in ("--vdev", v)] + ["--", "-p", "0x3", "--config",
                                                           config, "--parse-ptype"]
        return why_threads(parse(argv))
    xdp = ["net_af_xdp0,iface=a", "net_af_xdp1,iface=b"]
    assert why(xdp) is None
    assert why(["net_af_xdp0,iface=a,queue_count=2", "net_af_packet1,iface=b,qpairs=2"]) is None
    assert why(["net_pcap0,rx_pcap=i{worker},tx_pcap=o{worker}", "net_memif1,id={worker}"]) \
        is None
    assert "one set of files all lcores would share" in why(["net_pcap0,tx_pcap=o",
                                                             "net_af_xdp1,iface=b"])
    assert "cannot be split" in why(["net_ring0", "net_af_xdp1,iface=b"])
    assert "queue_count=3" in why(["net_af_xdp0,iface=a,queue_count=3", "net_af_xdp1,iface=b"])
    assert "lcore 2 polls queue 0 of port 1; as processes the lcore in position 1 owns queue 1" \
        in why(xdp, "(0,0,1),(1,0,2)")
    assert "polled by lcores [1] only" in why(["net_af_packet0,iface=a", "net_af_xdp1,iface=b"],
                                              "(0,0,1),(1,0,1),(1,1,2)")


def test_unsplittable_ports_stay_threads(tmp_path):
    """net_pcap without {worker}: two lcores as threads of one process, said so."""
    r = subprocess.run([sys.executable, "-m", "pktbuf.apps.l3fwd", "--vdev",
                        f"net_pcap0,tx_pcap={tmp_path}/o0.pcap", "--vdev",
                        f"net_pcap1,tx_pcap={tmp_path}/o1.pcap", "--", "-p", "0x3",
                        "--config", "(0,0,1),(1,0,2)", "--parse-ptype"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1                  # one Tx queue per port for two lcores: refused
    assert "as threads of one process: net_pcap0 (net_pcap) is one set of files" in r.stdout


def _need_root():
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the l3fwd lcore process tests need root", pytrace=False)
        pytest.skip("needs root (network namespaces)")


@pytest.fixture
def ns():
    _need_root()
    with Netns() as n:
        n.veth("veth0", "veth1", queues=2)
        n.veth("veth2", "veth3", queues=2)
        yield n


def _start(ns, vdevs):
    argv = [sys.executable, "-m", "pktbuf.apps.l3fwd"] + \
        [x for v in vdevs for x in ("--vdev", v)] + \
        ["--", "-p", "0x3", "--config", CONFIG, "--parse-ptype"]
    p = subprocess.Popen(ns.exec_argv(argv), cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if "entering main loop" in line:
            break
    else:
        p.wait(60)
        pytest.fail(f"pktbuf l3fwd did not start: {''.join(lines)} {p.stderr.read()}")
    m = PIDS.search("".join(lines))
    assert m, lines
    return p, [int(m.group(1)), int(m.group(2))]


def _frames(n, seed):
    """Well-formed UDP frames that l3fwd's default LPM routes (198.18.1.0/24) send to port 1."""
    return [ether(0x0800) + ipv4(f"10.{seed}.{i % 250}.1", f"198.18.1.{i % 200}",
                                 payload=udp(1000 + i, 9, bytes(i % 90)), ttl=2 + i % 200)
            for i in range(n)]


def _mac(ns, ifname) -> bytes:
    return bytes.fromhex(ns.link(ifname)["address"].replace(":", ""))


def test_two_lcore_processes_over_af_xdp(ns):
    need_cpus(2)
    p, pids = _start(ns, ["net_af_xdp0,iface=veth0", "net_af_xdp1,iface=veth2"])
    try:
        assert len(set(pids)) == 2 and p.pid not in pids
        assert xdp_attached(ns, "veth0") is not None
        with ns.entered():
            sink = RawPeer("veth3")
        sink.sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)    # SO_RCVBUFFORCE: room for all
        try:
            sent = {0: _frames(300, 1), 1: _frames(200, 2)}
            send_on_queues(ns, "veth1", sent)        # queue 0: lcore 1's, queue 1: lcore 2's
            got = sink.recv(500, timeout=30)
            extra = sink.recv(1, timeout=0.5)
        finally:
            sink.close()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert xdp_attached(ns, "veth0") is None and xdp_attached(ns, "veth2") is None
    m = naive.Model("lpm", 0x3, routes.default_lpm(False), routes.default_lpm(True),
                    src_macs={0: _mac(ns, "veth0"), 1: _mac(ns, "veth2")})
    want = []
    for fr in sent[0] + sent[1]:
        port, _why, o = m.forward(fr + bytes(naive.SPAN), len(fr), 0)
        assert port == 1
        want.append(o)
    assert not extra
    assert Counter(got) == Counter(want)           # each frame once, as one lcore sends it
    assert "port 0: rx 500 tx 0 tx-dropped 0" in out
    assert "port 1: rx 0 tx 500 tx-dropped 0" in out
    assert "Closing port 1... Done" in out
    for pid in pids:                               # both lcore processes are gone
        assert not os.path.exists(f"/proc/{pid}")


def test_killed_lcore_process_is_reported(ns):
    need_cpus(2)
    p, pids = _start(ns, ["net_af_packet0,iface=veth0", "net_af_packet1,iface=veth2"])
    try:
        os.kill(pids[1], signal.SIGKILL)
        end = time.monotonic() + 30
        line = ""
        while "died" not in line and time.monotonic() < end:
            line = p.stdout.readline()
        assert f"L3FWD: lcore 2 (pid {pids[1]}) died (exit code -9)" in line
        assert p.poll() is None                    # lcore 1 goes on
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1, err
    assert "L3FWD: lcore 2 process: died (exit code -9)" in out and "Closing port 0... Done" in out
    assert not os.path.exists(f"/proc/{pids[0]}")
