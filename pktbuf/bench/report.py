"""``pktbuf bench core``: the core figures as a table, with progress while it runs."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np

# DPDK 22.11's own C code on this machine kind (pool 8192, cache 256, data room 2176, no
# hugepages), as given in the core-engine issue; `--dpdk` measures them again live.
DPDK_REF = {("roundtrip", 32): 10.5, ("roundtrip", 256): 12.2, ("flat", 32): 2.8,
            ("flat", 256): 4.1, ("alternating", 32): 4.6, ("chain2", 32): 11.5,
            ("raw", 32): 0.46}

CASES = [("roundtrip", "alloc_bulk + free_bulk round trip", "ns/mbuf"),
         ("flat", "free_bulk alone, flat (1 pool)", "ns/mbuf"),
         ("grouped", "free_bulk, 2 pools grouped", "ns/mbuf"),
         ("alternating", "free_bulk, 2 pools alternating", "ns/mbuf"),
         ("shared", "free_bulk, 1 shared mbuf per burst", "ns/mbuf"),
         ("chain2", "free_bulk, 2-segment chains", "ns/chain")]

_FIRST = ("import time; t=time.perf_counter(); import pktbuf; "
          "p=pktbuf.PktmbufPool(8192, 256); p.free_bulk(p.alloc_bulk(32)); "
          "print(time.perf_counter()-t)")


def _progress(msg):
    sys.stderr.write(f"\r\033[K{msg}")
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


def facade_pair_us(n: int = 20000) -> float:
    """Facade alloc_bulk(32) + free_bulk from plain Python: microseconds per pair (median of 5)."""
    import pktbuf
    pool = pktbuf.PktmbufPool(8192, 256, name="bench_facade")
    out = np.empty(32, np.int32)

    def pair():
        pool.free_bulk(pool.alloc_bulk(32, out=out))

    pair()
    runs = sorted(timeit.timeit(pair, number=n) / n * 1e6 for _ in range(5))
    pool.close(force=True)
    return runs[2]


def dpdk_live(tool: str) -> dict:
    """Run DPDK's reference benchmark and parse its medians: {(case, burst): ns}."""
    names = {"1 alloc_bulk+free_bulk": "roundtrip", "2 free_bulk only": "flat",
             "3 free_bulk mixed": "alternating", "3b free_bulk 2 pools": "grouped",
             "4 free_bulk 1 mbuf": "shared", "5 free_bulk 2-seg": "chain2",
             "6 pktmbuf_alloc+free": "single",
             "7 mempool get_bulk": "raw"}
    out = subprocess.run([tool, "mbuf"], capture_output=True, text=True, timeout=1800)
    ref = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^(.*?)\s+b=(\d+)\s+([\d.]+)\s+([\d.]+)", line)
        if not m:
            continue
        for prefix, case in names.items():
            if m.group(1).startswith(prefix):
                ref[(case, int(m.group(2)))] = float(m.group(4))
    return ref


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="pktbuf bench core",
                                 description="Core mbuf/mempool figures, in-JIT, ns per unit.")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and bursts")
    ap.add_argument("--bursts", type=int, nargs="*", default=None)
    ap.add_argument("--cold", action="store_true", help="also time a cold-cache first burst")
    ap.add_argument("--dpdk", metavar="TOOL", default=None,
                    help="run DPDK's reference (shared/tools/dpdk-reference/run) for live comparison lines")
    a = ap.parse_args(argv)
    from .core import CoreBench
    bursts = a.bursts or ([32, 256] if a.quick else [1, 32, 64, 128, 256])
    reps = 3 if a.quick else 7
    units = 100_000 if a.quick else 400_000
    t0 = time.perf_counter()
    _progress("compiling / loading the benchmark loops ...")
    b = CoreBench()
    ref = dict(DPDK_REF)
    ref_src = "issue figures"
    if a.dpdk:
        _progress("running DPDK's reference benchmark (a few minutes) ...")
        live = dpdk_live(a.dpdk)
        if live:
            ref, ref_src = live, "measured now"
    rows = []
    for case, label, unit in CASES:
        for n in bursts:
            if n < 2 and case in ("grouped", "alternating"):
                continue
            _progress(f"{label}, burst {n} ...")
            run, staged = [], []
            for _ in range(reps):
                run.append(b.run(case, n, False, units))
                staged.append(b.run(case, n, True, units))
            run.sort()
            staged.sort()
            r, s = run[len(run) // 2], staged[len(staged) // 2]
            rows.append((label, n, r, s, s / r, ref.get((case, n)), unit))
    extra = []
    for n in bursts:
        _progress(f"single alloc/free and raw mempool, burst {n} ...")
        extra.append(("pktmbuf_alloc + free, one at a time", n, b.median("single", n, reps=reps,
                                                                        units=units),
                      ref.get(("single", n)), "ns/mbuf"))
        extra.append(("mempool get_bulk + put_bulk (raw)", n, b.median("raw", n, reps=reps,
                                                                     units=units),
                      ref.get(("raw", n)), "ns/obj"))
    b.close()
    _progress("facade overhead ...")
    fac = facade_pair_us(5000 if a.quick else 20000)
    _progress("import + first burst in a fresh interpreter ...")
    warm = sorted(first_burst_seconds() for _ in range(3))[1]
    cold = first_burst_seconds(cold=True) if a.cold else None
    _progress("")
    sys.stderr.write("\r\033[K")

    w = 40
    print(f"pktbuf core: pools of 8192 mbufs, cache 256, data room 2176; median of {reps}; "
          f"DPDK 22.11 column: {ref_src}")
    print(f"{'case':<{w}} {'burst':>5} {'run-grouped':>11} {'staged':>8} {'staged/run':>10} "
          f"{'DPDK':>7}  unit")
    for label, n, r, s, ratio, d, unit in rows:
        ds = f"{d:7.2f}" if d else "      -"
        print(f"{label:<{w}} {n:>5} {r:>11.2f} {s:>8.2f} {ratio:>10.2f} {ds}  {unit}")
    for label, n, v, d, unit in extra:
        ds = f"{d:7.2f}" if d else "      -"
        print(f"{label:<{w}} {n:>5} {v:>11.2f} {'':>8} {'':>10} {ds}  {unit}")
    print(f"{'facade alloc_bulk(32) + free_bulk':<{w}} {'':>5} {fac:>11.2f}"
          f"{'':>30}  us/pair (target <= 3)")
    print(f"{'import + first burst, warm cache':<{w}} {'':>5} {warm:>11.2f}"
          f"{'':>30}  s (target <= 1.5)")
    if cold is not None:
        print(f"{'import + first burst, cold cache':<{w}} {'':>5} {cold:>11.2f}{'':>30}  s")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0
