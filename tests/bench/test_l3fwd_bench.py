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
