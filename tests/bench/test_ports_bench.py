"""``pktbuf bench ports`` as a user runs it (quick mode): it runs, prints and writes JSON."""
from __future__ import annotations

import json

from .conftest import run_cli


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
