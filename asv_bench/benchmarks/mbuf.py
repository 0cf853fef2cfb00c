"""Mbuf benchmarks: bulk alloc/free, run-grouped vs staged free_bulk, single alloc/free.

Every figure is ns per mbuf (per chain for ``chain2``), timed inside Numba by the loops of
``pktbuf.bench.core`` (fenced TSC reads around exactly what is measured, as the DPDK reference
program of ``pktbuf bench core --dpdk`` does); asv's ``track_`` records the median of several
runs.  Figures against DPDK are in docs/performance.md, not here.  Ratios compare the
run-grouped free with DPDK's staged one measured in the same process, moments apart.
Compilation happens in ``setup`` (or comes from the cache), never inside a measurement.
"""
from pktbuf.bench.core import BURSTS, LAYOUTS, QUICK, REFERENCES, CoreBench

# PKTBUF_BENCH_QUICK=1 (CI: "does every benchmark still run?"): every benchmark and layout at
# bursts 1 (one object; two pools refused) and 32 -- asv starts a process per parameter
# combination, and the full grid is ~120 of them
Q_BURSTS = [1, 32] if QUICK else list(BURSTS)

_BENCH = None


def _bench():
    global _BENCH
    if _BENCH is None:
        _BENCH = CoreBench()
    return _BENCH


class RoundTrip:
    """pktmbuf_alloc_bulk + pktmbuf_free_bulk round trip."""
    params = (Q_BURSTS, ["run-grouped", "staged"])
    param_names = ["burst", "free"]
    unit = "ns/mbuf"
    timeout = 300

    def setup(self, burst, free):
        self.b = _bench()

    def track_roundtrip(self, burst, free):
        return self.b.median("roundtrip", burst, staged=(free == "staged"))

    track_roundtrip.unit = "ns/mbuf"


class FreeBulk:
    """pktmbuf_free_bulk alone, per input layout (per chain for 2-segment chains)."""
    params = (Q_BURSTS, list(LAYOUTS), ["run-grouped", "staged"])
    param_names = ["burst", "layout", "free"]
    timeout = 600

    def setup(self, burst, layout, free):
        if burst < 2 and layout in ("grouped", "alternating"):
            raise NotImplementedError("two pools need a burst of at least 2")
        self.b = _bench()

    def track_free(self, burst, layout, free):
        return self.b.median(layout, burst, staged=(free == "staged"))

    track_free.unit = "ns/mbuf"


class RunGroupedGain:
    """Staged time / run-grouped time, measured back to back (> 1: run-grouped is faster).
    Target: >= 1.15 on flat arrays at bursts 64-256; >= 0.95 on mixed or chained input."""
    params = (Q_BURSTS, list(LAYOUTS))
    param_names = ["burst", "layout"]
    timeout = 600

    def setup(self, burst, layout):
        if burst < 2 and layout in ("grouped", "alternating"):
            raise NotImplementedError("two pools need a burst of at least 2")
        self.b = _bench()

    def track_staged_over_run_grouped(self, burst, layout):
        run, staged = [], []
        for _ in range(1 if QUICK else 7):      # interleaved so both see the same machine
            run.append(self.b.run(layout, burst, staged=False))
            staged.append(self.b.run(layout, burst, staged=True))
        run.sort()
        staged.sort()
        return staged[len(staged) // 2] / run[len(run) // 2]

    track_staged_over_run_grouped.unit = "ratio"


class SingleAllocFree:
    """pktmbuf_alloc x n then pktmbuf_free x n, one call per mbuf."""
    params = ([32, 256],)
    param_names = ["n"]

    def setup(self, n):
        self.b = _bench()

    def track_single(self, n):
        return self.b.median("single", n)

    track_single.unit = "ns/mbuf"



class VsReference:
    """Each core mbuf case over a pktbuf-only reference timed in the same process, moments
    apart (``CoreBench.ratio``: samples interleaved, median over median), so that a slower
    pktbuf shows as a higher ratio on any machine and ``asv publish`` flags it:

    * the free_bulk layouts and the round trip: the same work with DPDK's staged free
      (``pktmbuf_free_bulk_staged``), the algorithm the run-grouped free replaces;
    * one at a time: ``ref_stack``, the memory operations of a cache-hit alloc + free (a stack
      pop/push with its length in memory, a 16-bit store into a 128-byte record per object)
      in plain Numba -- no pktbuf kernel in it, and made of the same loads and stores, so it
      scales with a machine's core as the case does.

    Lower is better.  (Raw mempool: ``mempool.RawMempool.track_vs_copy``.)"""
    params = (Q_BURSTS, list(LAYOUTS) + ["roundtrip", "single"])
    param_names = ["burst", "case"]
    timeout = 900

    def setup(self, burst, case):
        if burst < 2 and case in ("grouped", "alternating"):
            raise NotImplementedError("two pools need a burst of at least 2")
        self.b = _bench()

    def track_vs_reference(self, burst, case):
        ref = "ref_stack" if case == "single" else "staged"
        return self.b.ratio(case, burst, ref)

    track_vs_reference.unit = "ratio"


assert "ref_stack" in REFERENCES
