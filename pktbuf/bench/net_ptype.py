"""Packet type + IPv4 header checksum of a burst, pktbuf against DPDK 22.11, same run.

Work, per packet of a burst of 32 Ethernet/IPv4/UDP frames of 64 bytes (one segment each,
addresses and ports varying, checksums right): the packet type with every layer
(pktbuf :func:`~pktbuf.net.ptype.mbuf.net_get_ptype`, which stores ``packet_type`` and the
lengths; DPDK ``rte_net_get_ptype`` with the type and ``l2/l3/l4_len`` stored in the
``rte_mbuf`` the same way), then the IPv4 header checksum of the header at ``l2_len``
(pktbuf :func:`~pktbuf.net.cksum.ipv4.ipv4_cksum`, DPDK ``rte_ipv4_cksum``; 0 = right).  The
C side (``ptype_ref.c``, -O3 -march=native) runs on real ``rte_mbuf``\\ s from an
``rte_pktmbuf_pool`` holding the same frames; both report a check value (sum of types and
checksums over one burst) that must agree.

Sampling as in :mod:`.rss`: a sample is ``nchunks`` intervals of ``chunk`` bursts between
fenced TSC reads, intervals of the drop threshold or more (preempted) dropped, the empty-pair
cost subtracted; the two sides take turns sample by sample.  Figures: median ns per packet
and pktbuf / DPDK with a 95 % bootstrap interval (below 1: pktbuf is faster).

``python -m pktbuf.bench.net_ptype [--quick] [--no-dpdk] [--json FILE]``; :func:`run` for
code and tests.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .._jit import kernel
from ..buf.mbuf.data import pktmbuf_mtod
from ..net.cksum.ipv4 import ipv4_cksum
from ..net.ptype.mbuf import net_get_ptype
from ..net.ptype.values import PTYPE_ALL_MASK, PTYPE_L3_IPV4
from . import results as R
from .core import DROP_US, NEVER, BenchError, chunking
from .heap import ratio_ci
from .tsc import pair_overhead_cycles, tsc_begin, tsc_end, tsc_hz

BURST = 32
FRAME_LEN = 64
PACKETS = 1_000_000              # packets per sample
SOURCE = Path(__file__).with_name("ptype_ref.c")


def _fold(s: int) -> int:
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def make_frames(n: int = BURST) -> list[bytes]:
    """``n`` 64-byte Ethernet/IPv4/UDP frames, addresses and ports from a counter, IPv4
    checksum right (written here, by the RFC 1071 definition)."""
    out = []
    for k in range(n):
        payload = bytes((k + i) & 0xFF for i in range(FRAME_LEN - 42))
        udp = (1024 + k).to_bytes(2, "big") + (4000 + 3 * k).to_bytes(2, "big") \
            + (8 + len(payload)).to_bytes(2, "big") + bytes(2) + payload
        ip = bytearray(bytes([0x45, 0]) + (20 + len(udp)).to_bytes(2, "big") + k.to_bytes(2, "big")
                       + bytes([0x40, 0, 64, 17, 0, 0]) + bytes([10, 0, k >> 8, k & 0xFF])
                       + bytes([192, 168, 1, (7 * k) & 0xFF]))
        s = sum((ip[i] << 8) | ip[i + 1] for i in range(0, 20, 2))
        ip[10:12] = (~_fold(s) & 0xFFFF).to_bytes(2, "big")
        eth = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
        out.append(eth + bytes(ip) + udp)
    return out


@kernel(inline="always")
def _burst(dom, hs, n):
    sink = np.int64(0)
    good = 0
    for i in range(n):
        h = np.int64(hs[i])
        pt = net_get_ptype(dom, h, PTYPE_ALL_MASK)
        if pt & PTYPE_L3_IPV4:
            l2 = np.int64(dom.mb[h].tx_offload & np.uint64(0x7F))
            c = ipv4_cksum(pktmbuf_mtod(dom, h) + l2)
            good += c == 0
            sink += c
        sink += pt
    return sink, good


@kernel
def check_burst(dom, hs, n):
    """``(check, good)`` of one burst: the sum of the types and checksums, the count of right
    checksums -- what ptype_ref.c's ``bench`` reports."""
    return _burst(dom, hs, n)


