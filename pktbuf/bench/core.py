"""The core engine's measurements, case by case, as the DPDK reference program runs them.

Setup: pools of 8192 mbufs, cache 256, data room 2176 (DPDK's default buffer size), no
hugepages.  Every loop runs inside Numba.  A sample is about ``units`` units of work (mbufs,
chains or objects), timed in intervals bracketed by fenced TSC reads (:mod:`.tsc`):

* free_bulk alone (five input layouts): each ``free_bulk`` call is one interval;
* round trip, one at a time, raw mempool: chunks of whole loop iterations lasting about
  ``CHUNK_NS`` (calibrated per case and burst), so that a time slice lost to another process
  falls into one chunk instead of stretching the whole sample.

An interval longer than the drop threshold (20 us, or four chunks' time for a slow chunk) was
preempted on this shared machine: it is dropped and counted.  The cost of an empty fenced pair
is subtracted from each kept interval.  A sample in which every interval was dropped is an
error, not a zero.

``dpdk_ref.c`` does the same with DPDK's calls; ``report.py`` alternates the two sample by
sample.  Which cases exist is the data in :data:`CASES`.  docs/bench.md has the whole method.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..kernels import (mbuf_refcnt_update, mempool_get_bulk, mempool_put_bulk, pktmbuf_alloc,
                       pktmbuf_alloc_bulk, pktmbuf_chain, pktmbuf_free, pktmbuf_free_bulk,
                       pktmbuf_free_bulk_staged)
from .tsc import pair_overhead_cycles, tsc_begin, tsc_end, tsc_hz

POOL_N = 8192
CACHE = 256
DATAROOM = 2176
BURSTS = (1, 32, 64, 128, 256)
MAX_BURST = 256
DROP_US = 20.0          # a timed interval longer than this was preempted
PREEMPTED_RETRIES = 4   # a measurement that lost every interval to preemption: taken again
CHUNK_NS = 4000.0       # whole-loop cases are timed in chunks of about this long
NEVER = 1 << 62         # a drop threshold no interval reaches
UNITS = 400_000         # units of work per sample
CAL_ITERS = 512         # units per interval when a loop's iteration time is calibrated
# PKTBUF_BENCH_QUICK=1 (CI: "does every benchmark still run?"): one short repetition each
QUICK = os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")
QUICK_UNITS = 20_000
LAYOUTS = ("flat", "grouped", "alternating", "shared", "chain2")
_LAYOUT = {name: i for i, name in enumerate(LAYOUTS)}


@dataclass(frozen=True)
class Case:
    """One core case: how it is shown and what it is compared with."""
    name: str
    label: str
    unit: str                   # per what: "ns/mbuf", "ns/chain", "ns/obj"
    dpdk: str | None            # the DPDK reference program's case doing the same work
    staged: bool = False        # also measured with DPDK's staged free algorithm
    min_burst: int = 1

    def fits(self, burst: int) -> bool:
        return self.min_burst <= burst <= MAX_BURST


CASES = (
    Case("roundtrip", "alloc_bulk + free_bulk round trip", "ns/mbuf", "roundtrip", True),
    Case("flat", "free_bulk alone, flat (1 pool)", "ns/mbuf", "flat", True),
    Case("grouped", "free_bulk, 2 pools grouped AA..BB", "ns/mbuf", "grouped", True, 2),
    Case("alternating", "free_bulk, 2 pools alternating ABAB", "ns/mbuf", "alternating", True, 2),
    Case("shared", "free_bulk, 1 shared mbuf per burst", "ns/mbuf", "shared", True),
    Case("chain2", "free_bulk, 2-segment chains", "ns/chain", "chain2", True),
    Case("single", "pktmbuf_alloc + free, one at a time", "ns/mbuf", "single"),
    Case("raw", "mempool get_bulk + put_bulk (raw)", "ns/obj", "raw"),
)
CASE = {c.name: c for c in CASES}


@dataclass(frozen=True)
class Sample:
    """One measurement: ns per unit, and how many timed intervals were kept and dropped
    (whole-loop cases: one interval, never dropped)."""
    ns: float
    kept: int
    dropped: int


class BenchError(RuntimeError):
    """A measurement that cannot be reported (pool dry, every interval dropped, a leak)."""


@njit(cache=True, nogil=True)
def roundtrip(dom, pid, lcore, n, nchunks, chunk, staged, drop_cyc):
    """alloc_bulk + free_bulk of n, timed ``chunk`` iterations at a time.

    Returns ``(cycles, kept, dropped)``: cycles summed over the ``kept`` chunks shorter than
    ``drop_cyc`` and the number ``dropped``; ``kept == -1``: the pool ran dry.  (So do
    ``single`` and ``raw_mempool``.)"""
    m = np.empty(max(n, 1), np.int32)
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    for _ in range(nchunks):
        t0 = tsc_begin()
        for _ in range(chunk):
            if pktmbuf_alloc_bulk(dom, pid, lcore, m, n) != 0:
                return acc, -1, dropped
            if staged:
                pktmbuf_free_bulk_staged(dom, lcore, m, n)
            else:
                pktmbuf_free_bulk(dom, lcore, m, n)
        t1 = tsc_end()
        d = t1 - t0
        if d < drop_cyc:
            acc += d
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped


@njit(cache=True, nogil=True)
def free_only(dom, pid_a, pid_b, lcore, n, iters, layout, staged, drop_cyc):
    """free_bulk alone (the allocation is not timed), each call timed on its own.

    Returns ``(cycles, kept, dropped)``: the cycles summed over the ``kept`` intervals shorter
    than ``drop_cyc``, and how many longer ones were ``dropped``.  ``kept == -1``: a pool ran
    dry.  The caller turns that into cycles per mbuf (per chain for chain2)."""
    m = np.empty(2 * n + 2, np.int32)
    tmp = np.empty(2 * n + 2, np.int32)
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    h = n // 2
    for _ in range(iters):
        shared = -1
        if layout == 0:          # flat, one pool
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, m, n) != 0:
                return acc, -1, dropped
        elif layout == 1:        # two pools grouped: AA..BB..
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, m, h) != 0:
                return acc, -1, dropped
            if pktmbuf_alloc_bulk(dom, pid_b, lcore, tmp, n - h) != 0:
                return acc, -1, dropped
            for j in range(n - h):
                m[h + j] = tmp[j]
        elif layout == 2:        # two pools alternating: ABAB..
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, tmp, h) != 0:
                return acc, -1, dropped
            if pktmbuf_alloc_bulk(dom, pid_b, lcore, tmp[h:], n - h) != 0:
                return acc, -1, dropped
            for j in range(h):
                m[2 * j] = tmp[j]
                m[2 * j + 1] = tmp[h + j]
            for j in range(2 * h, n):
                m[j] = tmp[h + j - h]
        elif layout == 3:        # one shared mbuf (refcnt 2) in the middle of each burst
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, m, n) != 0:
                return acc, -1, dropped
            shared = m[h]
            mbuf_refcnt_update(dom, shared, 1)
        else:                    # n 2-segment chains
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, tmp, 2 * n) != 0:
                return acc, -1, dropped
            for j in range(n):
                pktmbuf_chain(dom, tmp[2 * j], tmp[2 * j + 1])
                m[j] = tmp[2 * j]
        # (no helper function here: this loop runs with Numba's runtime, which takes a
        # reference on every array a call is passed)
        if staged:
            t0 = tsc_begin()
            pktmbuf_free_bulk_staged(dom, lcore, m, n)
            t1 = tsc_end()
        else:
            t0 = tsc_begin()
            pktmbuf_free_bulk(dom, lcore, m, n)
            t1 = tsc_end()
        if shared >= 0:
            pktmbuf_free(dom, lcore, shared)      # untimed: the last reference
        d = t1 - t0
        if d < drop_cyc:
            acc += d
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped


@njit(cache=True, nogil=True)
def single(dom, pid, lcore, n, nchunks, chunk, drop_cyc):
    """pktmbuf_alloc x n then pktmbuf_free x n, one call per mbuf; timed as ``roundtrip``."""
    m = np.empty(max(n, 1), np.int32)
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    for _ in range(nchunks):
        t0 = tsc_begin()
        for _ in range(chunk):
            for j in range(n):
                h = pktmbuf_alloc(dom, pid, lcore)
                if h < 0:
                    for i in range(j):
                        pktmbuf_free(dom, lcore, m[i])
                    return acc, -1, dropped
                m[j] = h
            for j in range(n):
                pktmbuf_free(dom, lcore, m[j])
        t1 = tsc_end()
        d = t1 - t0
        if d < drop_cyc:
            acc += d
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped


@njit(cache=True, nogil=True)
def raw_mempool(dom, pid, lcore, n, nchunks, chunk, drop_cyc):
    """mempool_get_bulk + mempool_put_bulk of n objects; timed as ``roundtrip``."""
    o = np.empty(max(n, 1), np.int32)
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    for _ in range(nchunks):
        t0 = tsc_begin()
        for _ in range(chunk):
            if mempool_get_bulk(dom, pid, lcore, o, n) != 0:
                return acc, -1, dropped
            mempool_put_bulk(dom, pid, lcore, o, n)
        t1 = tsc_end()
        d = t1 - t0
        if d < drop_cyc:
            acc += d
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped


@njit(cache=True, nogil=True)
def ref_copy(cache, o, n, nchunks, chunk, drop_cyc):
    """Reference of the raw mempool case (asv ratios): the handle copies of a cache hit of
    ``get`` + ``put`` of n -- n int32 out of a stack in reverse, n back -- in plain Numba, timed
    as ``roundtrip``.  No pktbuf kernel is in it, so a ratio to it moves only with pktbuf (it is
    a yardstick, not a cost split: LLVM vectorises the two loops differently)."""
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    top = cache.size - 1
    for _ in range(nchunks):
        t0 = tsc_begin()
        for _ in range(chunk):
            for i in range(n):
                o[i] = cache[top - i]
            base = cache.size - n
            for i in range(n):
                cache[base + i] = o[i]
        t1 = tsc_end()
        d = t1 - t0
        if d < drop_cyc:
            acc += d
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped


@njit(cache=True, nogil=True)
def ref_stack(stack, table, m, n, nchunks, chunk, drop_cyc):
    """Reference of the one-at-a-time case: per object, a pop from a stack whose length lives
    in memory plus a 16-bit store into a 128-byte record, then the reverse -- the memory
    operations of a cache-hit alloc + free, without pktbuf.  Timed as ``single``."""
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    for _ in range(nchunks):
        t0 = tsc_begin()
        for _ in range(chunk):
            for j in range(n):
                ln = stack[0] - 1
                h = stack[1 + ln]
                stack[0] = ln
                table[h * 64] = 1
                m[j] = h
            for j in range(n):
                h = m[j]
                table[h * 64] = 0
                ln = stack[0]
                stack[1 + ln] = h
                stack[0] = ln + 1
        t1 = tsc_end()
        d = t1 - t0
        if d < drop_cyc:
            acc += d
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped


REFERENCES = {"ref_copy": "handle copies of a cache get + put, alone (no pktbuf)",
              "ref_stack": "a stack pop/push + a 16-bit record store per object (no pktbuf)"}


def loop_iters(case: str, burst: int, units: int) -> int:
    """Iterations of a ``case`` loop for about ``units`` units (free_bulk-alone cases do a
    quarter as many: the untimed allocation between the calls costs about as much again)."""
    iters = max(4, units // max(burst, 1))
    return max(4, iters // 4) if case in _LAYOUT else iters


def chunking(iter_cyc: float, hz: float) -> tuple[int, int]:
    """(iterations per chunk, drop threshold in cycles) for a loop whose iteration takes
    ``iter_cyc`` cycles: chunks of about ``CHUNK_NS``, dropped at ``DROP_US`` or at four chunks'
    time if that is longer (an iteration may take longer than the threshold by itself)."""
    iter_cyc = max(float(iter_cyc), 1.0)
    chunk = max(1, int(CHUNK_NS * 1e-9 * hz / iter_cyc))
    return chunk, max(int(DROP_US * 1e-6 * hz), int(4 * chunk * iter_cyc))


@dataclass(frozen=True)
class Timing:
    """How one case at one burst is timed -- the same for pktbuf and for DPDK."""
    chunk: int         # loop iterations per timed interval (1 for the free_bulk-alone cases)
    nchunks: int       # timed intervals per sample
    drop_cyc: int      # an interval at least this long was preempted: dropped


class CoreBench:
    """Pools and warm kernels for the core cases.

    ``sample(case, burst, staged)`` -> :class:`Sample`; ``run`` -> ns per unit; ``median`` over
    repetitions; ``timing(case, burst, units)`` -> :class:`Timing`; ``audit()`` checks that
    every mbuf is back in its pool.
    """

    def __init__(self, domain=None):
        from ..buf.domain.pools import PktmbufPool
        self.a = PktmbufPool(POOL_N, CACHE, DATAROOM, domain=domain, name="bench_a")
        self.b = PktmbufPool(POOL_N, CACHE, DATAROOM, domain=self.a.domain, name="bench_b")
        self.raw = PktmbufPool(POOL_N, CACHE, DATAROOM, domain=self.a.domain, name="bench_raw")
        self.dom = self.a.domain.state
        self.hz = tsc_hz()
        self.ns_per_cyc = 1e9 / self.hz
        self.drop_cyc = int(DROP_US * 1e-6 * self.hz)
        self.lcore = 0
        self._chunks = {}
        self._ref_cache = np.arange(2 * MAX_BURST, dtype=np.int32)
        self._ref_out = np.empty(MAX_BURST, np.int32)
        self._ref_stack = np.zeros(1 + MAX_BURST, np.int32)
        self._ref_stack[0] = MAX_BURST
        self._ref_stack[1:] = np.arange(MAX_BURST, dtype=np.int32)
        self._ref_table = np.zeros(MAX_BURST * 64, np.int16)
        for n in (1, 32):          # compile (or load) every loop before anything is timed
            for c in CASES:
                for staged in (False, True) if c.staged else (False,):
                    self._loop(c.name, n, staged, 1, 1, NEVER)
            for r in REFERENCES:
                self._loop(r, n, False, 1, 1, NEVER)
        self.pair_cyc = pair_overhead_cycles()

    def _loop(self, case, n, staged, nchunks, chunk, drop_cyc):
        """Run one case's kernel: (cycles, kept, dropped); kept == -1: a pool ran dry."""
        d, a, lc, drop = self.dom, self.a.id, self.lcore, np.uint64(drop_cyc)
        if case in _LAYOUT:
            return free_only(d, a, self.b.id, lc, n, nchunks, _LAYOUT[case], staged, drop)
        if case == "roundtrip":
            return roundtrip(d, a, lc, n, nchunks, chunk, staged, drop)
        if case == "single":
            return single(d, a, lc, n, nchunks, chunk, drop)
        if case == "ref_copy":
            return ref_copy(self._ref_cache, self._ref_out, n, nchunks, chunk, drop)
        if case == "ref_stack":
            return ref_stack(self._ref_stack, self._ref_table, self._ref_out, n, nchunks,
                             chunk, drop)
        return raw_mempool(d, self.raw.id, lc, n, nchunks, chunk, drop)

    def _chunking(self, case: str, burst: int) -> tuple[int, int]:
        """(iterations per timed chunk, drop threshold) of a whole-loop case: chunks of about
        ``CHUNK_NS`` from the fastest of five one-iteration calibrations; the threshold is
        ``DROP_US`` or four chunks' time, whichever is longer."""
        key = (case, burst)
        if key not in self._chunks:
            best = None
            # CAL_ITERS iterations per interval: one iteration of a fast loop (a raw get + put
            # of 32 is ~10 ns) is within the jitter of the fenced pair subtracted from it, and
            # a calibration of ~0 cycles would make chunks far longer than the drop threshold
            cal = max(1, CAL_ITERS // max(burst, 1))
            for _ in range(5):
                acc, kept, _ = self._loop(case, burst, False, 8, cal, NEVER)
                if kept <= 0:
                    raise BenchError(f"{case}: pool ran dry")
                per = max((float(acc) - kept * self.pair_cyc) / (kept * cal), 1.0)
                best = per if best is None else min(best, per)
            self._chunks[key] = chunking(best, self.hz)
        return self._chunks[key]

    def timing(self, case: str, burst: int, units: int = UNITS) -> Timing:
        """How ``case`` at ``burst`` is timed for a sample of about ``units`` units (a case of
        :data:`CASES` or a reference of :data:`REFERENCES`)."""
        if case in REFERENCES:
            if not 1 <= burst <= MAX_BURST:
                raise ValueError(f"{case}: burst {burst} outside 1..{MAX_BURST}")
            iters = loop_iters(case, burst, self.effective_units(units))
            chunk, drop = self._chunking(case, burst)
            return Timing(chunk, max(1, iters // chunk), drop)
        c = CASE.get(case)
        if c is None:
            raise ValueError(f"unknown case {case!r}")
        if not c.fits(burst):
            raise ValueError(f"{case}: burst {burst} outside {c.min_burst}..{MAX_BURST}")
        iters = loop_iters(case, burst, self.effective_units(units))
        if case in _LAYOUT:
            return Timing(1, iters, self.drop_cyc)
        chunk, drop = self._chunking(case, burst)
        return Timing(chunk, max(1, iters // chunk), drop)

    def sample(self, case: str, burst: int, staged: bool = False, units: int = UNITS,
               timing: Timing | None = None) -> Sample:
        """One measurement of about ``units`` units of ``case`` at ``burst``.  A measurement
        whose every timed interval was preempted (dropped) is taken again, up to
        ``PREEMPTED_RETRIES`` times -- with few intervals (a slow case's short run) one
        preemption can take them all -- and is an error only if every attempt lost them all."""
        t = timing or self.timing(case, burst, units)
        for _ in range(1 + PREEMPTED_RETRIES):
            acc, kept, dropped = self._loop(case, burst, staged, t.nchunks, t.chunk,
                                            t.drop_cyc)
            if kept != 0:
                break
        if kept < 0:
            raise BenchError(f"{case}: pool ran dry")
        if kept == 0:
            raise BenchError(f"{case} burst {burst}: all {dropped} timed intervals were "
                             f"longer than {t.drop_cyc * self.ns_per_cyc / 1e3:.1f} us "
                             f"(preempted) and were dropped; nothing to report")
        cyc = (float(acc) - kept * self.pair_cyc) / (kept * t.chunk * burst)
        return Sample(cyc * self.ns_per_cyc, int(kept), int(dropped))

    @staticmethod
    def effective_units(units: int) -> int:
        """``units``, capped under PKTBUF_BENCH_QUICK."""
        return min(units, QUICK_UNITS) if QUICK else units

    def run(self, case: str, burst: int, staged: bool = False, units: int = UNITS) -> float:
        """One measurement of about ``units`` units: ns per unit."""
        return self.sample(case, burst, staged, units).ns

    def median(self, case, burst, staged=False, reps=7, units=UNITS):
        if QUICK:
            reps = 1
        vals = sorted(self.run(case, burst, staged, units) for _ in range(reps))
        return vals[len(vals) // 2]

    def ratio(self, case: str, burst: int, reference: str, reps: int = 7,
              units: int = UNITS) -> float:
        """pktbuf's time for ``case`` over a pktbuf-only reference timed in the same process
        moments apart (samples interleaved, median over median): ``reference`` is ``"staged"``
        (the same case with DPDK's staged free algorithm) or a name of :data:`REFERENCES`.
        Both sides run on the same machine in the same minute, so the ratio cancels the
        machine's speed; a rise means pktbuf got slower (what ``asv publish`` flags)."""
        if QUICK:
            reps = 1
        mine, ref = [], []
        for k in range(reps):
            pair = [lambda: mine.append(self.run(case, burst, False, units)),
                    lambda: ref.append(self.run(case, burst, True, units) if reference == "staged"
                                       else self.run(reference, burst, False, units))]
            for f in (pair if k % 2 == 0 else pair[::-1]):
                f()
        mine.sort()
        ref.sort()
        return mine[len(mine) // 2] / ref[len(ref) // 2]

    def audit(self) -> None:
        """Every pool audits clean and holds all of its mbufs again (raises BenchError)."""
        for p in (self.a, self.b, self.raw):
            free = p.audit()
            if free != p.n:
                raise BenchError(f"pool {p.name!r}: {p.n - free} of {p.n} mbufs not returned")

    def close(self):
        for p in (self.a, self.b, self.raw):
            p.close(force=True)
