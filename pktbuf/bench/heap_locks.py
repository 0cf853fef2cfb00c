"""Where the heap's two-thread time goes: its lock, measured from inside (``pktbuf bench heap
--locks``).

The loops call the *counted* kernels (``heap_lcore_malloc_counted`` /
``heap_lcore_free_counted``: the same code as the release kernels, compiled with the heap
lock's statistics switched on, :mod:`pktbuf.buf.heap.lock`).  Per heap kind and block size, two
threads (lcores 0 and 1) do malloc + free pairs; the figures, summed over both threads:

* ``acq/pair``: heap-lock acquisitions per pair (2 without caches, ~0 with a cache hit);
* ``handoff/s`` and ``handoff %``: acquisitions whose previous holder was the other thread --
  each moves the lock's line, and the free-list and element lines the holder writes, to the
  other core (this machine has no hardware counters; these transfers are inferred from here);
* ``cont %``: acquisitions that found the lock held; ``wait``: mean TSC-derived ns of those,
  ``p50/p99`` from the log2 histogram (bucket upper bounds), ``backoff %``: the part of the
  waiting spent in ``pause`` loops;
* ``hold``: mean ns between owning and releasing the lock, with p50/p99 likewise;
* ``zero ns/KiB``: the cost of clearing freed blocks per KiB (lines another core wrote last
  cost more: that is the block itself moving between cores);
* ``hit %``: mallocs served by the lcore cache.

The histograms are log2 buckets of TSC cycles; the counting itself adds a few TSC reads per
acquisition, so compare the kinds with each other, not with the uninstrumented figures.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from .._jit import kernel
from ..atomics import fetch_add, load_acquire
from ..buf.heap.kernels import heap_lcore_free_counted, heap_lcore_malloc_counted
from ..buf.heap.layout import (H_LAST_OWNER, LS_ACQUIRE, LS_BACKOFF_CYC, LS_CACHE_HIT, LS_CONTENDED,
                               LS_HANDOFF, LS_HIST_HOLD, LS_HIST_WAIT, LS_HOLD_CYC, LS_ROWS,
                               LS_WAIT_CYC, LS_WORDS, LS_ZERO_BYTES, LS_ZERO_CYC)
from .tsc import tsc_hz


@kernel
def counted_pairs(heap, lcore, size, n, gate):
    """As :func:`pktbuf.bench.heap.malloc_free_pairs`, through the counted kernels."""
    fetch_add(gate, 0, 1)
    while load_acquire(gate, 0) < gate[1]:
        pass
    fails = 0
    for _ in range(n):
        p = heap_lcore_malloc_counted(heap, lcore, size, 0)
        if p < 0:
            fails += 1
            continue
        heap_lcore_free_counted(heap, lcore, p)
    return fails


def _pct(hist, q: float, ns_per_cyc: float) -> float:
    """The q-quantile of a log2 histogram, as the upper bound of its bucket, in ns."""
    tot = hist.sum()
    if tot == 0:
        return 0.0
    k = int(np.searchsorted(np.cumsum(hist), q * tot))
    return (2 ** (k + 1)) * ns_per_cyc


def lock_profile(heap, size: int, n: int, threads: int = 2) -> dict:
    """Run ``threads`` threads of ``n`` counted pairs each on ``heap`` and read the lock
    statistics (see the module docstring)."""
    st = heap.state
    st.lockstat[:] = 0
    st.ctl[H_LAST_OWNER] = -1
    gate = np.array([0, threads], np.int64)
    fails = [0] * threads
    ts = [threading.Thread(target=lambda i: fails.__setitem__(
        i, counted_pairs(st, i, size, n, gate)), args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if any(fails):
        raise RuntimeError("mallocs failed")
    rows = st.lockstat.reshape(LS_ROWS, LS_WORDS)[:threads].sum(axis=0)
    k = 1e9 / tsc_hz()
    acq = max(int(rows[LS_ACQUIRE]), 1)
    cont = int(rows[LS_CONTENDED])
    pairs = threads * n
    out = {
        "size": size, "threads": threads, "wall_s": wall, "mpairs_s": pairs / wall / 1e6,
        "acq_per_pair": rows[LS_ACQUIRE] / pairs,
        "handoffs_per_s": rows[LS_HANDOFF] / wall, "handoff_pct": 100 * rows[LS_HANDOFF] / acq,
        "contended_pct": 100 * cont / acq,
        "wait_ns": rows[LS_WAIT_CYC] / max(cont, 1) * k,
        "wait_p50_ns": _pct(rows[LS_HIST_WAIT:LS_HIST_WAIT + 32], 0.5, k),
        "wait_p99_ns": _pct(rows[LS_HIST_WAIT:LS_HIST_WAIT + 32], 0.99, k),
        "backoff_pct": 100 * rows[LS_BACKOFF_CYC] / max(int(rows[LS_WAIT_CYC]), 1),
        "hold_ns": rows[LS_HOLD_CYC] / acq * k,
        "hold_p50_ns": _pct(rows[LS_HIST_HOLD:LS_HIST_HOLD + 32], 0.5, k),
        "hold_p99_ns": _pct(rows[LS_HIST_HOLD:LS_HIST_HOLD + 32], 0.99, k),
        "lock_busy_pct": 100 * rows[LS_HOLD_CYC] * k / 1e9 / wall,
        "zero_ns_per_kib": rows[LS_ZERO_CYC] * k / max(int(rows[LS_ZERO_BYTES]) / 1024, 1e-9),
        "hit_pct": 100 * rows[LS_CACHE_HIT] / pairs,
        "hist_wait": rows[LS_HIST_WAIT:LS_HIST_WAIT + 32].tolist(),
        "hist_hold": rows[LS_HIST_HOLD:LS_HIST_HOLD + 32].tolist(),
    }
    return out


COLUMNS = (("Mpairs/s", "mpairs_s", 8, 2), ("acq/pair", "acq_per_pair", 8, 2),
           ("handoff/s", "handoffs_per_s", 10, 0), ("hand%", "handoff_pct", 6, 1),
           ("cont%", "contended_pct", 6, 1), ("wait", "wait_ns", 7, 0),
           ("w.p50", "wait_p50_ns", 7, 0), ("w.p99", "wait_p99_ns", 7, 0),
           ("pause%", "backoff_pct", 6, 1), ("hold", "hold_ns", 6, 0),
           ("h.p50", "hold_p50_ns", 6, 0), ("h.p99", "hold_p99_ns", 7, 0),
           ("busy%", "lock_busy_pct", 6, 1), ("zero/KiB", "zero_ns_per_kib", 8, 1),
           ("hit%", "hit_pct", 5, 0))


def print_profiles(profiles: list, p) -> None:
    p("\nheap lock, measured inside the kernels (counted build; times in ns from the TSC; "
      "p50/p99: log2-bucket upper bounds)")
    p(f"{'size':>8} {'thr':>3} {'heap':>8} " + " ".join(f"{h:>{w}}" for h, _, w, _ in COLUMNS))
    for kind, f in profiles:
        p(f"{f['size']:>8} {f['threads']:>3} {kind:>8} "
          + " ".join(f"{f[key]:>{w}.{d}f}" for _, key, w, d in COLUMNS))
