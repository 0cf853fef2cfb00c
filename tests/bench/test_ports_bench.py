"""``pktbuf bench ports`` as a user runs it (quick mode): it runs, prints and writes JSON."""
from __future__ import annotations

import json

from .conftest import cli_env, run_cli


def test_ports_dispatch_quick(tmp_path):
    out = tmp_path / "ports.json"
    r = run_cli("bench", "ports", "--only", "dispatch", "--quick", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "port table dispatch" in r.stdout
    d = json.loads(out.read_text())["dispatch"]
    assert d["dispatch_ns_per_pkt"] > 0 and d["direct_ns_per_pkt"] > 0
    assert d["samples"] == 5


def test_ports_unknown_section_exits_2():
    r = run_cli("bench", "ports", "--only", "nosuch")
    assert r.returncode == 2 and "nosuch" in r.stderr


# -- AF_PACKET against dpdk-testpmd's net_af_packet (root, veth pairs, testpmd) -----------------
def _need_afpacket():
    import os
    import shutil

    import pytest

    from pktbuf.apps import testpmd as T
    why = None
    if os.geteuid() != 0:
        why = "the AF_PACKET benchmarks need root (network namespaces, veth pairs)"
    elif not T.available():
        why = "dpdk-testpmd is not installed (apt-get install dpdk)"
    elif shutil.which("ip") is None or shutil.which("taskset") is None:
        why = "the AF_PACKET benchmarks need iproute2 and util-linux (taskset)"
    elif (os.cpu_count() or 1) < 2:
        why = "the AF_PACKET benchmarks need 2 CPUs"
    if why:
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


def _both_sides(d):
    assert d["status"] == "ok", d
    assert d["testpmd_status"] == "ok", d["testpmd_status"]
    assert d["rate_pps"] > 0
    for who in ("pktbuf", "testpmd"):
        s = d[who]
        assert s["failed_runs"] == 0
        assert len(s["samples_cycles_per_packet"]) == 1
        assert s["cycles_per_packet"] > 0
        assert s["sent"][0] > 0 and s["delivered"][0] > 0
        assert s["lost"][0] == s["sent"][0] - s["delivered"][0]
        run = d["runs"][who][0]
        assert run["busy_cycles"] > 0 and run["packets"] == run["rx"]
    assert d["ratio"] == d["pktbuf"]["cycles_per_packet"] / d["testpmd"]["cycles_per_packet"]


def _check_fwd(d):
    """Both sides' runs, and each loss-free search: trials, their loss, the figure."""
    _both_sides(d)
    for who in ("pktbuf", "testpmd"):
        (s,) = d["search"][who]
        assert s["status"] == "ok" and s["trials"]
        passing = [t["offered_pps"] for t in s["trials"] if t["lost"] == 0]
        assert s["loss_free_pps"] == (max(passing) if passing else 0.0)
        assert all(t["sent"] - t["received"] == t["lost"] for t in s["trials"])
        assert d[who]["loss_free_pps"] == s["loss_free_pps"]


def test_ports_afpacket_rx_quick(tmp_path):
    _need_afpacket()
    out = tmp_path / "ports.json"
    r = run_cli("bench", "ports", "--only", "afpacket_rx", "--quick", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "AF_PACKET 64 B rx-only" in r.stdout and "target <= 1.0x" in r.stdout
    doc = json.loads(out.read_text())
    d = doc["afpacket_rx"]
    _both_sides(d)
    for who in ("pktbuf", "testpmd"):
        assert d["probe"][who]["received_pps"] > 0
    assert doc["afpacket"]["quick"] is True
    # pktbuf fwd polled as testpmd does (it says so itself in its start event)
    assert doc["afpacket"]["pktbuf_polling"] == "busy"
    assert [r["idle_backoff"] for r in d["runs"]["pktbuf"]] == [False] * len(d["runs"]["pktbuf"])


def test_ports_afpacket_fwd_quick(tmp_path):
    _need_afpacket()
    out = tmp_path / "ports.json"
    r = run_cli("bench", "ports", "--only", "afpacket_fwd", "--quick", "--json", str(out),
                "--idle-backoff")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "io forwarding between two veth pairs" in r.stdout and "target >= 1.0x" in r.stdout
    doc = json.loads(out.read_text())
    d = doc["afpacket_fwd"]
    assert doc["afpacket"]["pktbuf_polling"] == "backoff"          # pktbuf fwd's default
    runs = [r for r in d["runs"]["pktbuf"] if r["status"] == "ok"]
    assert runs and all(r["idle_backoff"] is True for r in runs)
    _check_fwd(d)
    if d["testpmd"]["loss_free_pps"]:
        assert d["rate_ratio"] == d["pktbuf"]["loss_free_pps"] / d["testpmd"]["loss_free_pps"]


def test_ports_afpacket_needs_root_says_so():
    """Without root the sections fail in one clear sentence (exit 1), and measure nothing."""
    import os
    import shutil

    import pytest
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop to an unprivileged user")
    import subprocess
    import sys
    import tempfile
    from .conftest import ROOT
    d = tempfile.mkdtemp(prefix="pktbuf-noroot-")     # in /tmp: reachable by nobody
    os.chmod(d, 0o777)
    out = os.path.join(d, "ports.json")
    env = cli_env(NUMBA_CACHE_DIR=os.path.join(d, "numba"))
    try:
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            sys.executable, "-m", "pktbuf.cli", "bench", "ports", "--only",
                            "afpacket_rx", "--quick", "--json", out],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "needs root" in r.stdout
        with open(out) as f:
            assert json.load(f)["afpacket_rx"]["status"] == "failed"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_ports_pcap_quick(tmp_path):
    """The pcap section measures both references in the same run (dpkt always; testpmd's
    net_pcap when installed, and under CI it must be)."""
    import os
    import shutil
    out = tmp_path / "ports.json"
    r = run_cli("bench", "ports", "--only", "pcap", "--quick", "--json", str(out))
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())["pcap"]
    for k in ("pktbuf_read", "pktbuf_write", "dpkt_read", "dpkt_write", "pktbuf_write_null",
              "dpkt_write_null", "file_write_floor"):
        assert d[k] > 0
    assert d["write_null_ratio"] == d["pktbuf_write_null"] / d["dpkt_write_null"]
    if shutil.which("dpdk-testpmd") or os.environ.get("CI"):
        assert d["testpmd_read"] > 0 and d["testpmd_write"] > 0
    assert "pcap, 64-byte frames" in r.stdout and "into /dev/null" in r.stdout


