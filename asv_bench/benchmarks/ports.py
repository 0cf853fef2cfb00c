"""Ports: the port table's dispatch against calling the driver's kernels directly, and the
AF_PACKET port against dpdk-testpmd net_af_packet (root only).

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


def _need(r):
    """Skip (asv's NotImplementedError) where the AF_PACKET benchmarks cannot run at all: not
    root, no ip/taskset, one CPU.  Any other failure of pktbuf's side is an error."""
    if r["status"] != "ok":
        if r["reason"].startswith("needs"):
            raise NotImplementedError(r["reason"])
        raise RuntimeError(f"AF_PACKET benchmark failed: {r['reason']}")


def _reference(r, key):
    """testpmd's figure, or an error that says why it failed (never a missing number)."""
    if r["testpmd_status"] != "ok":
        raise RuntimeError(f"reference dpdk-testpmd net_af_packet: {r['testpmd_status']}")
    return r["testpmd"][key]


class AfPacketRx:
    """64-byte rx-only over a veth pair at one fixed offered load, pktbuf fwd against
    dpdk-testpmd net_af_packet in alternating rounds (``pktbuf.bench.ports_afpacket``): busy
    TSC cycles per packet of the receiver.  Needs root; the generator runs on CPU 0."""
    timeout = 900

    def setup_cache(self):
        from pktbuf.bench.ports_afpacket import measure_rx
        return measure_rx(rounds=1 if QUICK else 3, seconds=1.0 if QUICK else 3.0,
                          probe_seconds=0.5 if QUICK else 1.0)

    def setup(self, r):
        _need(r)

    def track_pktbuf_cycles(self, r):
        return r["pktbuf"]["cycles_per_packet"]

    track_pktbuf_cycles.unit = "cycles/packet"

    def track_testpmd_cycles(self, r):
        return _reference(r, "cycles_per_packet")

    track_testpmd_cycles.unit = "cycles/packet"

    def track_ratio(self, r):
        _reference(r, "cycles_per_packet")
        return r["ratio"]

    track_ratio.unit = "ratio"


class AfPacketFwd:
    """64-byte io forwarding between two veth pairs (generator and sink on CPU 0, forwarder on
    CPU 1), pktbuf fwd against dpdk-testpmd net_af_packet: busy cycles per packet at a fixed
    load and the loss-free rate found by search (a lower bound when the generator limits it).
    Needs root."""
    timeout = 1200

    def setup_cache(self):
        from pktbuf.bench.ports_afpacket import measure_fwd
        return measure_fwd(rounds=1 if QUICK else 3, seconds=1.0 if QUICK else 3.0,
                           probe_seconds=0.5 if QUICK else 1.0,
                           search_rounds=1 if QUICK else 3,
                           trial_seconds=0.3 if QUICK else 1.0)

    def setup(self, r):
        _need(r)

    def track_pktbuf_cycles(self, r):
        return r["pktbuf"]["cycles_per_packet"]

    track_pktbuf_cycles.unit = "cycles/packet"

    def track_testpmd_cycles(self, r):
        return _reference(r, "cycles_per_packet")

    track_testpmd_cycles.unit = "cycles/packet"

    def track_pktbuf_loss_free_kpps(self, r):
        return r["pktbuf"]["loss_free_pps"] / 1e3

    track_pktbuf_loss_free_kpps.unit = "kpps"

    def track_testpmd_loss_free_kpps(self, r):
        return _reference(r, "loss_free_pps") / 1e3

    track_testpmd_loss_free_kpps.unit = "kpps"

    def track_rate_ratio(self, r):
        _reference(r, "loss_free_pps")
        return r["rate_ratio"]

    track_rate_ratio.unit = "ratio"


class AfXdp:
    """AF_XDP over veth (``pktbuf bench ports --only afxdp_rx,afxdp_fwd``, same harness and
    same run as the references): busy TSC cycles per 64-byte packet of the receiver at a fixed
    offered load, pktbuf against testpmd net_af_xdp and against pktbuf's AF_PACKET port, and
    the io-forwarding loss-free rate against testpmd's.  Skipped without root or a second CPU;
    a failed pktbuf side is an error, and a failed testpmd makes every track that needs its
    figure an error that says why."""

    timeout = 1800

    def setup_cache(self):
        from pktbuf.bench import ports_afxdp as X
        kw = dict(rounds=1, seconds=1.0, probe_seconds=0.5) if QUICK else \
            dict(rounds=3, seconds=2.0, probe_seconds=1.0)
        rx = X.measure_rx(**kw)
        fwd = X.measure_fwd(search_rounds=1, trial_seconds=0.3 if QUICK else 1.0, **kw)
        return {"rx": rx, "fwd": fwd}

    def setup(self, r):
        _need(r["rx"])
        _need(r["fwd"])

    def track_rx_cycles_per_packet(self, r):
        return r["rx"]["pktbuf"]["cycles_per_packet"]

    track_rx_cycles_per_packet.unit = "cycles/packet"

    def track_rx_vs_testpmd(self, r):
        _reference(r["rx"], "cycles_per_packet")
        return r["rx"]["ratios"]["pktbuf/testpmd"]["median"]

    track_rx_vs_testpmd.unit = "ratio"

    def track_rx_coalesced_vs_af_packet(self, r):
        return r["rx"]["ratios"]["pktbuf_coalesced/pktbuf_af_packet"]["median"]

    track_rx_coalesced_vs_af_packet.unit = "ratio"

    def track_fwd_loss_free_vs_testpmd(self, r):
        _reference(r["fwd"], "loss_free_pps")
        return r["fwd"]["rate_ratio"]

    track_fwd_loss_free_vs_testpmd.unit = "ratio"
