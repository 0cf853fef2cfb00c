"""Heap benchmark: malloc + free pairs per size, 1 and 2 threads, three heaps, DPDK alongside.

Three heaps are compared: ``outside`` (the default heap, ``Heap()``: freed blocks zeroed outside
the lock, small ones kept in per-lcore caches), ``nocache`` (zeroed outside the lock, no caches:
the previous default, ``Heap(cache=False)``) and ``inside`` (zeroed inside the lock, no caches:
DPDK's placement, ``Heap(zero_in_lock=True)``).  Thread ``i`` calls the kernels as lcore ``i``.

``pktbuf bench heap`` runs :func:`main`; ``asv_bench/benchmarks/heap.py`` uses the same loops.
Every loop runs inside one nogil kernel call, never one Python call per pair.  Figures:

* one thread: ns per pair, the median over TSC-timed chunks of a few microseconds (a chunk
  that was preempted is an outlier the median ignores);
* two threads (two kernel calls on one heap, released together by a gate in the kernel): ns per
  pair per thread = wall / pairs of one thread, aggregate Mpairs/s = all pairs / wall -- medians
  over the *clean* runs, those in which every thread had its CPU >= 90 % of its running time
  (on this shared 2-core machine another process often holds one; such a run measures the
  scheduler, not the heap);
* outside / inside (the default heap over DPDK's placement: the A/B of the zeroing placement)
  and nocache / inside aggregate throughput ratios with two threads, runs of
  the variants interleaved (the order alternating round by round), with a 95 % bootstrap
  confidence interval over the rounds;
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

from ..errors import cli_list, cli_number
from .._jit import kernel
from ..atomics import compiler_barrier, fetch_add, load_acquire
from ..buf.heap.api import Heap
from ..buf.heap.kernels import heap_free, heap_lcore_free, heap_lcore_malloc, heap_malloc
from ..rawmem import memset
from . import results as R
from .outputs import add_output_args, check_output_args, recorded, write_outputs
from .tsc import tsc_begin, tsc_end, tsc_hz

SIZES = (64, 1024, 4096, 65536, 1 << 20)
# PKTBUF_BENCH_QUICK=1 (CI: "does every benchmark still run?"): short runs
QUICK = os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")
HEAP_BYTES = 64 << 20


@kernel
def malloc_free_pairs(heap, lcore, size, n, gate):
    """``n`` malloc + free pairs of ``size`` bytes as ``lcore``; waits at ``gate`` (count,
    needed) first so that threads start together.  Returns the number of failed mallocs (0
    expected)."""
    fetch_add(gate, 0, 1)
    while load_acquire(gate, 0) < gate[1]:
        pass
    fails = 0
    for _ in range(n):
        p = heap_lcore_malloc(heap, lcore, size, 0)
        if p < 0:
            fails += 1
            continue
        heap_lcore_free(heap, lcore, p)
    return fails


@kernel
def pair_chunks(heap, lcore, size, per_chunk, cyc):
    """One thread: ``cyc.size`` chunks of ``per_chunk`` malloc + free pairs, each chunk timed
    with the TSC.  Returns the number of failed mallocs."""
    fails = 0
    for c in range(cyc.size):
        t0 = tsc_begin()
        for _ in range(per_chunk):
            p = heap_lcore_malloc(heap, lcore, size, 0)
            if p < 0:
                fails += 1
                continue
            heap_lcore_free(heap, lcore, p)
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


KINDS = {"outside": {}, "nocache": {"cache": False}, "inside": {"zero_in_lock": True}}
ROW_KEY = {k: f"pktbuf_{k}" for k in KINDS}


def new_heap(kind="outside") -> Heap:
    """A heap of one of the ``KINDS`` (``True`` / ``False``: inside / nocache, the two heaps
    this function made before the caches)."""
    if kind is True or kind is False:
        kind = "inside" if kind else "nocache"
    h = Heap(HEAP_BYTES, **KINDS[kind])
    malloc_free_pairs(h.state, 0, 64, 10, np.array([0, 1], np.int64))    # compile / warm
    h.flush_cache()
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
        res[i] = malloc_free_pairs(heap.state, i, size, n, gate)
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
        if pair_chunks(heap.state, 0, size, per, cyc):
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


def ratio_ci(a: list, b: list, seed: int = 12) -> tuple[float, float, float]:
    """Ratio of the median throughputs of two interleaved series (``a[i]``, ``b[i]`` from one
    round) and its 95 % bootstrap interval: rounds resampled with replacement, 2000 times."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    r = float(np.median(a) / np.median(b))
    if a.size < 2:
        return r, r, r
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(2000, a.size))
    boot = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return r, float(lo), float(hi)


