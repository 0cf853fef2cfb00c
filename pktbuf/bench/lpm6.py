"""IPv6 LPM: pktbuf's :class:`~pktbuf.net.lpm.api.Lpm6` against DPDK 22.11's ``rte_lpm6``, same
run, same rules, same addresses.

The rules are lpm6_perf_autotest's (``app/test/test_lpm6_perf.c``): the 1000 rules of
``large_route_table[]`` in ``app/test/test_lpm6_data.h``, kept here as ``lpm6_routes.txt`` and
read by both sides (both report the set's FNV-1a-64 and the bench refuses to compare different
sets).  Configuration as lpm6_perf: ``max_rules`` 1,000,000, 2^16 tbl8 groups.  Next hop = the
rule's own (lpm6_perf adds every rule with 0xAA; the rule's own makes the result check mean
something and changes no table shape).

Addresses as lpm6_perf's ``generate_large_ips_table``: 100 per rule, in rule order, random
bytes with the rule's first ``depth`` bits copied in -- so nearly all hit, and each one
walks as deep as its rule.  The random bytes are splitmix64 outputs (two per address,
little-endian) from a per-sample seed, identical on both sides.

Figures (cycles of the TSC, fenced reads): per lookup, over ``niter`` passes over all 100,000
addresses -- *single*: one ``rte_lpm6_lookup`` / ``lpm6_lookup`` per address, counting
failures (lpm6_perf's loop); *bulk*: one ``rte_lpm6_lookup_bulk_func`` / ``lpm6_lookup_bulk``
over all of them; and add / delete per rule (the whole loop, divided by the rule count).
Each sample's check value (every address's next hop or -1, from an untimed pass) must agree
between the sides.  Samples alternate between the sides; medians, min and max, and
pktbuf / DPDK of the medians.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from .._jit import kernel
from ..net.lpm.api import Lpm6
from ..net.lpm.lpm6 import lpm6_add, lpm6_delete, lpm6_lookup, lpm6_lookup_bulk
from .lpm import BenchError, _fig, _open_ref, _splitmix
from .tsc import tsc_begin, tsc_end

ROUTES = Path(__file__).with_name("lpm6_routes.txt")
MAX_RULES = 1_000_000
NUMBER_TBL8S = 1 << 16
IPS_PER_ROUTE = 100
KINDS = ("single", "bulk")


def load_routes(path: Path | str = ROUTES):
    """``(ips (n, 16) uint8, depths uint8, next_hops uint32)`` from a rule file: one rule a
    line, 32 hex digits, depth 1..128, next hop; ``#`` lines are comments.  ``ValueError`` on
    anything else (the file is read by the C reference too, which refuses the same)."""
    ips, depths, nhs = [], [], []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) != 3 or len(f[0]) != 32:
            raise ValueError(f"{path}:{n}: not 'hex32 depth next_hop'")
        d, nh = int(f[1]), int(f[2])
        if not 1 <= d <= 128 or not 0 <= nh < 1 << 21:
            raise ValueError(f"{path}:{n}: depth or next hop out of range")
        ips.append(np.frombuffer(bytes.fromhex(f[0]), np.uint8))
        depths.append(d)
        nhs.append(nh)
    return np.array(ips, np.uint8), np.array(depths, np.uint8), np.array(nhs, np.uint32)


def fnv_routes(ips, depths, nhs) -> int:
    """FNV-1a-64 over each rule's 16 bytes, depth, low byte of the next hop (lpm_ref.c's)."""
    b = np.empty((ips.shape[0], 18), np.uint8)
    b[:, :16] = ips
    b[:, 16] = depths
    b[:, 17] = nhs & 0xFF
    h = 0xCBF29CE484222325
    for x in b.reshape(-1).tolist():
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


@kernel
def make_ips(rips, rdepths, per_route, seed, out):
    """lpm6_perf's addresses into ``out`` (``(n * per_route, 16)`` uint8): splitmix64 bytes
    with rule ``i // per_route``'s first ``depth`` bits copied in (``mask_ip6_prefix``)."""
    s = np.uint64(seed)
    for i in range(out.shape[0]):
        s, a = _splitmix(s)
        s, b = _splitmix(s)
        for k in range(8):
            out[i, k] = np.uint8((a >> np.uint64(8 * k)) & np.uint64(0xFF))
            out[i, 8 + k] = np.uint8((b >> np.uint64(8 * k)) & np.uint64(0xFF))
        r = i // per_route
        d = np.int64(rdepths[r])
        k = 0
        while k < 16 and d > 0:
            m = 0xFF if d >= 8 else (0xFF << (8 - d)) & 0xFF
            out[i, k] = np.uint8((np.int64(rips[r, k]) & m) | (np.int64(out[i, k]) & ~m & 0xFF))
            k += 1
            d -= 8