@kernel
def ptype_loop(dom, hs, n, nchunks, chunk, drop_cyc):
    """``nchunks`` timed intervals of ``chunk`` bursts: ``(cycles, kept, dropped, sink)``."""
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    sink = np.int64(0)
    for _ in range(nchunks):
        t0 = tsc_begin()
        for _ in range(chunk):
            s, g = _burst(dom, hs, n)
            sink += s + g
        d = tsc_end() - t0
        if d < drop_cyc:
            acc += d
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped, sink


class PtypeBench:
    """A pool with the burst's mbufs, warm kernels, the check value."""

    def __init__(self):
        from ..buf.domain.domain import Domain
        from ..buf.domain.pools import PktmbufPool
        self.domain = Domain(max_objects=1 << 12, max_ring_slots=1 << 13)
        self.pool = PktmbufPool(256, 0, domain=self.domain)
        self.frames = make_frames()
        self.mbufs = [self.pool.alloc().append_bytes(f) for f in self.frames]
        self.hs = np.array([m.handle for m in self.mbufs], np.int32)
        self.st = self.domain.state
        c, g = check_burst(self.st, self.hs, BURST)
        if g != BURST:
            raise BenchError(f"net_ptype: {BURST - g} of the frames' IPv4 checksums are wrong")
        self.check = int(c)
        self.hz = tsc_hz()
        self.pair_cyc = pair_overhead_cycles()
        ptype_loop(self.st, self.hs, BURST, 1, 1, np.uint64(NEVER))       # compile

    def cycles(self, nchunks: int, chunk: int, drop_cyc: int):
        acc, kept, dropped, _ = ptype_loop(self.st, self.hs, BURST, nchunks, chunk,
                                           np.uint64(drop_cyc))
        if kept == 0:
            raise BenchError(f"net_ptype: all {dropped} intervals were dropped (preempted)")
        return (float(acc) - kept * self.pair_cyc) / (kept * chunk * BURST), int(kept), int(dropped)

    def close(self):
        for m in self.mbufs:
            m.free()
        self.pool.close(force=True)


def _open_ref(requested: bool):
    from . import dpdk_ref as D
    if not requested:
        return None, R.dpdk_off()
    try:
        ref = D.DpdkRef(D.build(SOURCE, extra_cflags=("-march=native",)), lcores=1)
    except D.DpdkMissing as e:
        return None, R.dpdk_missing(str(e))
    except D.DpdkFailed as e:
        return None, R.dpdk_failed(str(e))
    eal = " ".join("--file-prefix=pktbuf-ref-*" if a.startswith("--file-prefix=") else a
                   for a in ref.eal)
    return ref, {"status": "ok", "message": None, "eal_args": list(ref.eal),
                 "info": dict(ref.info),
                 "label": f"{ref.info.get('dpdk', 'DPDK')} rte_net_get_ptype + rte_ipv4_cksum, "
                          f"-O3 -march=native, EAL {eal}"}


