"""The core bench's loops and bookkeeping, in this process (no figures are judged)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from pktbuf.bench import core as K
from pktbuf.bench import report as C
from pktbuf.bench import results as R
from pktbuf.bench.dpdk_ref import DpdkFailed
from pktbuf.bench.tsc import pair_overhead_cycles


@pytest.fixture(scope="module")
def bench():
    b = K.CoreBench()
    yield b
    b.close()


def test_free_only_counts_every_dropped_interval(bench):
    acc, kept, dropped = K.free_only(bench.dom, bench.a.id, bench.b.id, bench.lcore, 32, 25,
                                     0, False, np.uint64(0))
    assert (kept, dropped) == (0, 25)
    acc, kept, dropped = K.free_only(bench.dom, bench.a.id, bench.b.id, bench.lcore, 32, 25,
                                     2, True, np.uint64(1 << 62))
    assert (kept, dropped) == (25, 0) and acc > 0
    bench.audit()


def test_a_sample_with_every_interval_dropped_fails_with_the_count(bench, monkeypatch):
    monkeypatch.setattr(bench, "drop_cyc", np.uint64(0))
    iters = K.loop_iters("flat", 32, bench.effective_units(K.UNITS))
    with pytest.raises(K.BenchError, match=rf"all {iters} timed intervals .* dropped"):
        bench.sample("flat", 32)
    bench.audit()                                   # and no mbuf went missing on the way


@pytest.mark.parametrize("case", [c.name for c in K.CASES])
def test_every_case_samples_and_returns_its_mbufs(bench, case):
    # at least 8 timed intervals: with one, a single preemption or page fault (> 20 us) drops
    # it and leaves nothing to report (the case above checks that refusal on purpose)
    units = 2000
    while bench.timing(case, 32, units).nchunks < 8 and units < 1 << 22:
        units *= 2
    for staged in (False, True) if K.CASE[case].staged else (False,):
        s = bench.sample(case, 32, staged, units=units)
        assert s.ns > 0 and s.kept >= 1 and s.dropped >= 0 and s.kept + s.dropped >= 8
    bench.audit()


def test_bursts_outside_a_case_are_refused(bench):
    with pytest.raises(ValueError):
        bench.sample("alternating", 1)
    with pytest.raises(ValueError):
        bench.sample("flat", K.MAX_BURST + 1)
    with pytest.raises(ValueError):
        bench.sample("nosuch", 32)


def test_audit_finds_a_missing_mbuf(bench):
    m = bench.a.alloc()
    with pytest.raises(K.BenchError, match=r"1 of 8192 mbufs not returned"):
        bench.audit()
    m.free()
    bench.audit()


def test_pair_overhead_is_positive():
    assert pair_overhead_cycles(1001) > 0


class _FlakyRef:
    """A reference that answers a few samples, then breaks -- as a crash mid-run would."""
    eal = ["--no-huge"]
    info = {"dpdk": "DPDK 22.11.0", "tsc_pair_cyc": 50, "mempool_ops": "ring_mp_mc"}

    def __init__(self, good):
        self.good = good
        self.calls = 0

    def label(self):
        return "fake DPDK"

    def core(self, case, burst, nchunks, chunk, drop, reps=1):
        self.calls += 1
        if self.calls > self.good:
            raise DpdkFailed("DPDK reference exited (exit status -11)")
        return {"samples_cyc": [10.0], "kept": 1, "dropped": 0}

    def check(self):
        pass


def test_a_reference_failing_mid_run_leaves_no_dpdk_figure(bench):
    ref = _FlakyRef(good=3)              # flat: warm-up + 1; raw: warm-up, then it breaks
    dpdk = R.dpdk_ok(ref)
    rows = C.measure(bench, ref, dpdk, [K.CASE["flat"], K.CASE["raw"]], [32], 1, 2000,
                     progress=lambda m: None)
    assert dpdk["status"] == "failed" and "exit status -11" in dpdk["message"]
    assert [r["case"] for r in rows] == ["flat", "raw"]
    assert all(r["dpdk"] is None and r["ratio"] is None for r in rows)
    assert all(r["pktbuf"]["median"] > 0 for r in rows)
    bench.audit()


def test_samples_alternate_and_are_all_kept(bench):
    ref = _FlakyRef(good=10 ** 6)
    dpdk = R.dpdk_ok(ref)
    row = C.measure_case(bench, ref, K.CASE["alternating"], 32, 3, 2000)
    assert ref.calls == 1 + 3                        # one warm-up, then one per repetition
    assert len(row["pktbuf"]["samples"]) == len(row["pktbuf_staged"]["samples"]) == 3
    assert row["dpdk"]["samples"] == [pytest.approx(10.0 * 1e9 / bench.hz, rel=1e-3)] * 3
    assert row["ratio"] == pytest.approx(row["pktbuf"]["median"] / row["dpdk"]["median"])
    assert dpdk["status"] == "ok"


def test_the_cli_fails_when_every_interval_is_dropped(monkeypatch, capsys):
    monkeypatch.setattr(K, "DROP_US", 0.0)           # every timed call counts as preempted
    assert C.main(["--cases", "flat", "--bursts", "32"]) == 1
    err = capsys.readouterr().err
    assert re.search(r"pktbuf bench core: flat burst 32: all \d+ timed intervals .* dropped", err), err


def test_chunking_arithmetic():
    hz = 2e9                                           # 4 us = 8000 cycles, 20 us = 40000
    assert K.chunking(100.0, hz) == (80, 40000)        # 80 iterations of 100 cycles
    assert K.chunking(5000.0, hz) == (1, 40000)
    assert K.chunking(1e5, hz) == (1, 400000)          # a 50 us iteration: dropped past 4 of them
    assert K.chunking(0.0, hz)[0] == 8000              # never divides by zero


@pytest.mark.parametrize("case", ["roundtrip", "flat", "single", "raw"])
def test_timing_is_the_same_work_as_asked(bench, case):
    t = bench.timing(case, 32, 40_000)
    iters = K.loop_iters(case, 32, bench.effective_units(40_000))
    if case in K.LAYOUTS:
        assert (t.chunk, t.nchunks, t.drop_cyc) == (1, iters, bench.drop_cyc)
    else:
        assert t.chunk >= 1 and t.nchunks == max(1, iters // t.chunk)
        assert t.nchunks * t.chunk <= iters < (t.nchunks + 1) * t.chunk
        assert t.drop_cyc >= bench.drop_cyc
    assert bench.timing(case, 32, 40_000) == t         # calibrated once per case and burst
    s = bench.sample(case, 32, timing=t)
    assert s.kept + s.dropped == t.nchunks