def measure_ab(size: int, repeat: int = 11, heaps: dict | None = None, pause: float = 0.0,
               threads: int = 2) -> dict:
    """Aggregate pairs/s of every heap in ``heaps`` (kind -> Heap; default: all ``KINDS``), one
    run each per round, the order reversed every other round, ``repeat`` rounds after one
    discarded warm-up round.  Returns {kind: [Mpairs/s per round]}, the clean-run counts, and
    the ratios outside / inside and nocache / inside with their 95 % intervals.  ``pause``
    seconds between rounds spread the runs over a longer window."""
    own = heaps is None
    heaps = heaps or {k: new_heap(k) for k in KINDS}
    n = pairs_for(size)
    names = list(heaps)
    tput = {k: [] for k in names}
    clean = {k: 0 for k in names}
    for r in range(repeat + 1):
        if pause and r:
            time.sleep(pause)
        for k in (names if r % 2 == 0 else names[::-1]):
            wall, share = run_pairs(heaps[k], size, n, threads)
            if r:
                tput[k].append(threads * n / wall / 1e6)
                clean[k] += share >= CLEAN_SHARE
    out = {"mpairs_s": tput, "clean": clean, "runs": repeat, "pairs": n}
    if "inside" in tput:
        for k in ("outside", "nocache"):
            if k in tput:
                out[f"{k}/inside"] = ratio_ci(tput[k], tput["inside"])
    if own:
        for h in heaps.values():
            h.close()
    return out


def measure_zero_ratio(size: int, threads: int = 2, repeat: int = 5,
                       heaps: dict | None = None, pause: float = 0.0) -> dict:
    """Aggregate throughput of the default heap (``outside``: zero outside the lock, lcore
    caches) over the inside-the-lock heap, interleaved runs (see :func:`measure_ab`); with
    ``heaps`` {False: ..., True: ...} (the old form) the first is the outside one."""
    if heaps is not None and set(heaps) == {False, True}:
        heaps = {"outside": heaps[False], "inside": heaps[True]}
    if heaps is None:
        heaps = {k: new_heap(k) for k in ("outside", "inside")}
    m = measure_ab(size, repeat, heaps, pause, threads)
    a = "outside"
    r, lo, hi = m[f"{a}/inside"]
    return {"outside_mpairs_s": float(np.median(m["mpairs_s"][a])),
            "inside_mpairs_s": float(np.median(m["mpairs_s"]["inside"])),
            "ratio": r, "ci": (lo, hi), "clean": min(m["clean"].values()), "runs": repeat}


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


VARIANTS = ("pktbuf_outside", "pktbuf_nocache", "pktbuf_inside", "dpdk_malloc", "dpdk_zmalloc")


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
    p("outside = the default heap: zero outside the lock + lcore caches (Heap()); nocache = no caches "
      "(Heap(cache=False)); inside = DPDK's placement (Heap(zero_in_lock=True))")
    p(f"{'size':>9} {'thr':>3} {'heap':>8} {'ns/pair/thr':>12} {'Mpairs/s':>9} {'clean':>6}"
      + (f" {'rte_malloc':>10} {'rte_zmalloc':>11} {'pktbuf/rte_malloc':>17}" if has else ""))
    for r in doc["rows"]:
        dm, dz = r.get("dpdk_malloc"), r.get("dpdk_zmalloc")
        for z in KINDS:
            f = r.get(ROW_KEY[z])
            if f is None:
                continue
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
    if doc.get("lock_profiles"):
        from .heap_locks import print_profiles
        print_profiles([(f["heap"], f) for f in doc["lock_profiles"]], p)
    for e in doc["extras"]:
        tgt = f"  (target {e['target']})" if e.get("target") else ""
        ci = f" [{e['ci'][0]:.2f}, {e['ci'][1]:.2f}]" if e.get("ci") else ""
        p(f"{e['name']:<56} {e['value']:>6.2f}{ci} {e['unit']}{tgt}")


