"""IPv4 LPM: pktbuf's ``rte_lpm`` clone against DPDK 22.11's ``rte_lpm``, same run, same routes.

The route set is lpm_perf_autotest's (``app/test/test_lpm_perf.c``): per-depth counts of
classes A, B and C, an unseeded-glibc ``lrand48`` recurrence, five fixed rules inserted at
pseudo-random positions -- 1,076,806 routes, generated here by :func:`make_routes` and in the
C reference (``lpm_ref.c``) by the same recurrence; both report the set's FNV-1a-64 and the
bench refuses to compare different sets.  Tables: ``max_rules`` 2,000,000, 2048 tbl8 groups,
as lpm_perf.  ``--quick`` keeps every 50th route (21,537; a few seconds).

Figures (cycles of the TSC, fenced reads):

* add / delete: the whole loop over the route set, in order, divided by the route count
  (failures included, as lpm_perf); next hop = the route's position.  After the adds both sides
  report FNV-1a-64 of their tbl24 and tbl8 words, which must be equal (the tables are the same
  bit for bit), and again after the deletes;
* lookups, single / bulk (32) / x4: batches of 4096 addresses (low 32 bits of splitmix64 from a
  per-sample seed, so both sides look up the same addresses; made outside the timed region);
  each sample's check value over every result must agree between the sides.  A single
  lookup's result is stored as each API gives it: DPDK's next hop, or ``UINT32_MAX`` when
  ``rte_lpm_lookup`` fails (lpm_ref.c); pktbuf's :func:`lpm_lookup` value, the next hop or
  -ENOENT (0xFFFFFFFE as a uint32, counted as DPDK's miss value in the check);

Samples alternate between the sides; medians, min and max of the samples, and pktbuf / DPDK
of the medians.  :func:`run` returns the figures as a dict; :func:`main` prints them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from .._jit import kernel
from ..net.lpm.api import Lpm
from ..net.lpm.lpm4 import (
    lpm_add,
    lpm_delete,
    lpm_lookup,
    lpm_lookup_bulk,
    lpm_lookupx4,
)
from .tsc import tsc_begin, tsc_end, tsc_hz

SOURCE = Path(__file__).with_name("lpm_ref.c")
MAX_RULES = 2_000_000
NUMBER_TBL8S = 2048
BATCH = 4096
BULK = 32
QUICK_STRIDE = 50

# rule_count of test_lpm_perf.c: routes per depth 1..32 of classes A, B, C
COUNT_A = [0, 0, 1, 0, 2, 1, 3, 185, 26, 16, 39, 144, 233, 528, 866, 3856, 3268, 5662, 17301,
           22226, 11147, 16746, 17120, 77578, 401, 656, 1107, 1121, 2316, 717, 10, 66]
COUNT_B = [0, 0, 0, 0, 1, 1, 1, 3, 3, 30, 25, 168, 305, 569, 1129, 50800, 1645, 1820, 3506, 3258,
           3424, 4971, 6885, 39771, 424, 170, 433, 92, 366, 377, 2, 200]
COUNT_C = [0, 0, 0, 0, 0, 0, 0, 12, 8, 9, 33, 69, 237, 1007, 1717, 14663, 8070, 16185, 48261,
           36870, 33960, 50638, 61422, 466549, 1829, 4824, 4927, 5914, 10254, 4905, 1, 716]
EXTRA = [(0x00000000, 8), (0x0A021793, 32), (0xC0A8640A, 24), (0xC0A81964, 24),
         (0xC0A8817C, 32)]   # 0.0.0.0/8 10.2.23.147/32 192.168.100.10/24 .25.100/24 .129.124/32


class BenchError(RuntimeError):
    """The two sides disagree (routes, tables or lookup results)."""


def make_routes():
    """lpm_perf_autotest's route set: ``(ips uint32, depths uint8)``, in table order."""
    state = [0]

    def lrand48():
        state[0] = (0x5DEECE66D * state[0] + 0xB) & ((1 << 48) - 1)
        return state[0] >> 17

    ips, depths = [], []
    for counts, fixed, head in ((COUNT_A, 1, 0), (COUNT_B, 2, 0x80000000),
                                (COUNT_C, 3, 0xC0000000)):
        for d in range(1, 33):
            n = counts[d - 1]
            if n == 0:
                continue
            rng = 1 << (d - fixed)
            mask = rng - 1
            step = 1 if rng <= n else int(rng / n + 0.5)    # C round(): half away from zero
            start = lrand48() & mask
            sh = 32 - d
            for _ in range(n):
                ips.append((start << sh) | head)
                start = (start + step) & mask
            depths += [d] * n
    for ip, d in EXTRA:
        tries = 0
        while True:
            pos = lrand48()
            tries += 1
            if not (tries < 10 and pos > len(ips)):
                break
        if pos > len(ips):
            pos = len(ips) >> 1
        ips.append(ips[pos])
        depths.append(depths[pos])
        ips[pos], depths[pos] = ip, d
    return np.array(ips, np.uint32), np.array(depths, np.uint8)