def run(quick: bool = False, dpdk: bool = True, reps: int | None = None) -> dict:
    """Measure both sides, interleaved; returns the figures (ns per packet, ratio, samples)
    and how they were taken.  ``quick``: 3 samples of 1/20 the packets (seconds)."""
    reps = reps or (3 if quick else 11)
    packets = PACKETS // 20 if quick else PACKETS
    bench = PtypeBench()
    ref, dinfo = _open_ref(dpdk)
    ns_per_cyc = 1e9 / bench.hz
    sides = ["pktbuf"] + (["dpdk"] if ref is not None else [])
    try:
        per_burst = [min(bench.cycles(8, 4, NEVER)[0] for _ in range(3)) * BURST]
        if ref is not None:
            ld = ref.command("load " + " ".join(f.hex() for f in bench.frames), "load")
            if ld["n"] != BURST:
                raise BenchError(f"ptype_ref loaded {ld['n']} frames of {BURST}")
            r = ref.command(f"bench 8 4 {NEVER} 3", "bench")
            if r["check"] != bench.check or r["good"] != BURST:
                raise BenchError(f"DPDK disagrees: check {r['check']} != {bench.check} or "
                                 f"{r['good']} good checksums of {BURST}")
            per_burst.append(min(r["samples_cyc"]) * BURST)
        chunk, drop_cyc = chunking(max(max(per_burst), 1.0), bench.hz)
        drop_cyc = max(drop_cyc, int(DROP_US * 1e-6 * bench.hz))
        nchunks = max(1, packets // (BURST * chunk))
        samples = {s: [] for s in sides}
        kept = {s: [0, 0] for s in sides}
        for rep in range(reps + 1):                   # round 0 warms up and is discarded
            for s in (sides if rep % 2 == 0 else sides[::-1]):
                if s == "pktbuf":
                    cyc, kp, dr = bench.cycles(nchunks, chunk, drop_cyc)
                else:
                    r = ref.command(f"bench {nchunks} {chunk} {drop_cyc} 1", "bench")
                    cyc, kp, dr = r["samples_cyc"][0], r["kept"], r["dropped"]
                if rep:
                    samples[s].append(cyc * ns_per_cyc)
                    kept[s][0] += kp
                    kept[s][1] += dr
    finally:
        if ref is not None:
            ref.close()
        bench.close()
    out = {"bench": "net_ptype", "burst": BURST, "frame_len": FRAME_LEN, "reps": reps,
           "chunk": chunk, "nchunks": nchunks, "packets_per_sample": nchunks * chunk * BURST,
           "tsc_hz": round(bench.hz), "interleaved": True, "check": bench.check,
           "dpdk": dinfo, "machine": R.machine_info(bench.hz),
           "pktbuf_ns_per_packet": R.figure(samples["pktbuf"], *kept["pktbuf"])}
    if "dpdk" in samples:
        out["dpdk_ns_per_packet"] = R.figure(samples["dpdk"], *kept["dpdk"])
        r, lo, hi = ratio_ci(samples["pktbuf"], samples["dpdk"])
        out["ratio"] = {"value": r, "ci": [lo, hi],
                        "unit": "pktbuf / DPDK ns per packet (95% CI; below 1: pktbuf faster)"}
    return out


def print_table(doc: dict, out=None) -> None:
    p = lambda s="": print(s, file=out or sys.stdout)   # noqa: E731
    p(f"\nptype (all layers) + IPv4 header checksum, {doc['frame_len']} B IPv4/UDP, bursts of "
      f"{doc['burst']}: median of {doc['reps']} samples of {doc['packets_per_sample']} "
      f"packets, alternating")
    d = doc["dpdk"]
    p(f"DPDK: {d['label'] if d['status'] == 'ok' else d['status'] + ' -- ' + str(d['message'])}")
    for key, label in (("pktbuf_ns_per_packet", "pktbuf net_get_ptype + ipv4_cksum"),
                       ("dpdk_ns_per_packet", "DPDK rte_net_get_ptype + rte_ipv4_cksum")):
        if key in doc:
            f = doc[key]
            p(f"{label:<44} {f['median']:>8.2f} ns/packet {1e3 / f['median']:>8.1f} Mpps "
              f"({len(f['samples'])} samples, {f.get('dropped', 0)} intervals dropped)")
    if "ratio" in doc:
        r = doc["ratio"]
        p(f"{'pktbuf / DPDK':<44} {r['value']:>8.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pktbuf.bench.net_ptype",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 short samples per side")
    ap.add_argument("--reps", type=int, default=None, help="samples per side (default 11)")
    ap.add_argument("--no-dpdk", action="store_true", help="pktbuf alone")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    doc = run(a.quick, not a.no_dpdk, a.reps)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    print_table(doc)
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 1 if doc["dpdk"]["status"] == "failed" else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
