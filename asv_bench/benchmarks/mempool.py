"""Raw mempool get_bulk + put_bulk through the lcore cache (against DPDK: docs/performance.md)."""
from .mbuf import Q_BURSTS, _bench


class RawMempool:
    params = (Q_BURSTS,)
    param_names = ["burst"]

    def setup(self, burst):
        self.b = _bench()

    def track_get_put(self, burst):
        return self.b.median("raw", burst)

    track_get_put.unit = "ns/obj"

    def track_vs_copy(self, burst):
        """Raw get + put over ``ref_copy`` -- a plain-Numba loop moving the same handles (n
        out of a stack in reverse, n back), no pktbuf kernel in it -- timed in the same process
        moments apart.  It is a yardstick, not a cost split (LLVM compiles the two loops
        differently, so the ratio may be below 1): both are L1-resident integer loops that
        scale alike with a machine's core, so the ratio moves with pktbuf's code only.  Lower
        is better."""
        return self.b.ratio("raw", burst, "ref_copy")

    track_vs_copy.unit = "ratio"