@kernel
def add_all6(blk, ips, depths, nhs):
    """Add every rule with its own next hop; ``(cycles, ok, einval, enospc)``."""
    ok = 0
    einval = 0
    enospc = 0
    t0 = tsc_begin()
    for i in range(ips.shape[0]):
        r = lpm6_add(blk, ips[i], np.int64(depths[i]), np.int64(nhs[i]))
        ok += r == 0
        einval += r == -22
        enospc += r == -28
    return tsc_end() - t0, ok, einval, enospc


@kernel
def delete_all6(blk, ips, depths):
    """Delete every rule; ``(cycles, ok, einval, enoent)``."""
    ok = 0
    einval = 0
    enoent = 0
    t0 = tsc_begin()
    for i in range(ips.shape[0]):
        r = lpm6_delete(blk, ips[i], np.int64(depths[i]))
        ok += r == 0
        einval += r == -22
        enoent += r == -2
    return tsc_end() - t0, ok, einval, enoent


@kernel
def _check6(blk, ips):
    """The untimed pass: check value over every address's next hop (-1 for a miss, as 32
    bits), and the misses."""
    check = np.uint64(0)
    miss = 0
    prime = np.uint64(1099511628211)
    for j in range(ips.shape[0]):
        r = lpm6_lookup(blk, ips[j])
        v = r if r >= 0 else 0xFFFFFFFF
        check = check * prime + np.uint64(v)
        miss += r < 0
    return check, miss


@kernel
def lookups6_single(blk, ips, niter):
    """``niter`` timed passes of lpm6_perf's single loop; ``(cycles, fails, check, misses)``."""
    cyc = np.uint64(0)
    fails = 0
    n = ips.shape[0]
    for _ in range(niter):
        t0 = tsc_begin()
        for j in range(n):
            if lpm6_lookup(blk, ips[j]) < 0:
                fails += 1
        cyc += tsc_end() - t0
    check, miss = _check6(blk, ips)
    return cyc, fails, check, miss


@kernel
def lookups6_bulk(blk, ips, hops, niter):
    """``niter`` timed bulk lookups over all addresses; ``(cycles, fails, check, misses)``."""
    cyc = np.uint64(0)
    fails = 0
    n = ips.shape[0]
    for _ in range(niter):
        t0 = tsc_begin()
        lpm6_lookup_bulk(blk, ips, hops, n)
        cyc += tsc_end() - t0
        for j in range(n):
            fails += hops[j] < 0
    check, miss = _check6(blk, ips)
    return cyc, fails, check, miss


