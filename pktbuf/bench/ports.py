"""``pktbuf bench ports``: the port model's costs, each against its reference in the same run.

Sections (``--only`` picks some):

* ``dispatch``: what the port table costs.  A loopback ring port, 32-packet bursts: Tx then Rx
  through the dispatching ``tx_burst``/``rx_burst`` (port id -> kind -> the driver's kernel)
  against the same loop calling ``eth_ring_tx_burst``/``eth_ring_rx_burst`` with the queue
  block directly.  Samples alternate between the two, timed in-JIT with fenced TSC reads in
  chunks of whole iterations (a chunk hit by preemption, over 4x the median, is dropped);
  reported as ns per packet (median of the samples) and their ratio.
* ``afpacket_rx``: the AF_PACKET port receiving 64-byte frames over a veth pair (``pktbuf fwd
  --forward-mode rxonly``) against ``dpdk-testpmd --vdev net_af_packet0,...`` rxonly: busy
  TSC cycles per packet of the receiver on CPU 1 at one fixed offered load from a paced
  generator on CPU 0, alternating rounds (:mod:`.ports_afpacket`; needs root).
* ``afpacket_fwd``: io forwarding between two veth pairs, pktbuf fwd against testpmd: busy
  cycles per packet at a fixed load, and the loss-free rate (zero loss at the sink).

* ``afxdp_rx`` / ``afxdp_fwd``: the same two measures on AF_XDP ports (:mod:`.ports_afxdp`),
  against ``dpdk-testpmd --vdev net_af_xdp0,...`` and, for rx, pktbuf's own AF_PACKET port.

* ``pcap``: reading and writing 64-byte frames in capture files (:mod:`.pcap`): pktbuf's burst
  kernels against dpkt's ``Reader`` iteration and ``Writer.writepkts`` (alternating
  repetitions, medians), and against ``dpdk-testpmd``'s ``net_pcap`` (rxonly over a file,
  txonly into one) in the same run.

The AF_PACKET method is in docs/bench.md ("AF_PACKET ports"); the pcap one in docs/pcap.md.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from numba import njit

from ..errors import cli_number
from ..kernels import eth_ring_rx_burst, eth_ring_tx_burst, rx_burst, tx_burst
from .tsc import tsc_begin, tsc_end, tsc_hz

SECTIONS = ("dispatch", "pcap", "afpacket_rx", "afpacket_fwd", "afxdp_rx", "afxdp_fwd")
BURST = 32


@njit(cache=True, nogil=True)
def _loop_dispatch(eth, pkts, iters, chunk, out):
    """Per chunk of ``chunk`` iterations: tx_burst + rx_burst of BURST packets; cycles."""
    for c in range(out.size):
        t0 = tsc_begin()
        for _ in range(chunk):
            k = tx_burst(eth, 0, 0, 0, pkts, BURST)
            rx_burst(eth, 0, 0, 0, pkts, k)
        out[c] = tsc_end() - t0


@njit(cache=True, nogil=True)
def _loop_direct(dom, txq, rxq, pkts, iters, chunk, out):
    for c in range(out.size):
        t0 = tsc_begin()
        for _ in range(chunk):
            k = eth_ring_tx_burst(dom, txq, 0, pkts, BURST)
            eth_ring_rx_burst(dom, rxq, 0, pkts, k)
        out[c] = tsc_end() - t0


def _median_kept(cycles: np.ndarray) -> float:
    med = float(np.median(cycles))
    kept = cycles[cycles <= 4 * med]
    return float(np.median(kept))


def measure_dispatch(samples: int = 21, chunks: int = 200, chunk: int = 50) -> dict:
    """ns per packet (tx + rx) through the port table and directly; same loop, same ring."""
    import pktbuf
    pool = pktbuf.PktmbufPool(1024, 0)
    ports = pktbuf.Ports(pool)
    try:
        lo = ports.open("net_ring0")
        pkts = pool.alloc_bulk(BURST)
        dom, eth = pool.domain.state, ports.state
        txq, rxq = lo.tx_queue(0), lo.rx_queue(0)
        buf = np.empty(chunks, np.uint64)
        _loop_dispatch(eth, pkts, 0, 1, buf[:1])              # compile / load, warm
        _loop_direct(dom, txq, rxq, pkts, 0, 1, buf[:1])
        per = BURST * chunk
        hz = tsc_hz()
        res = {"dispatch": [], "direct": []}
        for _ in range(samples):
            _loop_dispatch(eth, pkts, 0, chunk, buf)
            res["dispatch"].append(_median_kept(buf) / per / hz * 1e9)
            _loop_direct(dom, txq, rxq, pkts, 0, chunk, buf)
            res["direct"].append(_median_kept(buf) / per / hz * 1e9)
        pool.domain.free_bulk(pkts)
    finally:
        ports.close()
        pool.close(force=True)
    d, r = float(np.median(res["dispatch"])), float(np.median(res["direct"]))
    ratios = sorted(a / b for a, b in zip(res["dispatch"], res["direct"]))
    return {"dispatch_ns_per_pkt": d, "direct_ns_per_pkt": r, "ratio": d / r,
            "ratio_p10_p90": (ratios[len(ratios) // 10], ratios[(9 * len(ratios)) // 10]),
            "samples": samples}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pktbuf bench ports", description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated subset of %(default)s")
    ap.add_argument("--quick", action="store_true", help="fewer samples")
    ap.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    ap.add_argument("--rounds", type=cli_number(int, 1, 10**6), default=5,
                    help="AF_PACKET: alternating pktbuf/testpmd rounds at the fixed load")
    ap.add_argument("--seconds", type=cli_number(float, 0.001, 86400), default=3.0,
                    help="AF_PACKET: seconds of offered load per run")
    ap.add_argument("--rate", type=cli_number(float, 0.001, 1e9), default=None, metavar="KPPS",
                    help="AF_PACKET: the fixed offered load in kpps (default: half the lower "
                         "unpaced rate, measured first)")
    ap.add_argument("--search-rounds", type=cli_number(int, 1, 10**6), default=3,
                    help="afpacket_fwd: alternating loss-free searches per side")
    ap.add_argument("--no-testpmd", action="store_true", help="AF_PACKET: pktbuf only")
    ap.add_argument("--nice", type=cli_number(int, -20, 19), default=0,
                    help="AF_PACKET: run both sides' receiver/forwarder at this nice value "
                         "(negative: a larger CPU share on a shared machine)")
    ap.add_argument("--idle-backoff", action="store_true",
                    help="AF_PACKET/AF_XDP: pktbuf's receiver/forwarder backs off when idle "
                         "(pktbuf fwd's default) instead of polling without pause as testpmd "
                         "does (the default here: the same polling on both sides)")
    a = ap.parse_args(argv)
    only = [s for s in a.only.split(",") if s]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {SECTIONS}")
    if a.quick:
        a.rounds, a.seconds, a.search_rounds = 1, 1.0, 1
    if a.rounds < 1 or a.seconds <= 0 or a.search_rounds < 1 or (a.rate is not None
                                                                  and a.rate <= 0):
        ap.error("--rounds and --search-rounds must be >= 1, --seconds and --rate > 0")
    rate = a.rate * 1e3 if a.rate is not None else None
    out = {}
    rc = 0
    if "dispatch" in only:
        r = out["dispatch"] = measure_dispatch(samples=5 if a.quick else 21)
        print("\nport table dispatch, loopback ring port, 32-packet tx_burst + rx_burst")
        print(f"  through rx_burst/tx_burst (port id):  {r['dispatch_ns_per_pkt']:6.2f} ns/packet")
        print(f"  driver kernels directly (queue block): {r['direct_ns_per_pkt']:6.2f} ns/packet")
        lo, hi = r["ratio_p10_p90"]
        print(f"  ratio {r['ratio']:.3f}x (p10-p90 of per-sample ratios {lo:.3f}-{hi:.3f}, "
              f"{r['samples']} alternating samples)")
    if "pcap" in only:
        from . import pcap as PC
        r = out["pcap"] = PC.compare(n=50_000 if a.quick else 200_000,
                                     repeat=1 if a.quick else 5)
        tp = PC.testpmd_rates(n=200_000 if a.quick else 2_000_000,
                              seconds=0.5 if a.quick else 1.0)
        r.update(tp)
        print(f"\npcap, {r['size']}-byte frames, Mpps (medians of {r['repeat']}; targets: "
              f">= 50x dpkt, >= 1.0x testpmd)")
        for op in ("read", "write"):
            line = (f"  {op:<5} pktbuf {r['pktbuf_' + op]:7.2f}   dpkt {r['dpkt_' + op]:6.3f} "
                    f"({r[op + '_ratio']:6.1f}x)")
            t = r.get("testpmd_" + op)
            line += (f"   testpmd net_pcap {t:6.2f} ({r['pktbuf_' + op] / t:5.2f}x)" if t
                     else "   testpmd net_pcap: not available" if not tp
                     else "   testpmd net_pcap: FAILED (no rate)")
            print(line)
        print(f"  write into /dev/null (the writers' own work): pktbuf "
              f"{r['pktbuf_write_null']:7.2f}   dpkt {r['dpkt_write_null']:6.3f} "
              f"({r['write_null_ratio']:6.1f}x)")
        print(f"  plain 1 MiB write() of the same bytes into a new file: "
              f"{r['file_write_floor']:7.2f} Mpps (every writer's ceiling there)")
    kinds = [k for k in ("afpacket", "afxdp") if f"{k}_rx" in only or f"{k}_fwd" in only]
    if kinds:
        from . import ports_afpacket as A
        from . import ports_afxdp as X
        from . import ports_sides as S
        import os
        S.NICE["value"] = a.nice
        S.BUSY_POLL["value"] = not a.idle_backoff
        meta = out["afpacket"] = {"loadavg_start": os.getloadavg(), "cpus": os.cpu_count(),
                                  "argv": sys.argv, "quick": a.quick, "nice": a.nice,
                                  "pktbuf_polling": "backoff" if a.idle_backoff else "busy"}
        probe = 0.5 if a.quick else 1.0
        for kind, mod in (("afpacket", A), ("afxdp", X)):
            if f"{kind}_rx" in only:
                r = out[f"{kind}_rx"] = mod.measure_rx(rounds=a.rounds, seconds=a.seconds,
                                                       probe_seconds=probe, rate=rate,
                                                       testpmd=not a.no_testpmd)
                rc |= mod.print_rx(r)
            if f"{kind}_fwd" in only:
                r = out[f"{kind}_fwd"] = mod.measure_fwd(
                    rounds=a.rounds, seconds=a.seconds, probe_seconds=probe, rate=rate,
                    search_rounds=a.search_rounds, trial_seconds=0.3 if a.quick else 1.0,
                    testpmd=not a.no_testpmd)
                rc |= mod.print_fwd(r)
        meta["loadavg_end"] = os.getloadavg()
        print(f"\n  load average {meta['loadavg_start'][0]:.2f} at start, "
              f"{meta['loadavg_end'][0]:.2f} at the end ({meta['cpus']} CPUs)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
