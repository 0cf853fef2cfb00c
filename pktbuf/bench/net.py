"""``pktbuf bench net``: the packet libraries against DPDK 22.11's own code, one table.

::

    pktbuf bench net [--quick] [--no-dpdk] [--json FILE]

Runs, each with its DPDK reference program in the same run (same routes, keys and frames on
both sides, samples interleaved; every figure a median with its spread in the parts' own
reports):

* IPv4 LPM (:mod:`pktbuf.bench.lpm`): lpm_perf_autotest's routes and configuration, random
  addresses: cycles per lookup (single, bulk, x4), per add and per delete, table memory;
* IPv6 LPM (:mod:`pktbuf.bench.lpm6`): lpm6_perf_autotest's 1000 rules and 100,000 addresses
  against ``rte_lpm6``: cycles per lookup (single, bulk), per add and per delete;
* the exact-match table (:mod:`pktbuf.bench.hash`): ``lookup_bulk`` over 16-byte keys, 50 %
  hits, bursts of 32, against ``rte_hash_lookup_bulk`` with the lock-free-reader flag;
* packet types and the IPv4 checksum verify (:mod:`pktbuf.bench.net_ptype`): a 64 B UDP burst
  of 32 through ``rte_net_get_ptype`` + ``rte_ipv4_cksum``.

and prints the issue's targets table: pktbuf, DPDK, the ratio and the target.  A reference
that fails is reported as failed, never as a figure.
"""
from __future__ import annotations

import argparse
import json
import sys


def _lpm_rows(r: dict) -> list[dict]:
    rows = []
    d = r.get("dpdk", {})
    for k, what, target in (("single", "LPM lookup, single", 1.0), ("bulk", "LPM lookup, bulk", 1.0),
                            ("x4", "LPM lookup, x4", 1.0), ("add", "LPM add, per route", 0.5),
                            ("delete", "LPM delete, per route", 0.5)):
        p = r["pktbuf"].get(k)
        g = r.get("dpdk_figures", {}).get(k)
        rows.append({"case": what, "unit": "cycles", "pktbuf": p and p["median"],
                     "dpdk": g and g["median"], "ratio": r["ratios"].get(k),
                     "target": target, "dpdk_status": d.get("status")})
    mem = r.get("memory", {})
    if mem.get("dpdk_reserved"):
        rows.append({"case": "LPM table memory, resident after the adds (reserved "
                             f"{mem['reserved'] / 2**20:.1f} MiB)", "unit": "MiB",
                     "pktbuf": mem["resident"] / 2**20, "dpdk": mem["dpdk_reserved"] / 2**20,
                     "ratio": mem["resident"] / mem["dpdk_reserved"], "target": 1.1,
                     "dpdk_status": d.get("status")})
    return rows


def _lpm6_rows(r: dict) -> list[dict]:
    rows = []
    d = r.get("dpdk", {})
    for k, what, target in (("single", "LPM6 lookup, single", 1.0),
                            ("bulk", "LPM6 lookup, bulk", 1.0),
                            ("add", "LPM6 add, per rule", None),
                            ("delete", "LPM6 delete, per rule", None)):
        p = r["pktbuf"].get(k)
        g = r.get("dpdk_figures", {}).get(k)
        rows.append({"case": what, "unit": "cycles", "pktbuf": p and p["median"],
                     "dpdk": g and g["median"], "ratio": r["ratios"].get(k),
                     "target": target, "dpdk_status": d.get("status")})
    return rows