def run(quick: bool = False, dpdk: bool = True, reps: int | None = None,
        niter: int | None = None, progress=None) -> dict:
    """Measure; returns ``{"method", "dpdk", "pktbuf": {...}, "dpdk_figures": {...},
    "ratios": {...}, "checks": {...}}`` (cycles per operation)."""
    say = progress or (lambda m: None)
    reps = reps or (3 if quick else 7)
    niter = niter or (2 if quick else 16)
    ips, depths, nhs = load_routes()
    route_fnv = fnv_routes(ips, depths, nhs)
    ref, dinfo = _open_ref(dpdk)
    P = {"add": [], "delete": [], "single": [], "bulk": []}
    Dd = {k: [] for k in P}
    checks = {"routes": int(ips.shape[0]), "routes_fnv": route_fnv, "lookups_equal": None}
    addrs = np.zeros((ips.shape[0] * IPS_PER_ROUTE, 16), np.uint8)
    hops = np.zeros(addrs.shape[0], np.int32)
    try:
        say(f"  IPv6: {ips.shape[0]} rules, {addrs.shape[0]} addresses")
        t = Lpm6(MAX_RULES, NUMBER_TBL8S)
        blk = t.block
        cyc, ok, einval, enospc = add_all6(blk, ips, depths, nhs)
        P["add"].append(cyc / ips.shape[0])
        checks["pktbuf_add"] = {"ok": int(ok), "einval": int(einval), "enospc": int(enospc)}
        checks["groups_used"] = t.groups_used
        if ref is not None:
            c = ref.command(f"create6 {MAX_RULES} {NUMBER_TBL8S} {ROUTES}", "create6")
            if c["routes"] != ips.shape[0] or c["routes_fnv"] != route_fnv:
                raise BenchError(f"IPv6 rule sets differ: DPDK {c['routes']} rules FNV "
                                 f"{c['routes_fnv']:#x}, pktbuf {ips.shape[0]} {route_fnv:#x}")
            a = ref.command("add6", "add6")
            Dd["add"].append(a["cycles"] / a["n"])
            checks["dpdk_add"] = {k: a[k] for k in ("ok", "einval", "enospc")}
        equal = True
        for rep in range(reps + 1):                 # round 0 warms up, discarded
            seed = 2000 + rep
            make_ips(ips, depths, IPS_PER_ROUTE, seed, addrs)
            for kind in (KINDS if rep % 2 == 0 else KINDS[::-1]):
                sides = ("p", "d") if (rep + KINDS.index(kind)) % 2 == 0 else ("d", "p")
                res = {}
                for side in sides:
                    if side == "p":
                        if kind == "single":
                            cy, _fails, ck, ms = lookups6_single(blk, addrs, niter)
                        else:
                            cy, _fails, ck, ms = lookups6_bulk(blk, addrs, hops, niter)
                        res["p"] = (float(cy) / (niter * addrs.shape[0]), int(ck), int(ms))
                    elif ref is not None:
                        o = ref.command(f"lookup6 {kind} {niter} {seed}", "lookup6")
                        res["d"] = (o["cycles"] / o["n"], int(o["check"]), int(o["misses"]))
                if rep:
                    P[kind].append(res["p"][0])
                    if "d" in res:
                        Dd[kind].append(res["d"][0])
                checks["misses"] = res["p"][2]
                if "d" in res and res["d"][1:] != res["p"][1:]:
                    equal = False
                    raise BenchError(f"IPv6 {kind} lookups disagree (check values)")
        checks["lookups_equal"] = equal if ref is not None else None
        cyc, ok, einval, enoent = delete_all6(blk, ips, depths)
        P["delete"].append(cyc / ips.shape[0])
        checks["pktbuf_delete"] = {"ok": int(ok), "einval": int(einval), "enoent": int(enoent)}
        checks["groups_after_delete"] = t.groups_used
        if ref is not None:
            dl = ref.command("delete6", "delete6")
            Dd["delete"].append(dl["cycles"] / dl["n"])
            checks["dpdk_delete"] = {k: dl[k] for k in ("ok", "einval", "enoent")}
        del t, blk
    finally:
        if ref is not None:
            ref.close()
    out = {"method": {"routes": int(ips.shape[0]), "addresses": int(addrs.shape[0]),
                      "max_rules": MAX_RULES, "number_tbl8s": NUMBER_TBL8S, "lookup_reps": reps,
                      "passes_per_sample": niter, "interleaved": True, "quick": quick},
           "dpdk": dinfo, "checks": checks,
           "pktbuf": {k: _fig(v) for k, v in P.items() if v},
           "dpdk_figures": {k: _fig(v) for k, v in Dd.items() if v}, "ratios": {}}
    for k, v in P.items():
        if v and Dd[k]:
            out["ratios"][k] = statistics.median(v) / statistics.median(Dd[k])
    return out


def print_report(res: dict, out=None) -> None:
    p = lambda s="": print(s, file=out or sys.stdout)
    m = res["method"]
    p(f"\nIPv6 LPM, lpm6_perf_autotest rules: {m['routes']} rules, {m['addresses']} addresses, "
      f"max_rules {m['max_rules']}, {m['number_tbl8s']} tbl8 groups; {m['lookup_reps']} "
      f"samples of {m['passes_per_sample']} passes per side, alternating")
    d = res["dpdk"]
    p(f"DPDK column: {d.get('info', {}).get('dpdk', '-')} ({d['status']}"
      f"{': ' + d['message'] if d.get('message') else ''})")
    p(f"{'cycles per op':<14} {'pktbuf median':>14} {'[min, max]':>20} {'DPDK median':>13} "
      f"{'[min, max]':>22} {'pktbuf/DPDK':>12}")
    for k in ("single", "bulk", "add", "delete"):
        f = res["pktbuf"].get(k)
        if f is None:
            continue
        g = res["dpdk_figures"].get(k)
        gs = (f"{g['median']:>13.1f} [{g['min']:>9.1f}, {g['max']:>9.1f}]" if g
              else f"{'-':>13} {'':>22}")
        rt = f"{res['ratios'][k]:>12.3f}" if k in res["ratios"] else f"{'-':>12}"
        p(f"{k:<14} {f['median']:>14.1f} [{f['min']:>8.1f}, {f['max']:>8.1f}] {gs} {rt}")
    c = res["checks"]
    p(f"checks: rule FNV {c['routes_fnv']:#x}; lookups equal {c['lookups_equal']}; misses "
      f"{c.get('misses')}; groups used {c.get('groups_used')}; pktbuf add "
      f"{c.get('pktbuf_add')}, DPDK add {c.get('dpdk_add')}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pktbuf.bench.lpm6",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 samples of 2 passes")
    ap.add_argument("--no-dpdk", action="store_true", help="pktbuf alone")
    ap.add_argument("--reps", type=int, help="lookup samples per side")
    ap.add_argument("--passes", type=int, help="passes over the addresses per sample")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    a = ap.parse_args(argv)
    try:
        res = run(a.quick, not a.no_dpdk, a.reps, a.passes,
                  lambda m: print(m, file=sys.stderr, flush=True))
    except BenchError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    print_report(res)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 1 if res["dpdk"]["status"] == "failed" else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
