"""Page pool: bulk vs single-page slow-path refill (Linux's 2021 bulk refill claim: +18.8 %).

Workloads (see :mod:`pktbuf.bench.pagepool`): ``release`` -- pages leave the pool and go back to
the page allocator, the XDP-redirect case where every refill is a slow path; ``ring`` -- pages
come back through the recycle ring; ``direct`` -- pages are recycled into the alloc cache.
One nogil kernel runs NAPI-style polls of 64 allocations; each poll is timed with the TSC.
"""
import numpy as np

from pktbuf.bench.pagepool import NAPI_BUDGET, QUICK, WORKLOADS, Rig, measure
from pktbuf.bench.tsc import tsc_hz

POLLS = 200 if QUICK else 2000


class PagePoolRefill:
    params = (list(WORKLOADS), ["bulk", "single"])
    param_names = ["workload", "refill"]
    timeout = 180

    def setup(self, workload, refill):
        self.rig = Rig(refill, workload)          # compiles (first time) and warms

    def time_napi_polls(self, workload, refill):
        self.rig.run(POLLS)

    def track_ns_per_page(self, workload, refill):
        return float(np.median(self.rig.run(POLLS))) * 1e9 / tsc_hz() / NAPI_BUDGET

    track_ns_per_page.unit = "ns"


class PagePoolBulkOverSingle:
    """Pages per second with bulk refill / with single-page refill (alternating runs)."""
    params = [list(WORKLOADS)]
    param_names = ["workload"]
    timeout = 180

    def setup(self, workload):
        Rig("bulk", workload)                     # compile outside the measurement

    def track_bulk_over_single(self, workload):
        return measure(workload, polls=10 * POLLS)["ratio"]

    track_bulk_over_single.unit = "ratio"
