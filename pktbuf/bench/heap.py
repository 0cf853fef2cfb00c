"""Heap benchmark: malloc + free pairs per size, 1 and 2 threads, zero outside vs inside the lock.

``pktbuf bench heap`` runs :func:`main`; ``asv_bench/benchmarks/heap.py`` uses the same loops.
Every loop runs inside one nogil kernel call, never one Python call per pair.  Figures:

* one thread: ns per pair, the median over TSC-timed chunks of a few microseconds (a chunk
  that was preempted is an outlier the median ignores);
* two threads (two kernel calls on one heap, released together by a gate in the kernel): ns per
  pair per thread = wall / pairs of one thread, aggregate Mpairs/s = all pairs / wall -- medians
  over the *clean* runs, those in which every thread had its CPU >= 90 % of its running time
  (on this shared 2-core machine another process often holds one; such a run measures the
  scheduler, not the heap);
* zero-outside / zero-inside aggregate throughput ratio with two threads (the seed idea's claim),
  runs of the two variants interleaved;
* 1 MiB pair / 1 MiB memset, one thread, alternating call by call (a free costs one memset).

With ``--dpdk``, DPDK 22.11's ``rte_malloc`` / ``rte_zmalloc`` + ``rte_free`` run the same pairs
in the DPDK reference program (:mod:`.dpdk_ref`), round by round alternating with pktbuf's
two heaps: the same chunk sizes, pair counts, runs and clean-run rule on every side.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import numpy as np

from .._jit import kernel
from ..atomics import compiler_barrier, fetch_add, load_acquire
from ..api.heap import Heap
from ..heap.kernels import heap_free, heap_malloc
from ..rawmem import memset
from . import results as R
from .outputs import add_output_args, check_output_args, recorded, write_outputs
from .tsc import tsc_begin, tsc_end, tsc_hz

SIZES = (64, 1024, 4096, 65536, 1 << 20)
# PKTBUF_BENCH_QUICK=1 (CI: "does every benchmark still run?"): short runs
QUICK = os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")
HEAP_BYTES = 64 << 20


@kernel
def malloc_free_pairs(heap, size, n, gate):
    """``n`` malloc + free pairs of ``size`` bytes; waits at ``gate`` (count, needed) first so
    that threads start together.  Returns the number of failed mallocs (0 expected)."""
    fetch_add(gate, 0, 1)
    while load_acquire(gate, 0) < gate[1]:
        pass
    fails = 0
    for _ in range(n):
        p = heap_malloc(heap, size, 0)
        if p < 0:
            fails += 1
            continue
        heap_free(heap, p)
    return fails


@kernel
def pair_chunks(heap, size, per_chunk, cyc):
    """One thread: ``cyc.size`` chunks of ``per_chunk`` malloc + free pairs, each chunk timed
    with the TSC.  Returns the number of failed mallocs."""
    fails = 0
    for c in range(cyc.size):
        t0 = tsc_begin()
        for _ in range(per_chunk):
            p = heap_malloc(heap, size, 0)
            if p < 0:
                fails += 1
                continue
            heap_free(heap, p)
        cyc[c] = tsc_end() - t0
    return fails


@kernel
def pair_vs_memset_chunks(heap, size, addr, cyc_pair, cyc_set):
    """Alternately time one malloc + free pair of ``size`` and one ``size`` memset at ``addr``."""
    fails = 0
    for c in range(cyc_pair.size):
        t0 = tsc_begin()
        p = heap_malloc(heap, size, 0)
        if p < 0:
            fails += 1
        else:
            heap_free(heap, p)
        t1 = tsc_end()
        memset(addr, 0, size)
        compiler_barrier()
        t2 = tsc_end()
        cyc_pair[c] = t1 - t0
        cyc_set[c] = t2 - t1
    return fails


def pairs_for(size: int, budget_s: float | None = None) -> int:
    """Pairs per timed call: about ``budget_s`` of work (a pair costs ~40 ns + the memset)."""
    if budget_s is None:
        budget_s = 0.002 if QUICK else 0.01
    per = 40e-9 + size / 100e9
    return max(50, int(budget_s / per))


def new_heap(zero_in_lock: bool) -> Heap:
    h = Heap(HEAP_BYTES, zero_in_lock=zero_in_lock)
    malloc_free_pairs(h.state, 64, 10, np.array([0, 1], np.int64))    # compile / warm
    return h


def run_pairs(heap: Heap, size: int, n: int, threads: int) -> tuple[float, float]:
    """``threads`` threads doing ``n`` pairs each on ``heap``: (wall seconds, CPU share).

    The share is the smallest, over the threads, of a thread's CPU time / its own elapsed time:
    below ~0.9 that thread was descheduled for part of its run (another process had its CPU),
    and the run says little about how the heap scales: it is not *clean*, and the two-thread
    figures leave it out (the DPDK reference program's two lcores are judged by the same rule).
    (A thread that simply finishes first is not penalised.)
    """
    gate = np.array([0, threads], np.int64)
    res = [0] * threads
    share = [0.0] * threads

    def run(i):
        c0 = time.thread_time()
        w0 = time.perf_counter()
        res[i] = malloc_free_pairs(heap.state, size, n, gate)
        w1 = time.perf_counter()
        share[i] = (time.thread_time() - c0) / max(w1 - w0, 1e-9)

    if threads == 1:
        t0 = time.perf_counter()
        run(0)
        dt = time.perf_counter() - t0
    else:
        ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.perf_counter() - t0
    if any(res):
        raise RuntimeError(f"{sum(res)} mallocs failed")
    return dt, min(share)


def time_pairs(heap: Heap, size: int, n: int, threads: int) -> float:
    """Wall seconds for ``threads`` threads doing ``n`` pairs each on ``heap``."""
    return run_pairs(heap, size, n, threads)[0]


CLEAN_SHARE = 0.9


def _median_clean(runs: list[tuple[float, float]]) -> tuple[float, int]:
    """Median wall time over the clean runs (all runs if fewer than 3 are clean), and how many
    were clean."""
    clean = [w for w, share in runs if share >= CLEAN_SHARE]
    pick = clean if len(clean) >= 3 else [w for w, _ in runs]
    return float(np.median(pick)), len(clean)


def _chunk(size: int) -> int:
    """Pairs per TSC-timed chunk: a few microseconds each."""
    return max(1, int(3e-6 / (30e-9 + size / 150e9)))


def measure_pair(heap: Heap, size: int, threads: int, repeat: int = 5) -> dict:
    """ns per pair per thread and aggregate Mpairs/s of one heap (see :func:`measure_variants`)."""
    f = measure_variants({"heap": pktbuf_variant(heap)}, size, threads, repeat)["heap"]
    return {"ns_per_pair": f["median"], "mpairs_s": f["mpairs_s"], "clean": f.get("clean"),
            "runs": f["chunks"] if threads == 1 else repeat}


class Variant:
    """One allocator under test.  ``chunks(size, per, k)``: one thread, ``k`` TSC-timed chunks
    of ``per`` pairs -> cycles per pair of each chunk; ``run(size, n)``: two threads, ``n``
    pairs each, started together -> (wall seconds, smaller CPU share)."""

    def __init__(self, chunks, run):
        self.chunks, self.run = chunks, run


def pktbuf_variant(heap: Heap) -> Variant:
    def chunks(size, per, k):
        cyc = np.zeros(k, np.uint64)
        if pair_chunks(heap.state, size, per, cyc):
            raise RuntimeError("mallocs failed")
        return cyc.astype(np.float64) / per

    return Variant(chunks, lambda size, n: run_pairs(heap, size, n, 2))


def dpdk_variant(ref, kind: str) -> Variant:
    """``rte_malloc`` (kind "malloc") or ``rte_zmalloc`` ("zmalloc") + ``rte_free``."""
    def chunks(size, per, k):
        return np.asarray(ref.heap1(kind, size, per, k)["samples_cyc"], np.float64)

    def run(size, n):
        r = ref.heap2(kind, size, n, 1)
        return r["wall_ns"][0] / 1e9, r["share"][0]

    return Variant(chunks, run)


def measure_variants(variants: dict, size: int, threads: int, repeat: int = 5) -> dict:
    """Every variant measured in ``repeat`` rounds, alternating (the order reversed every other
    round), after one discarded warm-up round: {name: figure}.

    One thread: ``max(20, repeat * pairs_for(size) // chunk)`` chunks in all, spread over the
    rounds; the figure is the median over all chunks (a preempted chunk is an outlier), its
    samples the per-round medians.  Two threads: one run per round; the figure is the median
    over the clean runs (every thread had its CPU >= ``CLEAN_SHARE`` of its time), or over all
    runs when fewer than 3 were clean.
    """
    n = pairs_for(size)
    ns_per_cyc = 1e9 / tsc_hz()
    names = list(variants)
    got = {k: [] for k in names}
    if threads == 1:
        per = _chunk(size)
        k = -(-max(20, repeat * n // per) // repeat)
        for r in range(repeat + 1):
            for name in (names if r % 2 == 0 else names[::-1]):
                c = variants[name].chunks(size, per, k)
                if r:                          # round 0 warms up
                    got[name].append(c)
        out = {}
        for name, rounds in got.items():
            ns = float(np.median(np.concatenate(rounds))) * ns_per_cyc
            out[name] = R.figure([float(np.median(c)) * ns_per_cyc for c in rounds],
                                 chunks=k * repeat, per_chunk=per, mpairs_s=1e3 / ns)
            out[name]["median"] = ns
        return out
    if threads != 2:
        raise ValueError("threads must be 1 or 2")
    for r in range(repeat + 1):
        for name in (names if r % 2 == 0 else names[::-1]):
            w = variants[name].run(size, n)
            if r:
                got[name].append(w)
    out = {}
    for name, runs in got.items():
        wall, clean = _median_clean(runs)
        out[name] = R.figure([w / n * 1e9 for w, _ in runs], clean=clean, runs=repeat,
                             pairs=n, mpairs_s=2 * n / wall / 1e6,
                             share=[round(s, 3) for _, s in runs])
        out[name]["median"] = wall / n * 1e9
    return out


def measure_zero_ratio(size: int, threads: int = 2, repeat: int = 5,
                       heaps: dict | None = None, pause: float = 0.0) -> dict:
    """Aggregate throughput, zero outside / inside the lock, runs interleaved (same sitting);
    medians over clean runs.  ``pause`` seconds between rounds spread the runs over a longer
    window, so that some land where the machine is quiet."""
    heaps = heaps or {z: new_heap(z) for z in (False, True)}
    n = pairs_for(size)
    runs = {False: [], True: []}
    for i in range(repeat):
        if pause and i:
            time.sleep(pause)
        for z in (False, True):
            runs[z].append(run_pairs(heaps[z], size, n, threads))
    med = {z: _median_clean(r) for z, r in runs.items()}
    out = {z: threads * n / m[0] / 1e6 for z, m in med.items()}
    return {"outside_mpairs_s": out[False], "inside_mpairs_s": out[True],
            "ratio": out[False] / out[True], "clean": min(m[1] for m in med.values()),
            "runs": repeat}


def measure_vs_memset(size: int = 1 << 20, repeat: int = 5, heap: Heap | None = None) -> dict:
    """One thread: a ``size`` malloc + free pair against a ``size`` memset, alternating call by
    call inside one kernel, each timed with the TSC; medians."""
    heap = heap or new_heap(False)
    n = max(50, repeat * pairs_for(size, 0.002))
    buf = np.zeros(size + 64, np.uint8)
    addr = (buf.ctypes.data + 63) // 64 * 64
    cp = np.zeros(n, np.uint64)
    cs = np.zeros(n, np.uint64)
    pair_vs_memset_chunks(heap.state, size, addr, cp[:2], cs[:2])        # compile / warm
    if pair_vs_memset_chunks(heap.state, size, addr, cp, cs):
        raise RuntimeError("mallocs failed")
    k = 1e9 / tsc_hz()
    p, m = float(np.median(cp)) * k, float(np.median(cs)) * k
    return {"pair_ns": p, "memset_ns": m, "ratio": p / m}


VARIANTS = ("pktbuf_outside", "pktbuf_inside", "dpdk_malloc", "dpdk_zmalloc")


def print_table(doc: dict, out=None) -> None:
    p = lambda s="": print(s, file=out or sys.stdout)   # noqa: E731
    from .report import dpdk_line
    m = doc["method"]
    has = doc["dpdk"]["status"] == "ok"
    p(f"\nheap malloc+free pairs.  1 thread: median of TSC-timed chunks.  2 threads: median of the"
      f" clean runs of {m['runs']}\n(every thread had its CPU >= {m['clean_share']:.0%} of the time;"
      f" '*' = fewer than 3 clean, median of all runs)")
    p(dpdk_line(doc["dpdk"]))
    if has:
        p("(rte_malloc runs on ordinary memory here (--no-huge); production runs on hugepages)")
    p(f"{'size':>9} {'thr':>3} {'zero':>8} {'ns/pair/thr':>12} {'Mpairs/s':>9} {'clean':>6}"
      + (f" {'rte_malloc':>10} {'rte_zmalloc':>11} {'pktbuf/rte_malloc':>17}" if has else ""))
    for r in doc["rows"]:
        dm, dz = r.get("dpdk_malloc"), r.get("dpdk_zmalloc")
        for z in ("outside", "inside"):
            f = r[f"pktbuf_{z}"]
            if r["threads"] == 1:       # one thread: TSC-timed chunks
                clean = f"{'tsc':>6}"
            else:
                clean = f"{f['clean']:>5}{'' if f['clean'] >= 3 else '*':1}"
            line = (f"{r['size']:>9} {r['threads']:>3} {z:>8} {f['median']:>12.1f} "
                    f"{f['mpairs_s']:>9.3f} {clean}")
            if has:
                ratio = R.ratio(f, dm)
                line += (f" {_num(dm, 10)} {_num(dz, 11)} "
                         + (f"{ratio:>17.2f}" if ratio is not None else f"{'-':>17}"))
            p(line)
    for e in doc["extras"]:
        tgt = f"  (target {e['target']})" if e.get("target") else ""
        p(f"{e['name']:<52} {e['value']:>6.2f} {e['unit']}{tgt}")


def _num(fig, w):
    return f"{fig['median']:>{w}.1f}" if fig else f"{'-':>{w}}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="pktbuf bench heap", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="comma-separated block sizes in bytes (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=11, help="runs per figure; medians are shown")
    ap.add_argument("--quick", action="store_true", help="3 runs per figure")
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds between the two-thread outside/inside rounds: with a large "
                         "--repeat, samples a busy machine over a long window for clean runs")
    ap.add_argument("--dpdk", action="store_true",
                    help="also measure DPDK 22.11's rte_malloc/rte_zmalloc + rte_free, "
                         "alternating with pktbuf (needs gcc and pkg-config libdpdk)")
    add_output_args(ap, "heap")
    args = ap.parse_args(argv)
    repeat = 3 if (args.quick or QUICK) else max(1, args.repeat)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        ap.error("--sizes must be integers")
    if not sizes or min(sizes) < 1:
        ap.error("--sizes must be positive")
    check_output_args(ap, args)
    doc = recorded(ap, args, "heap")
    if doc is not None:
        print_table(doc)
        return write_outputs(doc, args)

    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    from .dpdk_ref import DpdkFailed
    from .report import open_dpdk
    t0 = time.perf_counter()
    progress("compiling / warming ...")
    heaps = {z: new_heap(z) for z in (False, True)}
    machine = R.machine_info(tsc_hz())
    ref, dpdk = open_dpdk(args.dpdk, lcores=2)
    rows = []
    try:
        for size in sizes:
            for threads in (1, 2):
                progress(f"  size {size:>8} B, {threads} thread(s)")
                variants = {"pktbuf_outside": pktbuf_variant(heaps[False]),
                            "pktbuf_inside": pktbuf_variant(heaps[True])}
                if ref is not None:
                    variants["dpdk_malloc"] = dpdk_variant(ref, "malloc")
                    variants["dpdk_zmalloc"] = dpdk_variant(ref, "zmalloc")
                try:
                    figs = measure_variants(variants, size, threads, repeat)
                except DpdkFailed as e:
                    dpdk.update(status="failed", message=str(e))
                    ref = None
                    figs = measure_variants({k: variants[k] for k in list(variants)[:2]},
                                            size, threads, repeat)
                row = {"size": size, "threads": threads, "pairs": pairs_for(size)}
                row.update({k: figs.get(k) for k in VARIANTS})
                row["ratio"] = R.ratio(row["pktbuf_outside"], row["dpdk_malloc"])
                row["ratio_inside"] = R.ratio(row["pktbuf_inside"], row["dpdk_malloc"])
                rows.append(row)
    finally:
        if ref is not None:
            ref.close()
    if dpdk["status"] != "ok":
        for r in rows:
            r["dpdk_malloc"] = r["dpdk_zmalloc"] = r["ratio"] = r["ratio_inside"] = None
    progress("  outside/inside ratios (2 threads, interleaved) ...")
    extras = []
    for s in sizes:
        z = measure_zero_ratio(s, 2, repeat, heaps, max(0.0, args.pause))
        extras.append({"name": f"zero outside / inside the lock, 2 threads, {s} B",
                       "value": z["ratio"], "unit": f"x aggregate pairs/s (clean {z['clean']}/{z['runs']})",
                       "target": ">= 1.4 at 64 KiB - 1 MiB"})
    progress("  1 MiB pair vs 1 MiB memset ...")
    vm = measure_vs_memset(1 << 20, 2 * repeat + 1, heaps[False])
    extras.append({"name": "1 MiB pair / 1 MiB memset, 1 thread", "value": vm["ratio"],
                   "unit": f"x ({vm['pair_ns'] / 1e3:.2f} vs {vm['memset_ns'] / 1e3:.2f} us)",
                   "target": "<= 1.2"})
    for h in heaps.values():
        h.close()
    method = {"runs": repeat, "clean_share": CLEAN_SHARE, "heap_bytes": HEAP_BYTES,
              "chunk_us": 3.0, "pair_budget_s": 0.002 if QUICK else 0.01, "warmup_rounds": 1,
              "tsc_hz": round(tsc_hz()), "interleaved": True,
              "seconds": round(time.perf_counter() - t0, 1)}
    doc = R.document("heap", argv, machine, method, dpdk, rows, extras)
    print_table(doc)
    rc = write_outputs(doc, args)
    return rc or (1 if dpdk["status"] == "failed" else 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
