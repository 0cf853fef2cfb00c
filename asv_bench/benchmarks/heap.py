"""Heap: malloc + free pairs per size, 1 and 2 threads, three heaps.

``outside`` (the default ``Heap()``: freed blocks zeroed outside the lock, small ones kept in
per-lcore caches), ``nocache`` (``Heap(cache=False)``) and ``inside`` (``Heap(zero_in_lock=True)``:
DPDK's placement).  Loops run in nogil kernels (two threads: two kernel calls on one heap,
lcores 0 and 1, started together).  ``track_`` figures (method: :mod:`pktbuf.bench.heap`): ns
per pair per thread, aggregate Mpairs/s, the outside / inside aggregate-throughput ratio of
interleaved runs (targets: >= 1.0 up to 4 KiB, >= 1.7 at 64 KiB - 1 MiB, two threads) and the
1 MiB pair / 1 MiB memset ratio (target <= 1.2).  Two-thread figures on a busy shared machine
are noisy; treat ratios under 1.5x there as noise.
"""
from pktbuf.bench.heap import (KINDS, QUICK, SIZES, measure_ab, measure_pair, measure_vs_memset,
                               new_heap, pairs_for)
from pktbuf.bench.heap import time_pairs as run_pairs    # not "time_*": asv would time it

REPEAT = 1 if QUICK else 5
# quick (CI's smoke run): the smallest and the largest size, two threads -- every heap and
# every benchmark once, not the whole grid
Q_SIZES = [SIZES[0], SIZES[-1]] if QUICK else list(SIZES)
Q_THREADS = [2] if QUICK else [1, 2]


class HeapPair:
    params = (Q_SIZES, Q_THREADS, list(KINDS))
    param_names = ["size", "threads", "heap"]
    timeout = 180

    def setup(self, size, threads, heap):
        self.heap = new_heap(heap)             # compiles (first time) and warms
        self.n = pairs_for(size)

    def teardown(self, size, threads, heap):
        self.heap.close()

    def time_pairs(self, size, threads, heap):
        run_pairs(self.heap, size, self.n, threads)

    def track_ns_per_pair_per_thread(self, size, threads, heap):
        return measure_pair(self.heap, size, threads, repeat=REPEAT)["ns_per_pair"]

    track_ns_per_pair_per_thread.unit = "ns"

    def track_aggregate_mpairs_per_s(self, size, threads, heap):
        return measure_pair(self.heap, size, threads, repeat=REPEAT)["mpairs_s"]

    track_aggregate_mpairs_per_s.unit = "Mpairs/s"


class HeapZeroOutsideOverInside:
    """Aggregate throughput, default heap (zero outside + caches) / inside-the-lock heap,
    interleaved runs."""
    params = (Q_SIZES, Q_THREADS)
    param_names = ["size", "threads"]
    timeout = 180

    def setup(self, size, threads):
        self.heaps = {k: new_heap(k) for k in ("outside", "inside")}

    def teardown(self, size, threads):
        for h in self.heaps.values():
            h.close()

    def track_throughput_ratio(self, size, threads):
        return measure_ab(size, max(REPEAT, 2), self.heaps, threads=threads)["outside/inside"][0]

    track_throughput_ratio.unit = "ratio"


class HeapPairOverMemset:
    """One thread: a 1 MiB malloc + free pair / a 1 MiB memset (target <= 1.2)."""
    timeout = 120

    def setup(self):
        self.heap = new_heap("outside")

    def teardown(self):
        self.heap.close()

    def track_1mib_pair_over_memset(self):
        return measure_vs_memset(1 << 20, repeat=REPEAT, heap=self.heap)["ratio"]

    track_1mib_pair_over_memset.unit = "ratio"
