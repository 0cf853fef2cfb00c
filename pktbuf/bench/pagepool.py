"""Page pool benchmark: bulk vs single-page slow-path refill, in three workloads.

``pktbuf bench pagepool`` runs :func:`main`; ``asv_bench/benchmarks/pagepool.py`` uses the same
loop.  One nogil kernel call runs ``batches`` rounds of a NAPI-style poll: allocate 64 pages
(the NAPI budget), then get rid of them according to the workload:

* ``release`` -- the XDP-redirect case the 2021 patch measured: pages leave the pool
  (``page_pool_release_page``, as when an XDP frame becomes an skb) and go back to the page
  allocator (``put_page``), so every refill hits the slow path;
* ``ring``    -- pages come back through the recycle ring (``page_pool_put_page``, not direct),
  as frees from another CPU do; refills come from the ring;
* ``direct``  -- pages are recycled into the cache (``page_pool_recycle_direct``, XDP_DROP).

Figures: ns per page (alloc + its disposal), Mpages/s, and the bulk/single ratio of pages per
second per workload.  Both strategies run alternately in the same sitting; every poll is timed
with the TSC inside the kernel and medians are taken over polls (robust to preemption on a
shared machine).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ..errors import cli_number
from .._jit import kernel
from ..buf.pagepool.api import PageArena, PagePool
from ..buf.pagepool.arena import put_page
from ..buf.pagepool.alloc import page_pool_alloc_pages
from ..buf.pagepool.recycle import page_pool_put_page, page_pool_release_page
from .tsc import tsc_begin, tsc_end, tsc_hz

WORKLOADS = ("release", "ring", "direct")
W_RELEASE, W_RING, W_DIRECT = 0, 1, 2
NAPI_BUDGET = 64
ARENA_PAGES = 4096
UPSTREAM_GAIN = 0.188    # 3,677,958 -> 4,368,926 pps (RFC, Feb 2021)
# PKTBUF_BENCH_QUICK=1 (CI: "does every benchmark still run?"): short runs
QUICK = os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")


@kernel
def napi_loop(pool, arena, batches, workload, scratch, cyc):
    """``batches`` polls of 64 allocations, each followed by the workload's disposal; the TSC
    cycles of poll ``i`` go to ``cyc[i]`` (if ``cyc`` has room).  Returns the number of failed
    allocations (0 expected)."""
    fails = 0
    for b in range(batches):
        t0 = tsc_begin()
        for i in range(NAPI_BUDGET):
            p = page_pool_alloc_pages(pool, arena)
            if p < 0:
                fails += 1
                p = -1
            scratch[i] = p
        for i in range(NAPI_BUDGET):
            p = scratch[i]
            if p < 0:
                continue
            if workload == W_RELEASE:
                page_pool_release_page(pool, arena, p)
                put_page(arena, p)
            elif workload == W_RING:
                page_pool_put_page(pool, arena, p, False)
            else:
                page_pool_put_page(pool, arena, p, True)
        t1 = tsc_end()
        if b < cyc.size:
            cyc[b] = t1 - t0
    return fails


class Rig:
    """An arena and a pool with one strategy, compiled and warmed."""

    def __init__(self, refill: str, workload: str):
        self.arena = PageArena(ARENA_PAGES)
        self.pool = PagePool(self.arena, refill=refill)
        self.workload = WORKLOADS.index(workload)
        self.scratch = np.empty(NAPI_BUDGET, np.int32)
        self.run(4)

    def run(self, batches: int) -> np.ndarray:
        """Run ``batches`` polls; their TSC cycles, one per poll."""
        cyc = np.zeros(batches, np.uint64)
        fails = napi_loop(self.pool.state, self.arena.state, batches, self.workload,
                          self.scratch, cyc)
        if fails:
            raise RuntimeError(f"{fails} page allocations failed")
        return cyc


def measure(workload: str, polls: int = 20_000, rounds: int = 10) -> dict:
    """ns per page for bulk and single refill and the pages/s ratio.

    The two strategies run alternately in ``rounds`` rounds of ``polls / rounds`` polls; every
    poll (64 allocations + their disposal) is timed with the TSC inside the kernel, and the
    medians are taken over all polls -- a poll that was preempted or interrupted is an outlier
    the median ignores.
    """
    rigs = {r: Rig(r, workload) for r in ("bulk", "single")}
    cyc = {r: [] for r in rigs}
    per = max(1, polls // rounds)
    for _ in range(rounds):
        for r, rig in rigs.items():
            cyc[r].append(rig.run(per))
    ns_per_cycle = 1e9 / tsc_hz()
    ns = {r: float(np.median(np.concatenate(c))) * ns_per_cycle / NAPI_BUDGET
          for r, c in cyc.items()}
    out = {f"{r}_ns": ns[r] for r in ns}
    out.update({f"{r}_mpps": 1e3 / ns[r] for r in ns})
    out["ratio"] = ns["single"] / ns["bulk"]
    out["stats"] = {r: rig.pool.get_stats() for r, rig in rigs.items()}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pktbuf bench pagepool", description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated subset of %(default)s")
    ap.add_argument("--polls", type=cli_number(int, 10, 10**9), default=20_000,
                    help="64-page polls timed per strategy (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="2000 polls per strategy")
    args = ap.parse_args(argv)
    wls = [w for w in args.workloads.split(",") if w]
    bad = [w for w in wls if w not in WORKLOADS]
    if bad or not wls:
        ap.error(f"unknown workload(s) {bad}; choose from {WORKLOADS}")
    polls = 2000 if (args.quick or QUICK) else max(10, args.polls)
    res = {}
    for w in wls:
        print(f"  {w}: compiling / warming, then {polls} polls per strategy, alternating ...",
              file=sys.stderr, flush=True)
        res[w] = measure(w, polls)
    print(f"\npage pool, 64-page NAPI polls: alloc + disposal per page (median over {polls} polls, TSC)")
    print(f"{'workload':>9} {'bulk ns':>9} {'single ns':>10} {'bulk Mpps':>10} {'single Mpps':>12} {'bulk/single':>12}")
    for w, r in res.items():
        print(f"{w:>9} {r['bulk_ns']:>9.1f} {r['single_ns']:>10.1f} {r['bulk_mpps']:>10.2f} "
              f"{r['single_mpps']:>12.2f} {r['ratio']:>11.2f}x")
    if "release" in res:
        gain = res["release"]["ratio"] - 1
        print(f"\nnon-recycling (release) gain of bulk refill: {gain * 100:+.1f} % "
              f"(target >= +{UPSTREAM_GAIN * 100:.1f} %, upstream XDP-redirect 3.68 -> 4.37 Mpps)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
