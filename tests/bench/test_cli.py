"""``pktbuf bench`` as a user runs it: real processes, PKTBUF_BENCH_QUICK=1, few cases."""
from __future__ import annotations

import json
import re

import pytest

from pktbuf.bench import dpdk_ref as D
from pktbuf.bench import plot as P
from pktbuf.bench import report as C

from .conftest import ROOT, cli_env, dpdk_or_skip, dpdk_runtime_entries, run_cli

FEW = ["--cases", "roundtrip,flat,facade", "--bursts", "32"]


def _header(stdout: str) -> str:
    return next(x for x in stdout.splitlines() if x.startswith("case "))


def test_bench_help_lists_the_benchmarks_and_options():
    r = run_cli("bench", "--help")
    assert r.returncode == 0, r.stderr
    for word in ("core", "heap", "memif", "--dpdk", "--json", "--plot", "--report"):
        assert word in r.stdout


def test_bench_core_help():
    r = run_cli("bench", "core", "--help")
    assert r.returncode == 0, r.stderr
    assert "--dpdk" in r.stdout and "--report" in r.stdout and "single" in r.stdout


def test_unknown_benchmark_exits_2():
    r = run_cli("bench", "nosuchbench")
    assert r.returncode == 2
    assert "unknown benchmark 'nosuchbench'" in r.stderr


def test_unknown_case_exits_2():
    r = run_cli("bench", "core", "--cases", "flat,nosuchcase")
    assert r.returncode == 2 and "nosuchcase" in r.stderr


def test_core_json_and_plot_without_dpdk(tmp_path):
    out, svg = tmp_path / "run.json", tmp_path / "run.svg"
    args = ["bench", "core", *FEW, "--json", out]
    if P.available():
        args += ["--plot", svg]
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert "No DPDK column (pass --dpdk" in r.stdout
    assert "DPDK" not in _header(r.stdout)
    doc = json.loads(out.read_text())
    assert doc["schema"] == 1 and doc["bench"] == "core"
    assert doc["command"].startswith("pktbuf bench core --cases roundtrip,flat,facade")
    assert re.match(r"\d{4}-\d\d-\d\dT", doc["date"])
    assert doc["machine"]["cpus"] >= 1 and doc["machine"]["numba"] and doc["machine"]["tsc_hz"] > 0
    if (ROOT / ".git").exists():                   # a checkout (.git is a file in a worktree)
        assert re.fullmatch(r"[0-9a-f]{40}", doc["git"]["commit"])
    assert doc["dpdk"]["status"] == "off" and doc["targets"] == []
    m = doc["method"]
    assert (m["pool_n"], m["cache"], m["dataroom"], m["reps"], m["drop_us"]) == (8192, 256, 2176, 1, 20.0)
    assert [(x["case"], x["burst"]) for x in doc["rows"]] == [("roundtrip", 32), ("flat", 32)]
    for row in doc["rows"]:
        assert row["unit"] == "ns/mbuf" and row["dpdk"] is None and row["ratio"] is None
        for k in ("pktbuf", "pktbuf_staged"):
            assert len(row[k]["samples"]) == 1
            assert row[k]["median"] == pytest.approx(row[k]["samples"][0], abs=1e-4)
            assert "dropped" in row[k] and "kept" in row[k]
    assert [e["name"] for e in doc["extras"]] == ["facade alloc_bulk(32) + free_bulk"]
    if P.available():
        assert "<svg" in svg.read_text()


def test_core_with_dpdk(tmp_path, ref_cache):
    home, _ = ref_cache
    before = dpdk_runtime_entries()
    out, page = tmp_path / "run.json", tmp_path / "docs" / "performance.md"
    r = run_cli("bench", "core", "--dpdk", "--cases", "roundtrip,flat,alternating,single,raw",
                "--bursts", "32", "--json", out, "--report", page, env=cli_env(XDG_CACHE_HOME=home))
    assert r.returncode == 0, r.stderr
    assert "DPDK column: DPDK 22.11" in r.stdout and "--no-huge" in r.stdout
    assert "pktbuf/DPDK" in _header(r.stdout)
    doc = json.loads(out.read_text())
    d = doc["dpdk"]
    assert d["status"] == "ok" and "--no-huge" in d["eal_args"] and d["info"]["dpdk"].startswith("DPDK 22.11")
    assert d["eal_args"] == d["info"]["eal_args"]
    for row in doc["rows"]:
        assert len(row["dpdk"]["samples"]) == 1 and row["dpdk"]["median"] > 0
        assert row["ratio"] == pytest.approx(row["pktbuf"]["median"] / row["dpdk"]["median"])
    assert [t["case"] for t in doc["targets"]] == ["single", "raw", "alternating", "flat", "roundtrip"]
    assert all(t["ratio"] is not None for t in doc["targets"])
    text = page.read_text()
    assert "| `pktbuf.kernels` alloc + free one at a time |" in text
    assert f"**{doc['targets'][0]['ratio']:.2f}**" in text
    if P.available():
        assert "<svg" in (page.parent / "performance.svg").read_text()
    assert dpdk_runtime_entries() <= before


