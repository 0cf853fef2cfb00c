"""Software RSS: the Toeplitz hash of IPv4/UDP tuples, pktbuf against DPDK 22.11, same run.

``pktbuf bench rss`` runs :func:`main`; ``asv_bench/benchmarks/rss.py`` uses the same loop.
Work: bulks of 32 IPv4 + ports tuples (12 bytes), DPDK's common default key, taken in turn
from ``NTUPLES`` tuples that both sides make alike (splitmix64 from seed 1, see rss_ref.c).
pktbuf hashes a bulk with :func:`~pktbuf.net.rss.thash.thash_bulk` (the per-byte lookup table)
inside a compiled loop; the DPDK reference (``rss_ref.c``, built with -O3 -march=native)
with ``rte_softrss`` (the key as programmed), ``rte_softrss_be`` (the key converted once) and,
where the CPU and the headers have it, ``rte_thash_gfni_bulk``.  Each side XORs one hash per
bulk into a sink, so no hash can be optimised away, and reports the XOR of all hashes of the
tuple set, which must agree.

Sampling is the core bench's: a sample is ``nchunks`` intervals of ``chunk`` bulks, each
bracketed by fenced TSC reads; an interval of the drop threshold or more was preempted and is
dropped; the empty-pair cost is subtracted.  Every side gets the same tuples, chunk, chunk count
and threshold (chunk calibrated on the slowest side so that none is dropped wholesale), and the
sides take turns sample by sample.  Figures: median ns per packet, and pktbuf / DPDK with a 95 %
bootstrap interval over the samples (below 1: pktbuf is faster).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import cli_number
from .._jit import kernel
from ..net.rss.thash import DEFAULT_RSS_KEY, key_array, new_table, thash_bulk, thash_table_init
from . import results as R
from .core import DROP_US, NEVER, QUICK, BenchError, chunking
from .heap import ratio_ci
from .tsc import pair_overhead_cycles, tsc_begin, tsc_end, tsc_hz

BULK = 32
NTUPLES = 1024
TUPLE_BYTES = 12
PACKETS = 2_000_000      # packets per sample
SOURCE = Path(__file__).with_name("rss_ref.c")
DPDK_KINDS = ("softrss", "softrss_be", "gfni")
LABEL = {"pktbuf": "pktbuf thash_bulk (lookup table)", "softrss": "DPDK rte_softrss",
         "softrss_be": "DPDK rte_softrss_be", "gfni": "DPDK rte_thash_gfni_bulk"}


def make_tuples(n: int = NTUPLES) -> np.ndarray:
    """``n`` IPv4 + ports tuples, (n, 12) uint8 in network order: splitmix64 from seed 1, two
    outputs per tuple (the same tuples as rss_ref.c's)."""
    m = (1 << 64) - 1
    s = 1
    out = np.empty((n, TUPLE_BYTES), np.uint8)

    def mix():
        nonlocal s
        s = (s + 0x9E3779B97F4A7C15) & m
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        return z ^ (z >> 31)

    for k in range(n):
        x, y = mix(), mix()
        out[k] = np.frombuffer(((x >> 32).to_bytes(4, "big") + (x & 0xFFFFFFFF).to_bytes(4, "big")
                                + (y >> 32).to_bytes(4, "big")), np.uint8)
    return out


@kernel
def hash_loop(table, tuples, out, nchunks, chunk, drop_cyc):
    """``nchunks`` timed intervals of ``chunk`` bulks of 32 tuples, taken in turn from
    ``tuples`` (a whole number of bulks).  Returns ``(cycles, kept, dropped, sink)``."""
    nb = tuples.shape[0] // 32
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    sink = np.int64(0)
    b = 0
    for _ in range(nchunks):
        t0 = tsc_begin()
        for it in range(chunk):
            thash_bulk(table, tuples[b * 32:b * 32 + 32], 12, out, 32)
            sink ^= np.int64(out[it & 31])
            b += 1
            if b == nb:
                b = 0
        d = tsc_end() - t0
        if d < drop_cyc:
            acc += d
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped, sink


class RssBench:
    """The table, the tuples and their check value, warm."""

    def __init__(self, ntuples: int = NTUPLES):
        self.tuples = make_tuples(ntuples)
        self.table = new_table()
        thash_table_init(key_array(DEFAULT_RSS_KEY), self.table)
        self.out = np.zeros(BULK, np.uint32)
        allh = np.zeros(ntuples, np.uint32)
        thash_bulk(self.table, self.tuples, TUPLE_BYTES, allh, ntuples)
        self.check = int(np.bitwise_xor.reduce(allh))
        self.hz = tsc_hz()
        self.pair_cyc = pair_overhead_cycles()
        hash_loop(self.table, self.tuples, self.out, 1, 1, np.uint64(NEVER))     # compile

    def cycles(self, nchunks: int, chunk: int, drop_cyc: int) -> list:
        """One sample: cycles per packet, kept, dropped."""
        acc, kept, dropped, _ = hash_loop(self.table, self.tuples, self.out, nchunks, chunk,
                                          np.uint64(drop_cyc))
        if kept == 0:
            raise BenchError(f"rss: all {dropped} intervals were dropped (preempted)")
        return (float(acc) - kept * self.pair_cyc) / (kept * chunk * BULK), int(kept), int(dropped)


def _open_ref(requested: bool):
    from . import dpdk_ref as D
    if not requested:
        return None, R.dpdk_off()
    try:
        exe = D.build(SOURCE, extra_cflags=("-march=native",))
        ref = D.DpdkRef(exe, lcores=1)
    except D.DpdkMissing as e:
        return None, R.dpdk_missing(str(e))
    except D.DpdkFailed as e:
        return None, R.dpdk_failed(str(e))
    eal = " ".join("--file-prefix=pktbuf-ref-*" if a.startswith("--file-prefix=") else a
                   for a in ref.eal)
    d = {"status": "ok", "message": None, "eal_args": list(ref.eal), "info": dict(ref.info),
         "label": f"{ref.info.get('dpdk', 'DPDK')} rte_thash.h, -O3 -march=native, EAL {eal}"}
    return ref, d


def _dpdk_sample(ref, kind, ntuples, nchunks, chunk, drop_cyc, reps=1) -> dict:
    return ref.command(f"rss {kind} {ntuples} {nchunks} {chunk} {int(drop_cyc)} {reps}", "rss")


def measure(reps: int = 11, packets: int = PACKETS, dpdk: bool = True, progress=None) -> dict:
    """Every variant's samples (ns per packet), alternating, and the ratios; see the module
    docstring.  Returns a results document (:mod:`.results`)."""
    say = progress or (lambda m: None)
    bench = RssBench()
    ref, dinfo = _open_ref(dpdk)
    ns_per_cyc = 1e9 / bench.hz
    kinds = ["pktbuf"]
    notes = []
    try:
        if ref is not None:
            kinds += ["softrss", "softrss_be"]
            if ref.info.get("gfni"):
                kinds.append("gfni")
            else:
                notes.append("rte_thash_gfni_bulk: not measured (missing: "
                             f"{ref.info.get('gfni_missing') or 'unknown'})")
        # calibration: the slowest variant's cost per bulk sets the chunk for every variant
        per_bulk = []
        for k in kinds:
            if k == "pktbuf":
                v = min(bench.cycles(8, 4, NEVER)[0] for _ in range(5))
            else:
                r = _dpdk_sample(ref, k, NTUPLES, 8, 4, NEVER, 5)
                if r["check"] != bench.check:
                    raise BenchError(f"{k}: hashes disagree with pktbuf's (check {r['check']:#x} "
                                     f"!= {bench.check:#x})")
                v = min(r["samples_cyc"])
            per_bulk.append(max(v, 0.1) * BULK)
        chunk, drop_cyc = chunking(max(per_bulk), bench.hz)
        drop_cyc = max(drop_cyc, int(DROP_US * 1e-6 * bench.hz))
        nchunks = max(1, packets // (BULK * chunk))
        say(f"  {chunk} bulks of {BULK} per timed interval, {nchunks} intervals per sample, "
            f"{reps} samples per variant, alternating")
        samples = {k: [] for k in kinds}
        kept = {k: [0, 0] for k in kinds}
        for rep in range(reps + 1):                # the first round warms up, discarded
            for k in (kinds if rep % 2 == 0 else kinds[::-1]):
                if k == "pktbuf":
                    cyc, kp, dr = bench.cycles(nchunks, chunk, drop_cyc)
                else:
                    r = _dpdk_sample(ref, k, NTUPLES, nchunks, chunk, drop_cyc)
                    cyc, kp, dr = r["samples_cyc"][0], r["kept"], r["dropped"]
                if rep:
                    samples[k].append(cyc * ns_per_cyc)
                    kept[k][0] += kp
                    kept[k][1] += dr
    finally:
        if ref is not None:
            ref.close()
    rows = [{"variant": k, "label": LABEL[k],
             "ns_per_packet": R.figure(samples[k], kept[k][0], kept[k][1])} for k in kinds]
    extras = []
    for k in kinds[1:]:
        r, lo, hi = ratio_ci(samples["pktbuf"], samples[k])
        extras.append({"name": f"pktbuf / {LABEL[k]}", "value": r, "ci": [lo, hi],
                       "unit": "x ns per packet (95% CI; below 1: pktbuf faster)",
                       "target": "<= 1.0" if k == "softrss" else None})
    method = {"bulk": BULK, "tuple_bytes": TUPLE_BYTES, "ntuples": NTUPLES, "reps": reps,
              "chunk": chunk, "nchunks": nchunks, "drop_cyc": drop_cyc,
              "packets_per_sample": nchunks * chunk * BULK, "tsc_hz": round(bench.hz),
              "key": "DPDK test_thash default_rss_key (Intel 82599)", "notes": notes,
              "interleaved": True}
    return {"rows": rows, "extras": extras, "method": method, "dpdk": dinfo,
            "machine": R.machine_info(bench.hz)}


def print_table(doc: dict, out=None) -> None:
    from .report import dpdk_line
    p = lambda s="": print(s, file=out or sys.stdout)   # noqa: E731
    m = doc["method"]
    p(f"\nsoftware RSS, Toeplitz over IPv4/UDP tuples ({m['tuple_bytes']} B), bulks of "
      f"{m['bulk']}: median of {m['reps']} samples of {m['packets_per_sample']} packets, "
      f"alternating")
    p(dpdk_line(doc["dpdk"]))
    p(f"{'variant':<36} {'ns/packet':>10} {'Mpps':>8} {'samples':>8} {'dropped':>8}")
    for r in doc["rows"]:
        f = r["ns_per_packet"]
        p(f"{r['label']:<36} {f['median']:>10.2f} {1e3 / f['median']:>8.1f} "
          f"{len(f['samples']):>8} {f.get('dropped', 0):>8}")
    for n in m.get("notes", ()):
        p(n)
    for e in doc["extras"]:
        tgt = f"  (target {e['target']})" if e.get("target") else ""
        p(f"{e['name']:<44} {e['value']:>6.3f} [{e['ci'][0]:.3f}, {e['ci'][1]:.3f}] "
          f"{e['unit']}{tgt}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="pktbuf bench rss", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=cli_number(int, 1, 10**6), default=11, help="samples per variant (medians shown)")
    ap.add_argument("--quick", action="store_true", help="3 short samples per variant")
    ap.add_argument("--no-dpdk", action="store_true", help="pktbuf alone (no C reference)")
    ap.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    a = ap.parse_args(argv)
    quick = a.quick or QUICK
    reps = 3 if quick else max(1, a.reps)
    packets = PACKETS // 20 if quick else PACKETS
    t0 = time.perf_counter()
    print("compiling / warming ...", file=sys.stderr, flush=True)
    res = measure(reps, packets, not a.no_dpdk,
                  lambda m: print(m, file=sys.stderr, flush=True))
    res["method"]["seconds"] = round(time.perf_counter() - t0, 1)
    doc = R.document("rss", argv, res["machine"], res["method"], res["dpdk"], res["rows"],
                     res["extras"])
    print_table(doc)
    if a.json:
        R.write_json(doc, a.json)
    return 1 if res["dpdk"]["status"] == "failed" else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