def fnv_routes(ips, depths) -> int:
    b = np.empty((ips.size, 5), np.uint8)
    b[:, :4] = ips.astype("<u4").view(np.uint8).reshape(-1, 4)
    b[:, 4] = depths
    return _fnv_bytes(b.reshape(-1))


@kernel
def _fnv_bytes(b):
    h = np.uint64(0xCBF29CE484222325)
    p = np.uint64(0x100000001B3)
    for i in range(b.size):
        h = (h ^ np.uint64(b[i])) * p
    return h


def fnv_tables(blk) -> int:
    """FNV-1a-64 of tbl24 then tbl8 as an unsigned integer (lpm_ref.c's ``fnv_tables``).  The
    running hash goes back in as ``np.uint64`` and the result is taken modulo 2^64: a Python
    int below 2^63 is typed int64, and the hash then comes back signed -- the same bits, a
    different number (the check failed on the full route set for that alone)."""
    h = _fnv_words(blk.tbl24, np.uint64(0xCBF29CE484222325))
    return int(_fnv_words(blk.tbl8, np.uint64(h))) & 0xFFFFFFFFFFFFFFFF


@kernel
def _fnv_words(w, h):
    p = np.uint64(0x100000001B3)
    for i in range(w.size):
        x = np.uint64(w[i])
        for k in range(4):
            h = (h ^ ((x >> np.uint64(8 * k)) & np.uint64(0xFF))) * p
    return h


@kernel
def add_all(blk, ips, depths):
    """Add every route, next hop = position; ``(cycles, ok, einval, enospc)``."""
    ok = 0
    einval = 0
    enospc = 0
    t0 = tsc_begin()
    for i in range(ips.size):
        r = lpm_add(blk, np.int64(ips[i]), np.int64(depths[i]), i & 0xFFFFFF)
        ok += r == 0
        einval += r == -22
        enospc += r == -28
    return tsc_end() - t0, ok, einval, enospc


@kernel
def delete_all_routes(blk, ips, depths):
    ok = 0
    einval = 0
    enospc = 0
    t0 = tsc_begin()
    for i in range(ips.size):
        r = lpm_delete(blk, np.int64(ips[i]), np.int64(depths[i]))
        ok += r == 0
        einval += r == -22
    return tsc_end() - t0, ok, einval, enospc


@kernel(inline="always")
def _splitmix(s):
    s = s + np.uint64(0x9E3779B97F4A7C15)
    z = s
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return s, z ^ (z >> np.uint64(31))


@kernel
def _fill(s, ips):
    """The next batch of addresses from splitmix64 state ``s``; returns the new state."""
    for i in range(BATCH):
        s, z = _splitmix(s)
        ips[i] = np.uint32(z & np.uint64(0xFFFFFFFF))
    return s


_MISS_SINGLE = np.uint32(0xFFFFFFFE)     # lpm_lookup's -ENOENT (-2) stored as uint32


