"""Page pool: bulk vs single-page slow-path refill (Linux's 2021 bulk refill claim: +18.8 %).

Workloads (see :mod:`pktbuf.bench.pagepool`): ``release`` -- pages leave the pool and go back to
the page allocator, the XDP-redirect case where every refill is a slow path; ``ring`` -- pages
come back through the recycle ring; ``direct`` -- pages are recycled into the alloc cache.
Each timed call is one nogil kernel running NAPI-style polls of 64 allocations.
"""
from pktbuf.bench.pagepool import WORKLOADS, NAPI_BUDGET, Rig, batches_for, measure


class PagePoolRefill:
    params = (list(WORKLOADS), ["bulk", "single"])
    param_names = ["workload", "refill"]
    timeout = 180

    def setup(self, workload, refill):
        self.s = Rig(refill, workload)          # compiles (first time) and warms
        self.batches = batches_for()

    def time_napi_polls(self, workload, refill):
        self.s.run(self.batches)

    def track_mpages_per_s(self, workload, refill):
        dt = sorted(self.s.run(self.batches) for _ in range(9))[4]
        return self.batches * NAPI_BUDGET / dt / 1e6

    track_mpages_per_s.unit = "Mpages/s"


class PagePoolBulkOverSingle:
    """Pages per second with bulk refill / with single-page refill, measured interleaved."""
    params = [list(WORKLOADS)]
    param_names = ["workload"]
    timeout = 180

    def setup(self, workload):
        Rig("bulk", workload)                   # compile outside the measurement

    def track_bulk_over_single(self, workload):
        return measure(workload, repeat=9)["ratio"]

    track_bulk_over_single.unit = "ratio"
