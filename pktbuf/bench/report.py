"""``pktbuf bench core``: pktbuf's core cases beside DPDK's, as a table, JSON, a chart, a report.

With ``--dpdk`` the DPDK reference program (:mod:`.dpdk_ref`) runs in the same sitting, and
for every case and burst the samples alternate: pktbuf run-grouped, pktbuf staged, DPDK, then
the other way round, so that whatever else the machine does hits all of them.  Each side does
the same work per sample (the same iterations), times it the same way and is reduced by the same
code; the figure is the median of ``--reps`` samples after one discarded warm-up sample each.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np

from . import results as R
from .outputs import add_output_args, check_output_args, recorded, write_outputs

_FIRST = ("import time; t=time.perf_counter(); import pktbuf; "
          "p=pktbuf.PktmbufPool(8192, 256); p.free_bulk(p.alloc_bulk(32)); "
          "print(time.perf_counter()-t)")
EXTRAS = ("facade", "first_burst")


def _progress(msg):
    if sys.stderr.isatty():
        sys.stderr.write(f"\r\033[K{msg}")
    elif msg:
        sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def first_burst_seconds(cold: bool = False) -> float:
    """import pktbuf + first burst in a fresh interpreter (cold: with an empty Numba cache)."""
    env = dict(os.environ)
    tmp = None
    if cold:
        tmp = tempfile.mkdtemp(prefix="pktbuf-cold-")
        env["NUMBA_CACHE_DIR"] = tmp
    out = subprocess.run([sys.executable, "-c", _FIRST], capture_output=True, text=True,
                         env=env, timeout=900, check=True)
    if tmp:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return float(out.stdout.strip().splitlines()[-1])


def facade_pair_us(n: int = 20000) -> tuple[float, float]:
    """Facade alloc_bulk(32) + free_bulk from plain Python, and the floor beside it -- two
    empty compiled calls through the same entry mechanism with the same argument shape (the
    domain's address and other ints, an int32 array): microseconds per pair, each the median of 5 runs, the two
    interleaved."""
    import pktbuf
    from ..buf.domain.entry import fast_floor
    pool = pktbuf.PktmbufPool(8192, 256, name="bench_facade")
    out = np.empty(32, np.int32)
    dom = pool.domain.state.address

    def pair():
        pool.free_bulk(pool.alloc_bulk(32, out=out))

    def floor():
        fast_floor(dom, 0, out, 32)
        fast_floor(dom, 0, out, 32)

    pair()
    floor()
    runs, floors = [], []
    for _ in range(5):
        runs.append(timeit.timeit(pair, number=n) / n * 1e6)
        floors.append(timeit.timeit(floor, number=n) / n * 1e6)
    pool.close(force=True)
    return sorted(runs)[2], sorted(floors)[2]


def open_dpdk(requested: bool, lcores: int = 2):
    """(reference or None, the document's "dpdk" entry)."""
    from . import dpdk_ref
    if not requested:
        return None, R.dpdk_off()
    try:
        ref = dpdk_ref.start(lcores)
    except dpdk_ref.DpdkMissing as e:
        return None, R.dpdk_missing(str(e))
    except dpdk_ref.DpdkFailed as e:
        return None, R.dpdk_failed(str(e))
    return ref, R.dpdk_ok(ref)


def _dpdk_drop(ref, case, burst: int, t):
    """``t`` with a drop threshold that also fits DPDK's loop.  The chunking is calibrated on
    pktbuf's loop (both sides run the same chunks), and the threshold is four chunks' time when
    that exceeds DROP_US; where DPDK's iteration is several times slower, its every chunk would
    pass that threshold and be dropped.  The threshold becomes four chunks of the slower side."""
    from .core import CAL_ITERS, NEVER, Timing
    cal = ref.core(case.dpdk, burst, 8, max(1, CAL_ITERS // max(burst, 1)), NEVER, 3)
    iter_cyc = min(cal["samples_cyc"]) * burst
    return Timing(t.chunk, t.nchunks, max(t.drop_cyc, int(4 * t.chunk * iter_cyc)))


def measure_case(bench, ref, case, burst: int, reps: int, units: int) -> dict:
    """One row: pktbuf (and staged) and DPDK samples, alternating; warm-up sample discarded.
    Both sides get the same :class:`~.core.Timing` (iterations, chunking, drop threshold)."""
    from .core import Sample
    t = bench.timing(case.name, burst, units)
    if ref is not None and case.dpdk and t.chunk > 1:
        t = _dpdk_drop(ref, case, burst, t)
    ns_per_cyc = 1e9 / bench.hz
    variants = [("pktbuf", lambda: bench.sample(case.name, burst, False, timing=t))]
    if case.staged:
        variants.append(("pktbuf_staged", lambda: bench.sample(case.name, burst, True, timing=t)))
    if ref is not None and case.dpdk:
        def dpdk_sample():
            r = ref.core(case.dpdk, burst, t.nchunks, t.chunk, t.drop_cyc, 1)
            return Sample(r["samples_cyc"][0] * ns_per_cyc, r["kept"], r["dropped"])
        variants.append(("dpdk", dpdk_sample))
    for _, f in variants:
        f()                                   # warm-up, on both sides alike
    got = {k: [] for k, _ in variants}
    for rep in range(reps):
        for k, f in (variants if rep % 2 == 0 else variants[::-1]):
            got[k].append(f())
    row = {"case": case.name, "label": case.label, "unit": case.unit, "burst": burst,
           "chunk": t.chunk, "intervals": t.nchunks,
           "drop_us": round(t.drop_cyc * ns_per_cyc / 1e3, 3)}
    for k in ("pktbuf", "pktbuf_staged", "dpdk"):
        s = got.get(k)
        row[k] = R.figure([x.ns for x in s], sum(x.kept for x in s),
                          sum(x.dropped for x in s)) if s else None
    row["staged_over_run"] = R.ratio(row["pktbuf_staged"], row["pktbuf"])
    row["ratio"] = R.ratio(row["pktbuf"], row["dpdk"])
    return row


def measure(bench, ref, dpdk: dict, cases, bursts, reps, units, progress=_progress) -> list:
    """Every row; a reference that fails part-way is closed, ``dpdk`` marked failed and every
    DPDK figure removed (a half-filled column would compare different sittings)."""
    from .dpdk_ref import DpdkFailed
    rows = []
    for case in cases:
        for n in bursts:
            if not case.fits(n):
                continue
            progress(f"{case.label.strip()}, burst {n} ...")
            try:
                rows.append(measure_case(bench, ref, case, n, reps, units))
            except DpdkFailed as e:
                dpdk.update(status="failed", message=str(e))
                ref = None
                rows.append(measure_case(bench, None, case, n, reps, units))
        bench.audit()
        if ref is not None:
            try:
                ref.check()
            except DpdkFailed as e:
                dpdk.update(status="failed", message=str(e))
                ref = None
    if dpdk["status"] != "ok":
        for r in rows:
            r["dpdk"] = r["ratio"] = None
    return rows


def dpdk_line(dpdk: dict) -> str:
    st = dpdk["status"]
    if st == "ok":
        return f"DPDK column: {dpdk['label']}"
    if st == "failed":
        return f"DPDK reference FAILED, no DPDK column: {dpdk['message']}"
    if st == "missing":
        return f"No DPDK column: {dpdk['message']}"
    return "No DPDK column (pass --dpdk to measure DPDK 22.11 in the same run)"


def _num(v, w, fmt=".2f"):
    return f"{v:>{w}{fmt}}" if v is not None else f"{'-':>{w}}"


def print_table(doc: dict, out=None) -> None:
    out = out or sys.stdout
    m, dpdk = doc["method"], doc["dpdk"]
    has = dpdk["status"] == "ok"
    p = lambda s="": print(s, file=out)   # noqa: E731
    p(f"pktbuf core: pools of {m['pool_n']} mbufs, cache {m['cache']}, data room {m['dataroom']}; "
      f"median of {m['reps']} samples of ~{m['units']} units each"
      + (", alternating with DPDK's" if has else ""))
    p(dpdk_line(dpdk))
    w = 38
    head = f"{'case':<{w}} {'burst':>5} {'pktbuf':>8} {'staged':>8} {'stg/run':>7}"
    if has:
        head += f" {'DPDK':>8} {'pktbuf/DPDK':>11}"
    p(head + f" {'dropped':>9}  unit")
    for r in doc["rows"]:
        pk, st, dp = r["pktbuf"], r["pktbuf_staged"], r["dpdk"]
        line = (f"{r['label']:<{w}} {r['burst']:>5} {_num(pk['median'], 8)} "
                f"{_num(st and st['median'], 8)} {_num(r['staged_over_run'], 7)}")
        drops = f"{pk.get('dropped', 0)}"
        if has:
            line += f" {_num(dp and dp['median'], 8)} {_num(r['ratio'], 11)}"
            drops += f"/{dp.get('dropped', 0)}" if dp else "/-"
        p(line + f" {drops:>9}  {r['unit']}")
    if doc["rows"]:
        p(f"(dropped: timed intervals longer than {m['drop_us']:g} us -- or four chunks' time -- "
          "left out as preempted" + ("; pktbuf/DPDK" if has else "") + ")")
    for e in doc["extras"]:
        tgt = f"  (target {e['target']})" if e.get("target") else ""
        p(f"{e['name']:<{w}} {'':>5} {e['value']:>8.2f}  {e['unit']}{tgt}")
        if e.get("floor") is not None:
            p(f"{'  floor: two empty compiled calls':<{w}} {'':>5} {e['floor']:>8.2f}  {e['unit']}")
    if has and doc["targets"]:
        p("pktbuf / DPDK, the tracked ratios:")
        for t in doc["targets"]:
            p(f"  {t['title']:<46} {_num(t['ratio'], 6)}")


def main(argv=None) -> int:
    import argparse
    from ..errors import cli_number
    argv = sys.argv[1:] if argv is None else list(argv)
    from .core import (BURSTS, CACHE, CASE, CASES, CHUNK_NS, DATAROOM, DROP_US, MAX_BURST, POOL_N,
                       QUICK, UNITS)
    ap = argparse.ArgumentParser(
        prog="pktbuf bench core",
        description="Core buf/mbuf/mempool cases, timed inside Numba: ns per unit; with --dpdk "
                    "beside DPDK 22.11's own calls measured in the same run.")
    ap.add_argument("--quick", action="store_true", help="3 samples of 100000 units, bursts 32 and 256")
    ap.add_argument("--bursts", type=cli_number(int, 1, MAX_BURST), nargs="+", default=None, metavar="N",
                    help=f"burst sizes (default: {' '.join(map(str, BURSTS))})")
    ap.add_argument("--cases", default=None,
                    help="comma-separated subset of: " + ", ".join([c.name for c in CASES] + list(EXTRAS)))
    ap.add_argument("--reps", type=cli_number(int, 1, 10**6), default=None, help="samples per figure (default 7; --quick 3)")
    ap.add_argument("--units", type=cli_number(int, 1, 10**12), default=None,
                    help=f"units of work per sample (default {UNITS}; --quick 100000)")
    ap.add_argument("--cold", action="store_true", help="also time a cold-cache first burst")
    ap.add_argument("--dpdk", action="store_true",
                    help="build and run the DPDK 22.11 reference (needs gcc and pkg-config libdpdk)")
    add_output_args(ap, "core")
    a = ap.parse_args(argv)
    names = [c.name for c in CASES] + list(EXTRAS)
    chosen = a.cases.split(",") if a.cases else names
    bad = [c for c in chosen if c not in names]
    if bad:
        ap.error(f"unknown case(s) {', '.join(bad)}; choose from {', '.join(names)}")
    bursts = a.bursts or ([32, 256] if a.quick else list(BURSTS))
    if min(bursts) < 1 or max(bursts) > MAX_BURST:
        ap.error(f"bursts must be 1..{MAX_BURST}")
    reps = a.reps or (3 if a.quick else 7)
    if QUICK:
        reps = 1
    units = a.units or (100_000 if a.quick else UNITS)
    if reps < 1 or units < 1:
        ap.error("--reps and --units must be positive")
    check_output_args(ap, a)
    doc = recorded(ap, a, "core")
    if doc is not None:
        print_table(doc)
        return write_outputs(doc, a)

    from .core import BenchError, CoreBench
    t0 = time.perf_counter()
    _progress("compiling / loading the benchmark loops ...")
    bench = CoreBench()
    machine = R.machine_info(bench.hz)
    ref, dpdk = open_dpdk(a.dpdk, lcores=1)
    try:
        rows = measure(bench, ref, dpdk, [CASE[c] for c in names if c in chosen and c in CASE],
                       bursts, reps, units)
    except BenchError as e:
        _progress("")
        print(f"pktbuf bench core: {e}", file=sys.stderr)
        return 1
    finally:
        if ref is not None:
            ref.close()
        bench.close()
    extras = []
    if "facade" in chosen:
        _progress("facade overhead ...")
        pair, floor = facade_pair_us(5000 if (a.quick or QUICK) else 20000)
        extras.append({"name": "facade alloc_bulk(32) + free_bulk", "unit": "us/pair",
                       "value": pair, "target": "<= 2", "floor": floor})
    if "first_burst" in chosen:
        _progress("import + first burst in a fresh interpreter ...")
        extras.append({"name": "import + first burst, warm cache", "unit": "s",
                       "value": R.median([first_burst_seconds() for _ in range(3)]),
                       "target": "<= 1.5"})
        if a.cold:
            extras.append({"name": "import + first burst, cold cache", "unit": "s",
                           "value": first_burst_seconds(cold=True), "target": None})
    _progress("")
    method = {"pool_n": POOL_N, "cache": CACHE, "dataroom": DATAROOM, "reps": reps,
              "units": bench.effective_units(units), "warmup_samples": 1, "drop_us": DROP_US,
              "chunk_ns": CHUNK_NS,
              "tsc_hz": round(bench.hz),
              "tsc_pair_cyc": {"pktbuf": bench.pair_cyc,
                               "dpdk": (dpdk.get("info") or {}).get("tsc_pair_cyc")},
              "interleaved": dpdk["status"] == "ok",
              "seconds": round(time.perf_counter() - t0, 1)}
    doc = R.document("core", argv, machine, method, dpdk, rows, extras,
                     R.core_targets(rows) if dpdk["status"] == "ok" else [])
    print_table(doc)
    print(f"({method['seconds']:.0f} s)")
    rc = write_outputs(doc, a)
    return rc or (1 if dpdk["status"] == "failed" else 0)
