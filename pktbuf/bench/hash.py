"""The exact-match hash table, pktbuf against DPDK 22.11's ``rte_hash``, same run.

``python -m pktbuf.bench.hash [--quick]`` runs :func:`main`; :func:`run` returns the results
as a dict (for ``pktbuf bench net``).  Work, as l3fwd's exact-match lookups: a table of
``ENTRIES`` (2**20) entries holding ``NKEYS`` (1,000,000) 16-byte keys, each with its index
as data; CRC32-C hash, init 0; a stream of ``NLOOK`` lookups, half of them hits, in bursts of
32.  Both sides make the same keys and the same stream (splitmix64, see ``hash_ref.c``): key
``i`` = outputs ``2i`` and ``2i+1`` of splitmix64 from ``SEED`` (little-endian); keys
``NKEYS .. 2*NKEYS-1`` are the misses; lookup ``j``: ``r`` = output ``j`` from
``STREAM_SEED``, ``r & 1`` hit or miss, ``(r >> 1) % NKEYS`` which key.

Variants: pktbuf (one writer, lock-free readers, always), DPDK with
``RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF`` (the same guarantees: the target ratio is against
it) and DPDK with no flags (no concurrency at all, for reference).  Figures, in TSC cycles per
key: ``lookup_bulk`` (the target), ``lookup_bulk_data``, ``lookup`` (32 single lookups per
burst), and per operation ``add`` and ``delete`` (delete ``NDEL`` consecutive keys, then add
them back, at the table's full load; DPDK-LF also frees each deleted position at once, which
pktbuf's delete does by itself).  Before timing, each side runs the whole stream once and
reports its hits, the sum of position + 1 over hits and the sum of the data found: they must
agree (the bench refuses otherwise) -- positions agree because both sides hand out slots from a
FIFO of free slots in the same order.

Sampling as ``pktbuf bench rss``: a sample is ``nchunks`` intervals of ``chunk`` bursts, each
bracketed by fenced TSC reads; an interval of the drop threshold or more was preempted and is
dropped; the empty-pair cost is subtracted.  Every variant gets the same chunk (calibrated on
the slowest), and the variants take turns sample by sample (the order reversed every other
round).  Reported: medians, min and max of the samples, and pktbuf / DPDK with a 95 %
bootstrap interval.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import sys
import time
from pathlib import Path

import numpy as np

from .._jit import kernel
from ..net.hash.table import (hash_add_key_data, hash_count, hash_del_key, hash_lookup,
                              hash_lookup_bulk, hash_lookup_bulk_data, new_table)
from . import dpdk_ref as D
from .tsc import pair_overhead_cycles, tsc_begin, tsc_end, tsc_hz

KEY_LEN = 16
BURST = 32
ENTRIES = 1 << 20
NKEYS = 1_000_000
NLOOK = 1 << 20
NDEL = 10_000
SEED = 1
STREAM_SEED = 7
QUICK_SIZES = dict(entries=1 << 14, nkeys=15_000, nlook=1 << 14, ndel=1000)
FLAG_LF = 0x20                  # RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF
SOURCE = Path(__file__).with_name("hash_ref.c")
OPS = ("lookup_bulk", "lookup_bulk_data", "lookup", "add", "delete")
LOOKUP_KIND = {"lookup_bulk": "bulk", "lookup_bulk_data": "bulk_data", "lookup": "single"}
LABEL = {"pktbuf": "pktbuf (1 writer, lock-free readers)",
         "dpdk_lf": "DPDK rte_hash RW_CONCURRENCY_LF",
         "dpdk": "DPDK rte_hash, no flags"}
DPDK_FLAGS = {"dpdk_lf": FLAG_LF, "dpdk": 0}
CHUNK_NS = 20_000.0             # a timed interval lasts about this long
DROP_US = 200.0                 # an interval this long was preempted
NEVER = 1 << 62


class BenchError(RuntimeError):
    """The two sides disagree, or a sample could not be taken."""


# ---------------------------------------------------------------------------------------------
# keys and stream (hash_ref.c makes the same)

def splitmix64(seed: int, n: int) -> np.ndarray:
    """The first ``n`` outputs of splitmix64 from ``seed`` (state ``seed + k * golden``)."""
    g = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + g * np.arange(1, n + 1, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def make_keys(nkeys: int, seed: int = SEED) -> np.ndarray:
    """``2 * nkeys`` keys, (2n, 16) uint8: the ``nkeys`` to add, then as many misses."""
    return splitmix64(seed, 4 * nkeys).astype("<u8").view(np.uint8).reshape(2 * nkeys, KEY_LEN)


def make_stream(keys: np.ndarray, nkeys: int, nlook: int, seed: int = STREAM_SEED) -> np.ndarray:
    """The lookup stream, (nlook, 16) uint8: half hits, half misses, at random."""
    r = splitmix64(seed, nlook)
    k = (r >> np.uint64(1)) % np.uint64(nkeys)
    hit = (r & np.uint64(1)).astype(bool)
    idx = np.where(hit, k, k + np.uint64(nkeys)).astype(np.int64)
    return np.ascontiguousarray(keys[idx])


# ---------------------------------------------------------------------------------------------
# pktbuf's compiled loops

@kernel
def fill_loop(blk, keys, first, n):
    """Add keys ``first .. first+n-1`` with their index as data: (cycles, failures)."""
    fails = 0
    t0 = tsc_begin()
    for i in range(first, first + n):
        if hash_add_key_data(blk, keys[i], i) < 0:
            fails += 1
    return tsc_end() - t0, fails


@kernel
def del_loop(blk, keys, first, n):
    """Delete keys ``first .. first+n-1``: (cycles, failures)."""
    fails = 0
    t0 = tsc_begin()
    for i in range(first, first + n):
        if hash_del_key(blk, keys[i]) < 0:
            fails += 1
    return tsc_end() - t0, fails


@kernel
def stream_check(blk, stream, pos, mask, data):
    """The whole stream in bursts: (hits, sum of position + 1, data hits, sum of data)."""
    hits = 0
    possum = 0
    dhits = 0
    dsum = np.uint64(0)
    for j in range(0, stream.shape[0] - BURST + 1, BURST):
        b = stream[j:j + BURST]
        hash_lookup_bulk(blk, b, BURST, pos)
        for i in range(BURST):
            if pos[i] >= 0:
                hits += 1
                possum += pos[i] + 1
        dhits += hash_lookup_bulk_data(blk, b, BURST, mask, data)
        for i in range(BURST):
            if (mask[0] >> np.uint64(i)) & np.uint64(1):
                dsum += data[i]
    return hits, possum, dhits, dsum


@kernel
def lookup_loop(blk, stream, start, kind, nchunks, chunk, drop_cyc, pos, mask, data, pair_cyc):
    """``nchunks`` timed intervals of ``chunk`` bursts from burst ``start`` of the stream on;
    ``kind`` 0 lookup_bulk, 1 lookup_bulk_data, 2 single lookups.
    Returns (kept cycles, kept, dropped, next burst, sink)."""
    nb = stream.shape[0] // BURST
    b = start
    acc = 0.0
    kept = 0
    dropped = 0
    sink = 0
    for _ in range(nchunks):
        t0 = tsc_begin()
        for _it in range(chunk):
            keys = stream[b * BURST:(b + 1) * BURST]
            if kind == 0:
                hash_lookup_bulk(blk, keys, BURST, pos)
                for i in range(BURST):
                    sink += pos[i]
            elif kind == 1:
                sink += hash_lookup_bulk_data(blk, keys, BURST, mask, data) + np.int64(mask[0])
            else:
                for i in range(BURST):
                    sink += hash_lookup(blk, keys[i])
            b += 1
            if b == nb:
                b = 0
        d = tsc_end() - t0
        if d < drop_cyc:
            acc += float(d) - pair_cyc
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped, b, sink


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


def resident_bytes(address: int, size: int) -> int:
    """Bytes of ``[address, address + size)`` in RAM now (``mincore``); -1 if it fails."""
    page = mmap.PAGESIZE
    n = (size + page - 1) // page
    vec = np.zeros(n, np.uint8)
    if _libc.mincore(address, n * page, vec.ctypes.data) != 0:
        return -1
    return int(np.count_nonzero(vec & 1)) * page


class PktbufSide:
    """pktbuf's table, filled, and its loops warm."""

    def __init__(self, entries, nkeys, nlook, keys, stream):
        self.keys, self.stream, self.nkeys = keys, stream, nkeys
        self.blk = new_table(entries, KEY_LEN)
        self.pos = np.zeros(BURST, np.int32)
        self.mask = np.zeros(1, np.uint64)
        self.data = np.zeros(BURST, np.uint64)
        self.pair_cyc = float(pair_overhead_cycles())
        cyc, fails = fill_loop(self.blk, keys, 0, nkeys)
        self.add_cyc = (cyc - self.pair_cyc) / nkeys
        self.failed = int(fails)
        self.count = int(hash_count(self.blk))
        mem = self.blk.memory
        self.memory = {"reserved": int(mem.size),
                       "resident": resident_bytes(mem.address, mem.size)}
        self.at = 0
        self.del_from = 0

    def check(self) -> dict:
        h, p, dh, ds = stream_check(self.blk, self.stream, self.pos, self.mask, self.data)
        return {"hits": int(h), "possum": int(p), "data_hits": int(dh), "datasum": int(ds)}

    def sample(self, kind: str, nchunks: int, chunk: int, drop_cyc: int) -> tuple:
        k = ("bulk", "bulk_data", "single").index(kind)
        acc, kept, dropped, self.at, _ = lookup_loop(
            self.blk, self.stream, self.at, k, nchunks, chunk, np.uint64(drop_cyc), self.pos, self.mask,
            self.data, self.pair_cyc)
        if kept == 0:
            raise BenchError(f"pktbuf {kind}: every interval was dropped (preempted)")
        return acc / (kept * chunk * BURST), int(kept), int(dropped)

    def adddel(self, ndel: int) -> tuple:
        if self.del_from + ndel > self.nkeys:
            self.del_from = 0
        dc, f1 = del_loop(self.blk, self.keys, self.del_from, ndel)
        ac, f2 = fill_loop(self.blk, self.keys, self.del_from, ndel)
        self.del_from += ndel
        if f1 or f2:
            raise BenchError(f"pktbuf: {f1} deletes and {f2} re-adds failed")
        return (dc - self.pair_cyc) / ndel, (ac - self.pair_cyc) / ndel