def test_ports_afxdp_rx_quick(tmp_path):
    """afxdp_rx: pktbuf AF_XDP (defaults and coalesced), testpmd net_af_xdp and pktbuf
    AF_PACKET in one run, with every pktbuf/reference ratio."""
    _need_afpacket()
    out = tmp_path / "ports.json"
    r = run_cli("bench", "ports", "--only", "afxdp_rx", "--quick", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "AF_XDP 64 B rx-only" in r.stdout and "target <= 0.67x" in r.stdout
    d = json.loads(out.read_text())["afxdp_rx"]
    _both_sides(d)
    assert d["driver"] == "net_af_xdp"
    for who in ("pktbuf_af_packet", "pktbuf_coalesced"):
        assert d[who]["failed_runs"] == 0 and d[who]["cycles_per_packet"] > 0
    for key in ("pktbuf/testpmd", "pktbuf/pktbuf_af_packet", "pktbuf_coalesced/testpmd",
                "pktbuf_coalesced/pktbuf_af_packet"):
        a, b = key.split("/")
        assert d["ratios"][key]["median"] == d[a]["cycles_per_packet"] / d[b]["cycles_per_packet"]


def test_ports_afxdp_fwd_quick(tmp_path):
    _need_afpacket()
    out = tmp_path / "ports.json"
    r = run_cli("bench", "ports", "--only", "afxdp_fwd", "--quick", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "AF_XDP 64 B io forwarding" in r.stdout and "target >= 1.0x" in r.stdout
    _check_fwd(json.loads(out.read_text())["afxdp_fwd"])