@kernel
def _check(hops, check, miss, raw):
    """Fold a batch's results into the check value; count misses (``raw``: bulk's raw entries,
    a miss lacks bit 24; otherwise a miss is 0xFFFFFFFF)."""
    prime = np.uint64(1099511628211)
    for i in range(BATCH):
        h = hops[i]
        if not raw and h == _MISS_SINGLE:
            h = np.uint32(0xFFFFFFFF)       # single's -ENOENT, as lpm_ref.c's UINT32_MAX
        check = check * prime + np.uint64(h)
        if raw:
            miss += (h & 0x01000000) == 0
        else:
            miss += h == 0xFFFFFFFF
    return check, miss


# One kernel per kind, as lpm_ref.c has one function per kind: each timed loop is compiled on
# its own, so the other kinds' loops take no registers from it (one function with all three
# kept the address and result pointers on the stack, re-read every lookup).

@kernel
def _lookups_single(blk, nbatch, seed, ips, hops):
    s = np.uint64(seed)
    cyc = np.uint64(0)
    check = np.uint64(0)
    miss = 0
    for _ in range(nbatch):
        s = _fill(s, ips)
        t0 = tsc_begin()
        for i in range(BATCH):
            hops[i] = lpm_lookup(blk, ips[i])     # the next hop, or -ENOENT as 0xFFFFFFFE
        cyc += tsc_end() - t0
        check, miss = _check(hops, check, miss, False)
    return cyc, miss, check


@kernel
def _lookups_bulk(blk, nbatch, seed, ips, hops):
    s = np.uint64(seed)
    cyc = np.uint64(0)
    check = np.uint64(0)
    miss = 0
    for _ in range(nbatch):
        s = _fill(s, ips)
        t0 = tsc_begin()
        for i in range(0, BATCH, BULK):
            lpm_lookup_bulk(blk, ips[i:i + BULK], hops[i:i + BULK], BULK)
        cyc += tsc_end() - t0
        check, miss = _check(hops, check, miss, True)
    return cyc, miss, check


@kernel
def _lookups_x4(blk, nbatch, seed, ips, hops):
    s = np.uint64(seed)
    cyc = np.uint64(0)
    check = np.uint64(0)
    miss = 0
    for _ in range(nbatch):
        s = _fill(s, ips)
        t0 = tsc_begin()
        for i in range(0, BATCH, 4):
            lpm_lookupx4(blk, ips[i:i + 4], hops[i:i + 4], 0xFFFFFFFF)
        cyc += tsc_end() - t0
        check, miss = _check(hops, check, miss, False)
    return cyc, miss, check


_LOOPS = (_lookups_single, _lookups_bulk, _lookups_x4)


def lookup_loop(blk, kind, nbatch, seed, ips, hops):
    """``nbatch`` timed batches of 4096 lookups (kind 0 single, 1 bulk, 2 x4), addresses from
    splitmix64(seed); ``(cycles, misses, check)`` -- as lpm_ref.c's ``lookup``."""
    return _LOOPS[kind](blk, nbatch, seed, ips, hops)


KINDS = {"single": 0, "bulk": 1, "x4": 2}


def _open_ref(want: bool):
    if not want:
        return None, {"status": "off", "message": "not requested"}
    from . import dpdk_ref as D
    try:
        exe = D.build(SOURCE, extra_cflags=("-march=native",))
        ref = D.DpdkRef(exe, lcores=1)
    except D.DpdkMissing as e:
        return None, {"status": "missing", "message": str(e)}
    except D.DpdkFailed as e:
        return None, {"status": "failed", "message": str(e)}
    return ref, {"status": "ok", "message": None, "info": dict(ref.info),
                 "eal_args": list(ref.eal)}


def _fig(samples):
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "samples": list(samples)}