class DpdkSide:
    """One reference program holding one DPDK table."""

    def __init__(self, exe, flags, entries, nkeys, nlook):
        self.ref = D.DpdkRef(exe, lcores=1)
        try:
            b = self.ref.command(f"build {entries} {nkeys} {flags} {SEED}", "build")
            self.add_cyc, self.failed, self.count = b["add_cyc"], b["failed"], b["count"]
            self.memory = {"reserved": int(b["table_bytes"])}
            self.stream_info = self.ref.command(f"stream {nlook} {STREAM_SEED}", "stream")
        except BaseException:
            self.ref.close()
            raise

    def check(self) -> dict:
        return {k: self.stream_info[k] for k in ("hits", "possum", "data_hits", "datasum")}

    def sample(self, kind, nchunks, chunk, drop_cyc) -> tuple:
        r = self.ref.command(f"sample {kind} {nchunks} {chunk} {int(drop_cyc)} 1", "sample")
        if r["kept"] == 0:
            raise BenchError(f"DPDK {kind}: every interval was dropped (preempted)")
        return r["samples_cyc"][0], r["kept"], r["dropped"]

    def adddel(self, ndel: int) -> tuple:
        r = self.ref.command(f"adddel {ndel} 1", "adddel")
        if r["fails"]:
            raise BenchError(f"DPDK: {r['fails']} deletes or re-adds failed")
        return r["del_cyc"][0], r["add_cyc"][0]

    def close(self):
        self.ref.close()


