"""``pktbuf bench distrib`` as a user runs it (quick mode): every section measures something."""
from __future__ import annotations

import json

from .conftest import run_cli


def test_distrib_quick(tmp_path):
    out = tmp_path / "d.json"
    r = run_cli("bench", "distrib", "--quick", "--json", str(out))
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    rows = {x["variant"]: x["ns_per_packet"]["median"] for x in d["hop"]["rows"]}
    assert set(rows) == {"empty", "base", "hop", "hop_prehashed"} and min(rows.values()) > 0
    m = d["model"]
    assert m["t_work"] == max(rows["base"] - rows["empty"], 0.0)
    assert set(m["predict"]) == {"selffed_mpps", "distributor_mpps"}
    assert d["hop"]["hop_added_ns"]["value"] == rows["hop"] - rows["base"]
    # the threads really ran (a loop compiled inside a timed run would count nothing)
    assert d["pipeline"]["pipeline_mpps"] > 0 and d["pipeline"]["alone_mpps"] > 0
    assert d["workers"]["one_mpps"] > 0 and d["workers"]["two_mpps"] > 0
    assert d["workers"]["ratio"] == d["workers"]["two_mpps"] / d["workers"]["one_mpps"]
    assert "added by the hop" in r.stdout and "self-fed workers" in r.stdout


def test_distrib_bad_options():
    r = run_cli("bench", "distrib", "--rounds", "0")
    assert r.returncode == 2 and "--rounds" in r.stderr