@pytest.mark.parametrize("how", ["no pkg-config on PATH", "no libdpdk for pkg-config"])
def test_core_without_dpdk_says_so_plainly(tmp_path, how):
    if how.startswith("no pkg-config"):
        (tmp_path / "bin").mkdir()
        env = cli_env(PATH=tmp_path / "bin")
        words = "No DPDK column: DPDK not found: no pkg-config"
    else:
        env = cli_env(PKG_CONFIG_LIBDIR=tmp_path, PKG_CONFIG_PATH=tmp_path)
        words = "No DPDK column: DPDK not found: pkg-config knows no libdpdk"
    out = tmp_path / "run.json"
    r = run_cli("bench", "core", "--dpdk", "--cases", "raw", "--bursts", "32", "--json", out, env=env)
    assert r.returncode == 0, r.stderr
    assert words in r.stdout and "FAILED" not in r.stdout
    assert "DPDK" not in _header(r.stdout)
    doc = json.loads(out.read_text())
    assert doc["dpdk"]["status"] == "missing" and doc["rows"][0]["dpdk"] is None


def test_core_with_a_broken_reference_says_failed(tmp_path, monkeypatch, capsys):
    dpdk_or_skip()
    bad = tmp_path / "dpdk_ref.c"
    bad.write_text("this is not C\n")
    monkeypatch.setattr(D, "SOURCE", bad)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "run.json"
    rc = C.main(["--dpdk", "--cases", "raw", "--bursts", "32", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 1
    assert "DPDK reference FAILED, no DPDK column: building the DPDK reference failed" in text
    assert "DPDK" not in _header(text).replace("DPDK reference", "")
    doc = json.loads(out.read_text())
    assert doc["dpdk"]["status"] == "failed" and doc["rows"][0]["dpdk"] is None


def test_heap_with_dpdk(tmp_path, ref_cache):
    home, _ = ref_cache
    out = tmp_path / "heap.json"
    r = run_cli("bench", "heap", "--dpdk", "--sizes", "64", "--json", out,
                env=cli_env(XDG_CACHE_HOME=home))
    assert r.returncode == 0, r.stderr
    assert "rte_malloc" in r.stdout and "hugepages" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["dpdk"]["status"] == "ok" and "--lcores=0@" in " ".join(doc["dpdk"]["eal_args"])
    assert [(x["size"], x["threads"]) for x in doc["rows"]] == [(64, 1), (64, 2)]
    for row in doc["rows"]:
        for k in ("pktbuf_outside", "pktbuf_inside", "dpdk_malloc", "dpdk_zmalloc"):
            assert row[k]["median"] > 0 and len(row[k]["samples"]) == doc["method"]["runs"]
        assert row["ratio"] == pytest.approx(row["pktbuf_outside"]["median"] / row["dpdk_malloc"]["median"])
    two = doc["rows"][1]["dpdk_malloc"]
    assert len(two["share"]) == doc["method"]["runs"] and 0 <= two["clean"] <= doc["method"]["runs"]


def test_a_recorded_run_is_rendered_without_measuring(tmp_path):
    page = tmp_path / "docs" / "performance.md"
    canned = ROOT / "tests" / "bench" / "data"
    r = run_cli("bench", "core", "--from-json", canned / "core.json", "--report", page)
    assert r.returncode == 0, r.stderr
    assert "compiling" not in r.stderr                  # nothing was measured
    assert "DPDK column: DPDK 22.11.11" in r.stdout
    r = run_cli("bench", "heap", "--from-json", canned / "heap.json", "--report", page)
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    assert "| **1.50** | **2.00** | **1.40** | **0.80** | **0.90** |" in text
    assert "| 64 | 1 | 60.0 | 61.0 | 120.0 | 125.0 | 0.50 | — |" in text
    r = run_cli("bench", "heap", "--from-json", canned / "core.json")
    assert r.returncode == 2 and "records 'pktbuf bench core'" in r.stderr
