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


class AfXdp:
    """AF_XDP over veth (``pktbuf bench ports --only afxdp_rx,afxdp_fwd``, same harness and
    same run as the references): busy TSC cycles per 64-byte packet of the receiver at a fixed
    offered load, pktbuf against testpmd net_af_xdp and against pktbuf's AF_PACKET port, and
    the io-forwarding loss-free rate against testpmd's.  Needs root and dpdk-testpmd; skipped
    otherwise."""

    timeout = 1800

    def setup_cache(self):
        from pktbuf.bench import ports_afxdp as X
        kw = dict(rounds=1, seconds=1.0, probe_seconds=0.5) if QUICK else \
            dict(rounds=3, seconds=2.0, probe_seconds=1.0)
        rx = X.measure_rx(**kw)
        fwd = X.measure_fwd(search_rounds=1, trial_seconds=0.3 if QUICK else 1.0, **kw)
        if rx["status"] != "ok" or fwd["status"] != "ok":
            raise NotImplementedError(rx.get("reason") or fwd.get("reason"))
        return {"rx": rx, "fwd": fwd}

    @staticmethod
    def _ratio(r, key):
        v = r["rx"].get("ratios", {}).get(key)
        return float("nan") if v is None else v["median"]

    def track_rx_cycles_per_packet(self, r):
        return r["rx"]["pktbuf"]["cycles_per_packet"]

    track_rx_cycles_per_packet.unit = "cycles/packet"

    def track_rx_vs_testpmd(self, r):
        return self._ratio(r, "pktbuf/testpmd")

    track_rx_vs_testpmd.unit = "ratio"

    def track_rx_coalesced_vs_af_packet(self, r):
        return self._ratio(r, "pktbuf_coalesced/pktbuf_af_packet")

    track_rx_coalesced_vs_af_packet.unit = "ratio"

    def track_fwd_loss_free_vs_testpmd(self, r):
        v = r["fwd"].get("rate_ratio")
        return float("nan") if v is None else v

    track_fwd_loss_free_vs_testpmd.unit = "ratio"
