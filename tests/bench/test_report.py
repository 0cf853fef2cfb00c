"""The report generator: canned runs (data/*.json) to docs/performance.md, tables and charts."""
from __future__ import annotations

import io
import re
import sys

import pytest

from pktbuf.bench import heap as H
from pktbuf.bench import markdown as M
from pktbuf.bench import plot as P
from pktbuf.bench import report as C
from pktbuf.bench import results as R

TARGET_HEADER = ("| `pktbuf.kernels` alloc + free one at a time | raw mempool get + put, burst 32 "
                 "| free_bulk alternating A,B,A,B burst 32 | free_bulk flat burst 32 "
                 "| alloc_bulk + free_bulk round trip burst 32 |")


def _table_after(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table whose header line is ``header``."""
    lines = text.splitlines()
    i = lines.index(header)
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_targets_are_the_tracked_ratios_in_order(core_doc):
    t = R.core_targets(core_doc["rows"])
    assert [(x["case"], x["burst"]) for x in t] == [("single", 32), ("raw", 32),
                                                    ("alternating", 32), ("flat", 32),
                                                    ("roundtrip", 32)]
    by = {(r["case"], r["burst"]): r for r in core_doc["rows"]}
    for x in t:
        r = by[(x["case"], x["burst"])]
        assert x["ratio"] == pytest.approx(r["pktbuf"]["median"] / r["dpdk"]["median"])


def test_core_section_puts_the_target_ratios_under_the_exact_header(core_doc):
    md = M.render_core(core_doc)
    rows = _table_after(md, TARGET_HEADER)
    assert rows == [["**1.50**", "**2.00**", "**1.40**", "**0.80**", "**0.90**"]]
    assert md.index(TARGET_HEADER) < md.index("### Every case")      # prominent: first


def test_core_section_every_case_row(core_doc):
    md = M.render_core(core_doc)
    header = ("| case | burst | pktbuf | staged | staged / pktbuf | DPDK | pktbuf / DPDK "
              "| dropped | unit |")
    rows = _table_after(md, header)
    assert len(rows) == len(core_doc["rows"])
    flat = next(r for r in rows if r[0].startswith("free_bulk alone, flat"))
    assert flat == ["free_bulk alone, flat (1 pool)", "32", "2.40", "6.00", "2.50", "3.00",
                    "0.80", "3 / 2", "ns/mbuf"]
    chain = next(r for r in rows if r[0].startswith("free_bulk, 2-segment"))
    assert chain[1] == "64" and chain[-1] == "ns/chain" and chain[6] == "1.20"
    raw = next(r for r in rows if r[0].startswith("mempool"))
    assert raw[3] == "—" and raw[6] == "2.00"
    assert core_doc["dpdk"]["label"] in md
    assert "`pktbuf bench core --dpdk --report`" in md and "0123456789ab" in md
    assert "](performance.svg)" in md
    assert "| facade alloc_bulk(32) + free_bulk | 2.50 | us/pair | <= 3 |" in md


@pytest.mark.parametrize("status, words", [("missing", "No DPDK column: DPDK not found"),
                                           ("failed", "**The DPDK reference FAILED**")])
def test_core_section_without_dpdk_has_no_column_and_no_ratios(core_doc, status, words):
    core_doc["dpdk"] = (R.dpdk_missing("DPDK not found: no pkg-config on PATH") if status == "missing"
                        else R.dpdk_failed("building the DPDK reference failed: boom"))
    for r in core_doc["rows"]:
        r["dpdk"] = r["ratio"] = None
    core_doc["targets"] = []
    md = M.render_core(core_doc)
    assert words in md
    assert TARGET_HEADER not in md and "No ratios" in md
    assert "| case | burst | pktbuf | staged | staged / pktbuf | dropped | unit |" in md
    assert "DPDK 22.11.11 (" not in md


def test_heap_section(heap_doc):
    md = M.render_heap(heap_doc)
    header = ("| size (B) | threads | pktbuf | pktbuf, zero inside | rte_malloc | rte_zmalloc "
              "| pktbuf / rte_malloc | clean runs |")
    rows = _table_after(md, header)
    assert rows[0] == ["64", "1", "60.0", "61.0", "120.0", "125.0", "0.50", "—"]
    assert rows[1][:2] == ["64", "2"] and rows[1][6] == "0.33"          # 240 / 720
    assert rows[1][7] == "3 / 2* / 3 / 1* of 3"
    assert "hugepages" in md and "](performance-heap.svg)" in md


def test_update_keeps_the_other_section_and_replaces_its_own(tmp_path, core_doc, heap_doc):
    page = tmp_path / "docs" / "performance.md"
    M.update(page, core_doc)
    text = page.read_text()
    assert text.startswith("# Performance")
    assert "No `pktbuf bench heap --report` run yet" in text
    M.update(page, heap_doc)
    text = page.read_text()
    assert "**1.50**" in text and "| 64 | 1 | 60.0 |" in text
    core_doc["rows"][4]["pktbuf"]["median"] = 50.0          # single 32: 50 / 20 = 2.50
    core_doc["targets"] = R.core_targets(core_doc["rows"])
    M.update(page, core_doc)
    text = page.read_text()
    assert "**2.50**" in text and "**1.50**" not in text
    assert "| 64 | 1 | 60.0 |" in text                         # the heap section survived
    assert text.count(M.BEGIN.format("core")) == 1 and text.count(M.END.format("heap")) == 1


def test_core_table_print(core_doc):
    out = io.StringIO()
    C.print_table(core_doc, out)
    text = out.getvalue()
    assert "DPDK column: DPDK 22.11.11" in text
    line = next(x for x in text.splitlines() if x.startswith("free_bulk alone, flat"))
    assert re.search(r"\s32\s+2\.40\s+6\.00\s+2\.50\s+3\.00\s+0\.80\s+3/2\s+ns/mbuf$", line), line
    assert "free_bulk flat burst 32" in text


def test_heap_table_print(heap_doc):
    out = io.StringIO()
    H.print_table(heap_doc, out)
    lines = out.getvalue().splitlines()
    assert any(re.match(r"\s+64\s+1\s+outside\s+60\.0\s+16\.667\s+tsc\s+120\.0\s+125\.0\s+0\.50$", x)
               for x in lines), lines


def test_json_roundtrip(tmp_path, core_doc):
    R.write_json(core_doc, tmp_path / "x" / "run.json")
    assert R.read_json(tmp_path / "x" / "run.json") == core_doc
    (tmp_path / "bad.json").write_text('{"schema": 99}')
    with pytest.raises(ValueError):
        R.read_json(tmp_path / "bad.json")


@pytest.mark.parametrize("which", ["core", "heap"])
def test_plot_writes_an_svg(tmp_path, which, core_doc, heap_doc):
    pytest.importorskip("matplotlib")
    doc = core_doc if which == "core" else heap_doc
    P.draw(doc, tmp_path / "c.svg")
    text = (tmp_path / "c.svg").read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text


def test_plot_without_dpdk_column(tmp_path, core_doc):
    pytest.importorskip("matplotlib")
    core_doc["dpdk"] = R.dpdk_off()
    for r in core_doc["rows"]:
        r["dpdk"] = r["ratio"] = None
    P.draw(core_doc, tmp_path / "c.svg")
    assert "<svg" in (tmp_path / "c.svg").read_text()


def test_plot_without_matplotlib_says_so(monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib -> ImportError
    assert not P.available()
    with pytest.raises(P.PlotUnavailable, match=r"pktbuf\[plot\]"):
        P._pyplot()
    with pytest.raises(SystemExit) as e:                         # refused before measuring
        C.main(["--plot", "x.svg"])
    assert e.value.code == 2
    assert "matplotlib" in capsys.readouterr().err