# ---------------------------------------------------------------------------------------------
# statistics

def _fig(samples) -> dict:
    a = np.asarray(samples, float)
    return {"median": float(np.median(a)), "min": float(a.min()), "max": float(a.max()),
            "samples": [round(float(v), 3) for v in a]}


def ratio_ci(a, b, seed: int = 12) -> tuple:
    """median(a) / median(b) of two interleaved series, with a 95 % bootstrap interval."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    r = float(np.median(a) / np.median(b))
    if a.size < 2:
        return r, r, r
    idx = np.random.default_rng(seed).integers(0, a.size, size=(2000, a.size))
    boot = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return r, float(lo), float(hi)


def _open_dpdk(variants, entries, nkeys, nlook, notes):
    sides = {}
    try:
        exe = D.build(SOURCE, extra_cflags=("-march=native",))
    except D.DpdkMissing as e:
        return sides, {"status": "missing", "message": str(e)}
    except D.DpdkFailed as e:
        return sides, {"status": "failed", "message": str(e)}
    try:
        for v in variants:
            sides[v] = DpdkSide(exe, DPDK_FLAGS[v], entries, nkeys, nlook)
    except D.DpdkFailed as e:
        for s in sides.values():
            s.close()
        return {}, {"status": "failed", "message": str(e)}
    ref = next(iter(sides.values())).ref
    return sides, {"status": "ok", "message": None, "eal_args": list(ref.eal),
                   "info": dict(ref.info), "exe": str(exe)}


# ---------------------------------------------------------------------------------------------
# the run

def run(quick: bool = False, reps: int | None = None, dpdk: bool = True,
        dpdk_variants=("dpdk_lf", "dpdk"), progress=None) -> dict:
    """Measure every variant; returns the results document (plain JSON-able dict)."""
    say = progress or (lambda m: None)
    t_start = time.perf_counter()
    sz = dict(QUICK_SIZES) if quick else dict(entries=ENTRIES, nkeys=NKEYS, nlook=NLOOK,
                                              ndel=NDEL)
    reps = reps or (3 if quick else 11)
    entries, nkeys, nlook, ndel = sz["entries"], sz["nkeys"], sz["nlook"], sz["ndel"]
    hz = tsc_hz()
    say(f"  keys and stream: {nkeys} keys in {entries} entries, {nlook} lookups")
    keys = make_keys(nkeys)
    stream = make_stream(keys, nkeys, nlook)
    pk = PktbufSide(entries, nkeys, nlook, keys, stream)
    notes = []
    sides = {"pktbuf": pk}
    if dpdk:
        ds, dinfo = _open_dpdk(dpdk_variants, entries, nkeys, nlook, notes)
        sides.update(ds)
    else:
        dinfo = {"status": "off", "message": "not requested"}
    try:
        # the same hits, positions and data on every side, or no figures at all
        checks = {v: s.check() for v, s in sides.items()}
        for v, c in checks.items():
            if c != checks["pktbuf"]:
                raise BenchError(f"{v} disagrees with pktbuf over the lookup stream: {c} != "
                                 f"{checks['pktbuf']}")
        memory = {v: dict(s.memory) for v, s in sides.items()}
        fills = {v: {"failed": int(s.failed), "count": int(s.count),
                     "add_cyc_fill": round(float(s.add_cyc), 2)} for v, s in sides.items()}
        for v, f in fills.items():
            if (f["failed"], f["count"]) != (fills["pktbuf"]["failed"], fills["pktbuf"]["count"]):
                raise BenchError(f"{v} filled the table differently: {f} vs {fills['pktbuf']}")
        order = list(sides)
        # calibration: the slowest side's burst sets the chunk everywhere
        worst = 1.0
        for v in order:
            for kind in ("bulk", "single"):
                c = min(sides[v].sample(kind, 8, 4, NEVER)[0] for _ in range(3))
                worst = max(worst, c * BURST)
        chunk = max(1, int(CHUNK_NS * 1e-9 * hz / worst))
        drop_cyc = max(int(DROP_US * 1e-6 * hz), int(4 * chunk * worst))
        per_sample = (nlook // 8) if quick else (1 << 18)
        nchunks = max(1, per_sample // (BURST * chunk))
        say(f"  {chunk} bursts of {BURST} per timed interval, {nchunks} intervals per sample, "
            f"{reps} samples per variant and operation, interleaved")
        samples = {v: {op: [] for op in OPS} for v in order}
        kept = {v: {op: [0, 0] for op in OPS} for v in order}
        for rep in range(reps + 1):                 # round 0 warms up, discarded
            seq = order if rep % 2 == 0 else order[::-1]
            for op in ("lookup_bulk", "lookup_bulk_data", "lookup"):
                for v in seq:
                    cyc, kp, dr = sides[v].sample(LOOKUP_KIND[op], nchunks, chunk, drop_cyc)
                    if rep:
                        samples[v][op].append(cyc)
                        kept[v][op][0] += kp
                        kept[v][op][1] += dr
            for v in seq:
                dc, ac = sides[v].adddel(ndel)
                if rep:
                    samples[v]["delete"].append(dc)
                    samples[v]["add"].append(ac)
        # after the deletes and re-adds every side still finds the same keys at the same places
        for v, s in sides.items():
            if v != "pktbuf":
                s.stream_info = s.ref.command(f"stream {nlook} {STREAM_SEED}", "stream")
        end = {v: s.check() for v, s in sides.items()}
        end_agree = all(c == end["pktbuf"] for c in end.values())
        if not end_agree:
            notes.append(f"after add/delete rounds the stream checksums differ: {end}")
    finally:
        for v, s in sides.items():
            if v != "pktbuf":
                s.close()
    rows = []
    for v in order:
        for op in OPS:
            f = _fig(samples[v][op])
            if op in LOOKUP_KIND:
                f["kept"], f["dropped"] = kept[v][op]
            rows.append({"variant": v, "label": LABEL[v], "op": op, "cycles_per_key": f})
    ratios = []
    for v in order[1:]:
        for op in OPS:
            r, lo, hi = ratio_ci(samples["pktbuf"][op], samples[v][op])
            ratios.append({"op": op, "vs": v, "name": f"pktbuf / {LABEL[v]}: {op}",
                           "value": r, "ci": [lo, hi],
                           "unit": "x cycles per key (95% CI; below 1: pktbuf faster)",
                           "target": "<= 1.0" if (op == "lookup_bulk" and v == "dpdk_lf")
                           else None})
    for v in order[1:]:
        ref = memory[v]["reserved"]
        memory[v]["pktbuf_resident_ratio"] = memory["pktbuf"]["resident"] / ref if ref > 0 else None
    method = {"entries": entries, "keys": nkeys, "key_len": KEY_LEN, "lookups": nlook,
              "hit_ratio": 0.5, "burst": BURST, "deletes_per_sample": ndel, "reps": reps,
              "chunk": chunk, "nchunks": nchunks, "drop_cyc": drop_cyc,
              "keys_per_sample": nchunks * chunk * BURST, "tsc_hz": round(hz),
              "hash": "CRC32-C (rte_hash_crc), init 0", "seed": SEED, "stream_seed": STREAM_SEED,
              "interleaved": True, "quick": bool(quick),
              "seconds": round(time.perf_counter() - t_start, 1)}
    return {"bench": "hash", "command": " ".join(["python -m pktbuf.bench.hash"]
                                                 + (["--quick"] if quick else [])),
            "machine": {"cpu": _cpu_model(), "loadavg": os.getloadavg(),
                        "cpus": len(os.sched_getaffinity(0))},
            "method": method, "dpdk": dinfo, "checks": {"stream": checks, "fill": fills,
                                                       "stream_after_adddel": end,
                                                       "after_adddel_agree": end_agree},
            "memory": memory, "rows": rows, "ratios": ratios, "notes": notes}


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def print_table(doc: dict, out=None) -> None:
    p = lambda s="": print(s, file=out or sys.stdout)   # noqa: E731
    m = doc["method"]
    p(f"\nexact-match hash, {m['keys']} keys of {m['key_len']} B in {m['entries']} entries, "
      f"{int(m['hit_ratio'] * 100)} % hits, bursts of {m['burst']}: cycles per key, median "
      f"[min, max] of {m['reps']} interleaved samples")
    d = doc["dpdk"]
    p(f"DPDK: {d['status']}" + (f" ({d['message']})" if d.get("message") else
                                 f", {d['info'].get('dpdk')}" if d.get("info") else ""))
    p(f"{'variant':<40} " + " ".join(f"{op:>18}" for op in OPS))
    for v in dict.fromkeys(r["variant"] for r in doc["rows"]):
        cells = []
        for op in OPS:
            f = next(r["cycles_per_key"] for r in doc["rows"] if r["variant"] == v and r["op"] == op)
            cells.append(f"{f['median']:7.1f} [{f['min']:.0f},{f['max']:.0f}]".rjust(18))
        p(f"{LABEL[v]:<40} " + " ".join(cells))
    c = doc["checks"]["stream"]["pktbuf"]
    p(f"stream checks (every side): hits {c['hits']}, sum of positions+1 {c['possum']}, "
      f"sum of data {c['datasum']}; after add/delete rounds: "
      f"{'agree' if doc['checks']['after_adddel_agree'] else 'DIFFER'}")
    for e in doc["ratios"]:
        tgt = f"  (target {e['target']})" if e.get("target") else ""
        p(f"{e['name']:<62} {e['value']:6.3f} [{e['ci'][0]:.3f}, {e['ci'][1]:.3f}]{tgt}")
    mem = doc.get("memory", {})
    if "pktbuf" in mem:
        pk = mem["pktbuf"]
        line = (f"table memory after the adds: pktbuf resident {pk['resident'] / 2**20:.1f} MiB "
                f"(reserved {pk['reserved'] / 2**20:.1f} MiB)")
        for v, e in mem.items():
            if v != "pktbuf" and e.get("pktbuf_resident_ratio") is not None:
                line += (f"; {v} allocates {e['reserved'] / 2**20:.1f} MiB of EAL's heap "
                         f"(pktbuf resident / it: {e['pktbuf_resident_ratio']:.3f})")
        p(line)
    for n in doc["notes"]:
        p(n)
    p(f"({m['seconds']} s)")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="python -m pktbuf.bench.hash",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small table, 3 samples (seconds)")
    ap.add_argument("--reps", type=int, default=None, help="samples per variant and operation")
    ap.add_argument("--no-dpdk", action="store_true", help="pktbuf alone (no C reference)")
    ap.add_argument("--lf-only", action="store_true", help="DPDK with RW_CONCURRENCY_LF only")
    ap.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    a = ap.parse_args(argv)
    quick = a.quick or os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")
    print("compiling / warming ...", file=sys.stderr, flush=True)
    try:
        doc = run(quick, a.reps, not a.no_dpdk,
                  ("dpdk_lf",) if a.lf_only else ("dpdk_lf", "dpdk"),
                  lambda m: print(m, file=sys.stderr, flush=True))
    except BenchError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    print_table(doc)
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))
    return 1 if doc["dpdk"]["status"] == "failed" else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