def _hash_rows(r: dict) -> list[dict]:
    rows = []
    for e in r.get("ratios", []):
        if e["vs"] != "dpdk_lf" or e["op"] not in ("lookup_bulk", "lookup"):
            continue
        p = next(x["cycles_per_key"]["median"] for x in r["rows"]
                 if x["variant"] == "pktbuf" and x["op"] == e["op"])
        g = next(x["cycles_per_key"]["median"] for x in r["rows"]
                 if x["variant"] == "dpdk_lf" and x["op"] == e["op"])
        rows.append({"case": f"exact match {e['op']}, {r['method']['entries']} entries, 16 B keys, "
                             "50 % hits, bursts of 32 (95 % CI "
                             f"{e['ci'][0]:.2f}..{e['ci'][1]:.2f})",
                     "unit": "cycles/key", "pktbuf": p, "dpdk": g, "ratio": e["value"],
                     "target": 1.0 if e["op"] == "lookup_bulk" else None,
                     "dpdk_status": r["dpdk"]["status"]})
    mem = r.get("memory", {})
    lf = mem.get("dpdk_lf", {})
    if lf.get("pktbuf_resident_ratio") is not None:
        rows.append({"case": "exact match table memory, resident after the adds (reserved "
                             f"{mem['pktbuf']['reserved'] / 2**20:.1f} MiB)", "unit": "MiB",
                     "pktbuf": mem["pktbuf"]["resident"] / 2**20, "dpdk": lf["reserved"] / 2**20,
                     "ratio": lf["pktbuf_resident_ratio"], "target": 1.1,
                     "dpdk_status": r["dpdk"]["status"]})
    if not rows:
        rows.append({"case": "exact match lookup_bulk", "unit": "cycles/key", "pktbuf": None,
                     "dpdk": None, "ratio": None, "target": 1.0,
                     "dpdk_status": r.get("dpdk", {}).get("status", "failed")})
    return rows


def _ptype_rows(r: dict) -> list[dict]:
    p = r["pktbuf_ns_per_packet"]["median"]
    g = r.get("dpdk_ns_per_packet", {}).get("median")
    rt = r.get("ratio", {})
    ci = f" (95 % CI {rt['ci'][0]:.2f}..{rt['ci'][1]:.2f})" if rt else ""
    return [{"case": f"rte_net_get_ptype + IPv4 checksum verify, {r['frame_len']} B UDP, burst of "
                     f"{r['burst']}{ci}", "unit": "ns/packet", "pktbuf": p, "dpdk": g,
             "ratio": rt.get("value"), "target": 1.0, "dpdk_status": r["dpdk"]["status"]}]


def run(quick: bool = False, dpdk: bool = True) -> dict:
    from . import hash as H
    from . import lpm as L
    parts, rows = {}, []
    parts["lpm"] = L.run(quick=quick, dpdk=dpdk)
    rows += _lpm_rows(parts["lpm"])
    from . import lpm6 as L6
    parts["lpm6"] = L6.run(quick=quick, dpdk=dpdk)
    rows += _lpm6_rows(parts["lpm6"])
    parts["hash"] = H.run(quick=quick, dpdk=dpdk)
    rows += _hash_rows(parts["hash"])
    from . import net_ptype as P
    parts["ptype"] = P.run(quick=quick, dpdk=dpdk)
    rows += _ptype_rows(parts["ptype"])
    return {"bench": "net", "quick": quick, "rows": rows, "parts": parts}


def print_targets(res: dict, out=None) -> None:
    p = lambda s="": print(s, file=out or sys.stdout)
    p("\npacket libraries against DPDK 22.11, same run (ratio = pktbuf / DPDK; below 1 pktbuf "
      "is faster or smaller)")
    p(f"{'case':<78} {'pktbuf':>10} {'DPDK':>10} {'ratio':>7} {'target':>7}")
    for r in res["rows"]:
        fmt = lambda v: f"{v:10.1f}" if isinstance(v, (int, float)) else f"{'-':>10}"
        ratio = f"{r['ratio']:7.3f}" if r["ratio"] is not None else \
            f"{'failed' if r['dpdk_status'] not in (None, 'ok') else '-':>7}"
        tgt = f"<= {r['target']}" if r["target"] is not None else ""
        p(f"{r['case'][:78]:<78} {fmt(r['pktbuf'])} {fmt(r['dpdk'])} {ratio} {tgt:>7}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pktbuf bench net", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small tables, few samples")
    ap.add_argument("--no-dpdk", action="store_true", help="pktbuf's side only")
    ap.add_argument("--json", metavar="FILE", help="every figure as JSON")
    a = ap.parse_args(argv)
    res = run(quick=a.quick, dpdk=not a.no_dpdk)
    from . import hash as H
    from . import lpm as L
    L.print_report(res["parts"]["lpm"])
    from . import lpm6 as L6
    L6.print_report(res["parts"]["lpm6"])
    H.print_table(res["parts"]["hash"])
    from . import net_ptype as P
    P.print_table(res["parts"]["ptype"])
    print_targets(res)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    failed = [r["case"] for r in res["rows"] if r["dpdk_status"] not in (None, "ok")
              and not a.no_dpdk]
    if failed:
        print(f"pktbuf bench net: the DPDK reference failed for: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