def run(quick: bool = False, dpdk: bool = True, reps: int | None = None,
        stride: int | None = None, progress=None) -> dict:
    """Measure; returns ``{"method", "dpdk", "pktbuf": {...}, "dpdk_figures": {...},
    "ratios": {...}, "checks": {...}}`` (cycles per operation)."""
    say = progress or (lambda m: None)
    stride = stride or (QUICK_STRIDE if quick else 1)
    reps = reps or (3 if quick else 7)
    nbatch = 16 if quick else 256
    ad_reps = 3 if quick else 1
    all_ips, all_depths = make_routes()
    ips = np.ascontiguousarray(all_ips[::stride])
    depths = np.ascontiguousarray(all_depths[::stride])
    route_fnv = fnv_routes(ips, depths)
    ref, dinfo = _open_ref(dpdk)
    hz = tsc_hz()
    P = {"add": [], "delete": [], **{k: [] for k in KINDS}}
    Dd = {"add": [], "delete": [], **{k: [] for k in KINDS}}
    checks = {"routes": ips.size, "routes_fnv": route_fnv, "lookups_equal": None,
              "tables_equal_after_add": None, "tables_equal_after_delete": None}
    buf_ips = np.zeros(BATCH, np.uint32)
    buf_hops = np.zeros(BATCH, np.uint32)
    mem = {}
    try:
        lookups_equal = True
        for r in range(ad_reps):
            say(f"  add/delete round {r + 1} of {ad_reps}: {ips.size} routes")
            t = Lpm(MAX_RULES, NUMBER_TBL8S)
            blk = t.block
            cyc, ok, einval, enospc = add_all(blk, ips, depths)
            P["add"].append(cyc / ips.size)
            checks["pktbuf_add"] = {"ok": int(ok), "einval": int(einval), "enospc": int(enospc)}
            mem = t.memory()
            mem["groups_used"] = t.groups_used
            mem["valid_tbl24"] = int(np.count_nonzero(blk.tbl24 & 0x01000000))
            tf = fnv_tables(blk)
            if ref is not None:
                c = ref.command(f"create {MAX_RULES} {NUMBER_TBL8S} {stride}", "create")
                if c["routes"] != ips.size or c["routes_fnv"] != route_fnv:
                    raise BenchError(f"route sets differ: DPDK {c['routes']} routes FNV "
                                     f"{c['routes_fnv']:#x}, pktbuf {ips.size} {route_fnv:#x}")
                mem["dpdk_reserved"] = c["reserved_bytes"]
                a = ref.command("add", "add")
                Dd["add"].append(a["cycles"] / a["n"])
                checks["dpdk_add"] = {k: a[k] for k in ("ok", "einval", "enospc")}
                checks["tables_equal_after_add"] = a["tables_fnv"] == tf
                if a["tables_fnv"] != tf:
                    raise BenchError("tables differ after the adds (FNV of tbl24+tbl8)")
            if r == 0:
                for rep in range(reps + 1):          # round 0 warms up, discarded
                    for kind in (KINDS if rep % 2 == 0 else list(KINDS)[::-1]):
                        seed = 1000 + rep
                        sides = ("p", "d") if (rep + KINDS[kind]) % 2 == 0 else ("d", "p")
                        res = {}
                        for side in sides:
                            if side == "p":
                                cy, ms, ck = lookup_loop(blk, KINDS[kind], nbatch, seed,
                                                         buf_ips, buf_hops)
                                res["p"] = (float(cy) / (nbatch * BATCH), int(ck))
                            elif ref is not None:
                                o = ref.command(f"lookup {kind} {nbatch} {seed}", "lookup")
                                res["d"] = (o["cycles"] / o["n"], int(o["check"]))
                        if rep:
                            P[kind].append(res["p"][0])
                            if "d" in res:
                                Dd[kind].append(res["d"][0])
                        if "d" in res and res["d"][1] != res["p"][1]:
                            lookups_equal = False
                            raise BenchError(f"{kind} lookups disagree (check values)")
                checks["lookups_equal"] = lookups_equal if ref is not None else None
            cyc, ok, einval, _ = delete_all_routes(blk, ips, depths)
            P["delete"].append(cyc / ips.size)
            checks["pktbuf_delete"] = {"ok": int(ok), "einval": int(einval)}
            if ref is not None:
                dl = ref.command("delete", "delete")
                Dd["delete"].append(dl["cycles"] / dl["n"])
                checks["dpdk_delete"] = {k: dl[k] for k in ("ok", "einval")}
                checks["tables_equal_after_delete"] = dl["tables_fnv"] == fnv_tables(blk)
            del t, blk
    finally:
        if ref is not None:
            ref.close()
    out = {"method": {"routes": int(ips.size), "stride": stride, "max_rules": MAX_RULES,
                      "number_tbl8s": NUMBER_TBL8S, "lookup_reps": reps,
                      "lookups_per_sample": nbatch * BATCH, "add_delete_rounds": ad_reps,
                      "tsc_hz": round(hz), "interleaved": True, "quick": quick},
           "dpdk": dinfo, "memory": mem, "checks": checks,
           "pktbuf": {k: _fig(v) for k, v in P.items() if v},
           "dpdk_figures": {k: _fig(v) for k, v in Dd.items() if v}, "ratios": {}}
    for k in P:
        if P[k] and Dd[k]:
            out["ratios"][k] = statistics.median(P[k]) / statistics.median(Dd[k])
    return out


