"""Raw mempool get_bulk + put_bulk through the lcore cache (against DPDK: docs/performance.md)."""
from pktbuf.bench.core import BURSTS

from .mbuf import _bench


class RawMempool:
    params = (list(BURSTS),)
    param_names = ["burst"]

    def setup(self, burst):
        self.b = _bench()

    def track_get_put(self, burst):
        return self.b.median("raw", burst)

    track_get_put.unit = "ns/obj"
