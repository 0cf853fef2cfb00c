"""``pktbuf bench net``'s targets table, from the recorded output of a real quick run of its parts
(tests/bench/data/net_quick_parts.json: `pktbuf bench net --quick --json`, samples dropped);
the parts themselves run in tests/net/test_lpm_bench.py and test_hash_bench.py."""
import io
import json
import os

from pktbuf.bench import net

DATA = os.path.join(os.path.dirname(__file__), "data", "net_quick_parts.json")


def _parts():
    with open(DATA) as f:
        return json.load(f)


def test_every_target_has_a_row_with_its_ratio():
    parts = _parts()
    rows = net._lpm_rows(parts["lpm"]) + net._hash_rows(parts["hash"])
    cases = [r["case"] for r in rows]
    for want in ("LPM lookup, single", "LPM lookup, bulk", "LPM lookup, x4", "LPM add, per route",
                 "LPM delete, per route"):
        assert want in cases
    assert any(c.startswith("LPM table memory") for c in cases)
    assert any(c.startswith("exact match lookup_bulk") for c in cases)
    for r in rows:
        assert r["dpdk_status"] == "ok"
        assert abs(r["ratio"] - r["pktbuf"] / r["dpdk"]) < 1e-6 * max(1.0, r["ratio"]) \
            or r["case"].startswith("exact match")       # the hash ratio is a median of ratios
    out = io.StringIO()
    net.print_targets({"rows": rows}, out)
    text = out.getvalue()
    assert "LPM lookup, x4" in text and "<= 0.5" in text and "<= 1.1" in text


def test_a_failed_reference_shows_as_failed_not_as_a_figure():
    parts = _parts()
    parts["hash"]["dpdk"]["status"] = "failed"
    parts["hash"]["ratios"] = []
    rows = net._hash_rows(parts["hash"])
    assert rows and rows[0]["ratio"] is None and rows[0]["dpdk_status"] == "failed"
    out = io.StringIO()
    net.print_targets({"rows": rows}, out)
    assert "failed" in out.getvalue()


def test_the_hash_table_memory_row():
    parts = _parts()
    parts["hash"]["memory"] = {"pktbuf": {"reserved": 48 << 20, "resident": 44 << 20},
                               "dpdk_lf": {"reserved": 50 << 20,
                                           "pktbuf_resident_ratio": 44 / 50}}
    rows = net._hash_rows(parts["hash"])
    r = next(r for r in rows if r["case"].startswith("exact match table memory"))
    assert r["pktbuf"] == 44 and r["dpdk"] == 50 and r["target"] == 1.1
    assert abs(r["ratio"] - r["pktbuf"] / r["dpdk"]) < 1e-9 and "reserved 48.0 MiB" in r["case"]
    out = io.StringIO()
    net.print_targets({"rows": rows}, out)
    assert "exact match table memory" in out.getvalue()
