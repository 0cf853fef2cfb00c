"""``pktbuf bench l3fwd --quick`` as a user runs it: every target row is there, both sides
measured, every figure positive (nothing timed is asserted)."""
from __future__ import annotations

import json
import os

import pytest

from .conftest import dpdk_or_skip, run_cli

KEYS = ["memif_lpm", "memif_lpm_rate", "afxdp_lpm", "memif_em", "stage_io"]


def test_l3fwd_quick_table_is_complete(tmp_path):
    dpdk_or_skip()
    if os.geteuid() != 0:           # the AF_XDP row needs a network namespace
        if os.environ.get("CI"):
            pytest.fail("pktbuf bench l3fwd needs root in CI", pytrace=False)
        pytest.skip("needs root")
    from pktbuf.bench.l3fwd import TITLES, rows
    out = tmp_path / "l3fwd.json"
    r = run_cli("bench", "l3fwd", "--quick", "--json", out)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    assert doc["failed"] == []
    got = rows(doc)
    assert [g[0] for g in got] == KEYS
    for key, mine, ref, ratio, *_ in got:
        assert float(mine) > 0 and float(ref) > 0 and ratio > 0, (key, mine, ref, ratio)
    table = [ln for ln in r.stdout.splitlines() if ln.startswith("| ")]
    assert len(table) == 1 + len(KEYS)          # the header and one row per target
    for key in KEYS:
        assert TITLES[key] in r.stdout
    for case in ("memif_lpm", "afxdp_lpm", "memif_em"):
        for side in doc["cases"][case]["sides"].values():
            run = side["runs"][0]
            assert run["packets"] > 0 and run["busy_cycles"] > 0
            assert run["gen"]["received"] > 0
    # the loss-free searches: both sides, their trials in turn, every trial's loss recorded
    c = doc["cases"]["memif_lpm"]
    (rnd,) = c["search"]["rounds"]
    who = [w for w, _ in rnd["schedule"]]
    assert who[:2] == ["pktbuf", "dpdk"] and rnd["schedule"][0][1] == c["search_ceiling_pps"]
    for w, sd in c["sides"].items():
        (s,) = sd["searches"]
        assert s["status"] == "ok" and s["trials"] == who.count(w) >= 1
        for x in s["rates"]:
            assert x["lost"] == [t["sent"] - t["received"] for t in x["trials"]]
            assert all(t["sent"] > 0 for t in x["trials"])
        assert sd["loss_free_pps"] == s["loss_free_pps"] > 0


def _side(cpp, lf=None, status="ok", reason=""):
    return {"status": status, "reason": reason, "cycles_per_packet": cpp,
            "loss_free_pps": lf, "loss_free_generator_limited": False, "waited": [0.0]}


def test_failed_reference_is_reported_not_omitted():
    from pktbuf.bench.l3fwd import markdown, rows
    bad = _side(None, status="failed", reason="DPDK's l3fwd did not start")
    case = {"status": "ok", "rate_pps": 1e5, "rate_rule": "given", "ratio": None,
            "ratios_per_round": None, "rate_ratio": None}
    doc = {"method": {"rounds": 1, "seconds": 1.0, "resolution": 0.03}, "loadavg": [0.0],
           "cases": {"memif_lpm": {**case, "sides": {"pktbuf": _side(500.0, 2e6), "dpdk": bad}},
                     "afxdp_lpm": {**case, "sides": {"pktbuf": _side(900.0), "dpdk": bad}},
                     "memif_em": {**case, "sides": {"pktbuf": _side(600.0), "dpdk": bad}},
                     "stage_io": {"status": "failed", "reason": "boom"}}}
    got = rows(doc)
    assert [g[0] for g in got] == KEYS
    for key, mine, ref, ratio, *_rest in got:
        met = _rest[-2]
        assert ratio is None and met == "n/a"
        assert "FAILED" in (mine if key == "stage_io" else ref)
    text = markdown(doc)
    assert text.count("FAILED") == 5 and "did not start" in text
