"""The port model: the port table's dispatch against calling the driver's kernels directly.

Timed inside Numba by ``pktbuf.bench.ports`` (fenced TSC reads, alternating samples); asv's
``track_`` records ns per packet for a 32-packet tx_burst + rx_burst on a loopback ring port.
"""
from pktbuf.bench.core import QUICK
from pktbuf.bench.ports import measure_dispatch


class Dispatch:
    timeout = 300

    def setup_cache(self):
        return measure_dispatch(samples=3 if QUICK else 11)

    def track_dispatch_ns(self, r):
        return r["dispatch_ns_per_pkt"]

    track_dispatch_ns.unit = "ns/packet"

    def track_direct_ns(self, r):
        return r["direct_ns_per_pkt"]

    track_direct_ns.unit = "ns/packet"

    def track_ratio(self, r):
        return r["ratio"]

    track_ratio.unit = "ratio"
