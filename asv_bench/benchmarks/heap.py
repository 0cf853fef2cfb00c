"""Heap: malloc + free pairs per size, 1 and 2 threads, zero outside vs inside the lock.

Loops run in nogil kernels (two threads: two kernel calls on one heap, started together).
``track_`` figures (see :mod:`pktbuf.bench.heap` for the method): ns per pair per thread,
aggregate Mpairs/s, the outside/inside aggregate-throughput ratio (target >= 1.4 at
64 KiB - 1 MiB with two threads) and the 1 MiB pair / 1 MiB memset ratio (target <= 1.2).
Two-thread figures are medians over clean runs (both threads had their CPU); on a busy shared
machine there may be none, and the figure is then the median of all runs.
"""
from pktbuf.bench.heap import (QUICK, SIZES, measure_pair, measure_vs_memset, measure_zero_ratio,
                               new_heap, pairs_for)
from pktbuf.bench.heap import time_pairs as run_pairs    # not "time_*": asv would time it

REPEAT = 1 if QUICK else 5


class HeapPair:
    params = (list(SIZES), [1, 2], ["outside", "inside"])
    param_names = ["size", "threads", "zero"]
    timeout = 180

    def setup(self, size, threads, zero):
        self.heap = new_heap(zero == "inside")    # compiles (first time) and warms
        self.n = pairs_for(size)

    def teardown(self, size, threads, zero):
        self.heap.close()

    def time_pairs(self, size, threads, zero):
        run_pairs(self.heap, size, self.n, threads)

    def track_ns_per_pair_per_thread(self, size, threads, zero):
        return measure_pair(self.heap, size, threads, repeat=REPEAT)["ns_per_pair"]

    track_ns_per_pair_per_thread.unit = "ns"

    def track_aggregate_mpairs_per_s(self, size, threads, zero):
        return measure_pair(self.heap, size, threads, repeat=REPEAT)["mpairs_s"]

    track_aggregate_mpairs_per_s.unit = "Mpairs/s"


class HeapZeroOutsideOverInside:
    """Aggregate throughput with the memset before the lock / inside it, interleaved runs."""
    params = (list(SIZES), [1, 2])
    param_names = ["size", "threads"]
    timeout = 180

    def setup(self, size, threads):
        self.heaps = {z: new_heap(z) for z in (False, True)}

    def teardown(self, size, threads):
        for h in self.heaps.values():
            h.close()

    def track_throughput_ratio(self, size, threads):
        return measure_zero_ratio(size, threads, repeat=REPEAT, heaps=self.heaps)["ratio"]

    track_throughput_ratio.unit = "ratio"


class HeapPairOverMemset:
    """One thread: a 1 MiB malloc + free pair / a 1 MiB memset (target <= 1.2)."""
    timeout = 120

    def setup(self):
        self.heap = new_heap(False)

    def teardown(self):
        self.heap.close()

    def track_1mib_pair_over_memset(self):
        return measure_vs_memset(1 << 20, repeat=REPEAT, heap=self.heap)["ratio"]

    track_1mib_pair_over_memset.unit = "ratio"