def _num(fig, w):
    return f"{fig['median']:>{w}.1f}" if fig else f"{'-':>{w}}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="pktbuf bench heap", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), type=cli_list(int, 1, 1 << 30),
                    help="comma-separated block sizes in bytes (default: %(default)s)")
    ap.add_argument("--repeat", type=cli_number(int, 1, 10**6), default=11, help="runs per figure; medians are shown")
    ap.add_argument("--quick", action="store_true", help="3 runs per figure")
    ap.add_argument("--pause", type=cli_number(float, 0, 3600), default=0.0,
                    help="seconds between the two-thread A/B rounds: with a large "
                         "--repeat, samples a busy machine over a long window for clean runs")
    ap.add_argument("--locks", action="store_true",
                    help="also profile the heap lock from inside (counted kernels): hold and "
                         "wait times, handoffs/s, back-off, clearing cost, per kind and size")
    ap.add_argument("--dpdk", action="store_true",
                    help="also measure DPDK 22.11's rte_malloc/rte_zmalloc + rte_free, "
                         "alternating with pktbuf (needs gcc and pkg-config libdpdk)")
    add_output_args(ap, "heap")
    args = ap.parse_args(argv)
    repeat = 3 if (args.quick or QUICK) else max(1, args.repeat)
    sizes = args.sizes                   # checked by cli_list: 1 or more sizes >= 1
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
    heaps = {k: new_heap(k) for k in KINDS}
    machine = R.machine_info(tsc_hz())
    ref, dpdk = open_dpdk(args.dpdk, lcores=2)
    rows = []
    try:
        for size in sizes:
            for threads in (1, 2):
                progress(f"  size {size:>8} B, {threads} thread(s)")
                variants = {ROW_KEY[k]: pktbuf_variant(h) for k, h in heaps.items()}
                if ref is not None:
                    variants["dpdk_malloc"] = dpdk_variant(ref, "malloc")
                    variants["dpdk_zmalloc"] = dpdk_variant(ref, "zmalloc")
                try:
                    figs = measure_variants(variants, size, threads, repeat)
                except DpdkFailed as e:
                    dpdk.update(status="failed", message=str(e))
                    ref = None
                    figs = measure_variants({k: v for k, v in variants.items()
                                             if k.startswith("pktbuf")}, size, threads, repeat)
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
    progress("  outside / nocache / inside, 2 threads, interleaved rounds ...")
    extras = []
    for s in sizes:
        m = measure_ab(s, repeat, heaps, max(0.0, args.pause))
        for k, tgt in (("outside", ">= 1.0 up to 4 KiB, >= 1.7 at 64 KiB - 1 MiB"), ("nocache", None)):
            r, lo, hi = m[f"{k}/inside"]
            extras.append({"name": f"2 threads, {s} B: {k} / inside", "value": r, "ci": [lo, hi],
                           "unit": f"x aggregate pairs/s (95% CI; {repeat} rounds, clean "
                                   f"{m['clean'][k]}/{m['clean']['inside']})",
                           "target": tgt})
    for r in rows:
        if r["threads"] == 1 and r["size"] == 64 and r.get("ratio") is not None:
            extras.append({"name": "1 thread, 64 B pair: outside / rte_malloc+rte_free",
                           "value": r["ratio"], "unit": f"x ({r['pktbuf_outside']['median']:.1f} "
                           f"vs {r['dpdk_malloc']['median']:.1f} ns)", "target": "<= 1.0"})
    progress("  1 MiB pair vs 1 MiB memset ...")
    vm = measure_vs_memset(1 << 20, 2 * repeat + 1, heaps["outside"])
    extras.append({"name": "1 MiB pair / 1 MiB memset, 1 thread", "value": vm["ratio"],
                   "unit": f"x ({vm['pair_ns'] / 1e3:.2f} vs {vm['memset_ns'] / 1e3:.2f} us)",
                   "target": "<= 1.2"})
    profiles = []
    if args.locks:
        from .heap_locks import lock_profile
        progress("  lock profiles (counted kernels) ...")
        for s in sizes:
            for threads in (1, 2):
                for k, h in heaps.items():
                    h.flush_cache()
                    profiles.append((k, lock_profile(h, s, pairs_for(s), threads)))
    for h in heaps.values():
        h.close()
    method = {"runs": repeat, "clean_share": CLEAN_SHARE, "heap_bytes": HEAP_BYTES,
              "chunk_us": 3.0, "pair_budget_s": 0.002 if QUICK else 0.01, "warmup_rounds": 1,
              "tsc_hz": round(tsc_hz()), "interleaved": True,
              "seconds": round(time.perf_counter() - t0, 1)}
    doc = R.document("heap", argv, machine, method, dpdk, rows, extras)
    if profiles:
        doc["lock_profiles"] = [dict(f, heap=k) for k, f in profiles]
    print_table(doc)
    rc = write_outputs(doc, args)
    return rc or (1 if dpdk["status"] == "failed" else 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