def print_report(res: dict, out=None) -> None:
    p = lambda s="": print(s, file=out or sys.stdout)
    m = res["method"]
    p(f"\nIPv4 LPM (DIR-24-8), lpm_perf_autotest routes: {m['routes']} routes (every "
      f"{m['stride']}th), max_rules {m['max_rules']}, {m['number_tbl8s']} tbl8 groups; "
      f"{m['lookup_reps']} lookup samples of {m['lookups_per_sample']} per side, alternating")
    d = res["dpdk"]
    p(f"DPDK column: {d.get('info', {}).get('dpdk', '-')} ({d['status']}"
      f"{': ' + d['message'] if d.get('message') else ''})")
    p(f"{'cycles per op':<14} {'pktbuf median':>14} {'[min, max]':>20} {'DPDK median':>13} "
      f"{'[min, max]':>22} {'pktbuf/DPDK':>12}")
    for k in ("single", "bulk", "x4", "add", "delete"):
        f = res["pktbuf"].get(k)
        if f is None:
            continue
        g = res["dpdk_figures"].get(k)
        gs = (f"{g['median']:>13.1f} [{g['min']:>9.1f}, {g['max']:>9.1f}]" if g
              else f"{'-':>13} {'':>22}")
        rt = f"{res['ratios'][k]:>12.3f}" if k in res["ratios"] else f"{'-':>12}"
        p(f"{k:<14} {f['median']:>14.1f} [{f['min']:>8.1f}, {f['max']:>8.1f}] {gs} {rt}")
    mem = res["memory"]
    p(f"memory: pktbuf reserved {mem['reserved'] / 2**20:.1f} MiB, resident after adds "
      f"{mem['resident'] / 2**20:.1f} MiB; DPDK allocates "
      f"{mem.get('dpdk_reserved', 0) / 2**20:.1f} MiB; {mem['groups_used']} groups used, "
      f"{mem['valid_tbl24']} valid tbl24 entries")
    c = res["checks"]
    p(f"checks: route FNV {c['routes_fnv']:#x}; tables equal after add "
      f"{c['tables_equal_after_add']}, after delete {c['tables_equal_after_delete']}; "
      f"lookups equal {c['lookups_equal']}; pktbuf add {c.get('pktbuf_add')}, DPDK add "
      f"{c.get('dpdk_add')}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pktbuf bench net", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="every 50th route, 3 short samples")
    ap.add_argument("--no-dpdk", action="store_true", help="pktbuf alone")
    ap.add_argument("--reps", type=int, help="lookup samples per side")
    ap.add_argument("--stride", type=int, help="use every STRIDE-th route")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        res = run(a.quick, not a.no_dpdk, a.reps, a.stride,
                  lambda m: print(m, file=sys.stderr, flush=True))
    except BenchError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    res["method"]["seconds"] = round(time.perf_counter() - t0, 1)
    print_report(res)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 1 if res["dpdk"]["status"] == "failed" else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
