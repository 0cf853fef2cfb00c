"""``pktbuf bench rss``: shape and arithmetic only -- no timing is asserted.  With DPDK, the C
reference must hash the same tuples to the same values (the bench refuses otherwise)."""
from __future__ import annotations

import numpy as np

from pktbuf.bench import rss as B
from pktbuf.net.rss import naive
from pktbuf.net.rss.thash import DEFAULT_RSS_KEY

from tests.bench.conftest import cli_env, dpdk_or_skip, run_cli


def test_tuples_are_splitmix64_and_check_is_xor_of_hashes():
    t = B.make_tuples(64)
    assert t.shape == (64, 12) and len({r.tobytes() for r in t}) == 64
    # splitmix64(seed 1): first output 0x910a2dec89025cc1 -> src 0x910a2dec, dst 0x89025cc1
    assert t[0, :8].tobytes() == bytes.fromhex("910a2dec89025cc1")
    b = B.RssBench(64)
    want = 0
    for r in t:
        want ^= naive.toeplitz(DEFAULT_RSS_KEY, r.tobytes())
    assert b.check == want
    ns, kept, dropped = b.cycles(4, 2, B.NEVER)
    assert kept == 4 and dropped == 0 and np.isfinite(ns)


def test_measure_against_dpdk_same_tuples():
    dpdk_or_skip()
    doc = B.measure(reps=1, packets=4096)
    assert doc["dpdk"]["status"] == "ok", doc["dpdk"]
    kinds = [r["variant"] for r in doc["rows"]]
    assert kinds[:3] == ["pktbuf", "softrss", "softrss_be"]
    info = doc["dpdk"]["info"]
    assert ("gfni" in kinds) == bool(info["gfni"])
    assert bool(info["gfni"]) != bool(info["gfni_missing"])      # no GFNI: the report says why
    cpu_gfni = " gfni " in open("/proc/cpuinfo").read().replace("\n", " ")
    if not cpu_gfni:
        assert not info["gfni"]
    for r in doc["rows"]:
        assert len(r["ns_per_packet"]["samples"]) == 1
    e = doc["extras"][0]
    p, d = doc["rows"][0]["ns_per_packet"]["median"], doc["rows"][1]["ns_per_packet"]["median"]
    assert abs(e["value"] - p / d) < 1e-9 and e["ci"][0] <= e["value"] <= e["ci"][1]


def test_cli_without_dpdk(tmp_path):
    out = tmp_path / "rss.json"
    r = run_cli("bench", "rss", "--no-dpdk", "--json", out, env=cli_env())
    assert r.returncode == 0, r.stderr
    assert "pktbuf thash_bulk" in r.stdout and "No DPDK column" in r.stdout
    assert out.read_text().count('"variant"') == 1
