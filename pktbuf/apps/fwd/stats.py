"""What ``pktbuf fwd`` prints: testpmd's tables, or JSON lines.

The text follows DPDK 22.11 testpmd's layout (``show port stats``' NIC statistics with the
throughput since the last display, and the forward statistics at the end), so that people and
scripts that read testpmd's output read ours: the field names and their order are testpmd's.
"""
from __future__ import annotations

import json
import sys

NIC_BORDER = "#" * 24
FWD_BORDER = "-" * 22
ACC_BORDER = "+" * 15


def nic_stats_text(port_id: int, s: dict, rate: dict) -> str:
    """One port's ``show port stats`` block: counters and the throughput since last time."""
    return "\n".join([
        f"\n  {NIC_BORDER} NIC statistics for port {port_id:<2d} {NIC_BORDER}",
        f"  RX-packets: {s['ipackets']:<10d} RX-missed: {s['imissed']:<10d} RX-bytes:  {s['ibytes']}",
        f"  RX-errors: {s['ierrors']}",
        f"  RX-nombuf:  {s['rx_nombuf']:<10d}",
        f"  TX-packets: {s['opackets']:<10d} TX-errors: {s['oerrors']:<10d} TX-bytes:  {s['obytes']}",
        "",
        "  Throughput (since last show)",
        f"  Rx-pps: {rate['rx_pps']:12d}          Rx-bps: {rate['rx_bps']:12d}",
        f"  Tx-pps: {rate['tx_pps']:12d}          Tx-bps: {rate['tx_bps']:12d}",
        f"  {NIC_BORDER}############################{NIC_BORDER}",
    ])


def rates(prev: dict | None, cur: dict, dt: float) -> dict:
    """pps and bps between two ``stats()`` snapshots ``dt`` seconds apart (bps as testpmd:
    bytes * 8, without the Ethernet overhead)."""
    if prev is None or dt <= 0:
        return {"rx_pps": 0, "rx_bps": 0, "tx_pps": 0, "tx_bps": 0}
    d = {k: max(0, cur[k] - prev[k]) for k in ("ipackets", "opackets", "ibytes", "obytes")}
    return {"rx_pps": int(d["ipackets"] / dt), "rx_bps": int(8 * d["ibytes"] / dt),
            "tx_pps": int(d["opackets"] / dt), "tx_bps": int(8 * d["obytes"] / dt)}


def fwd_stats_text(rows: list[dict]) -> str:
    """testpmd's end-of-run forward statistics: per port, then accumulated."""
    out = []
    acc = {k: 0 for k in ("rx", "rx_dropped", "tx", "tx_dropped")}
    for r in rows:
        out += [f"\n  {FWD_BORDER} Forward statistics for port {r['port_id']:<2d} {FWD_BORDER}",
                f"  RX-packets: {r['rx']:<14d} RX-dropped: {r['rx_dropped']:<14d}"
                f"RX-total: {r['rx'] + r['rx_dropped']}",
                f"  TX-packets: {r['tx']:<14d} TX-dropped: {r['tx_dropped']:<14d}"
                f"TX-total: {r['tx'] + r['tx_dropped']}"]
        if "stage_dropped" in r:        # --stage: what the stage dropped of this port's Rx
            out.append(f"  Stage-dropped: {r['stage_dropped']}")
        out.append("  " + "-" * 76)
        for k in acc:
            acc[k] += r[k]
    out += [f"\n  {ACC_BORDER} Accumulated forward statistics for all ports{ACC_BORDER}",
            f"  RX-packets: {acc['rx']:<14d} RX-dropped: {acc['rx_dropped']:<14d}"
            f"RX-total: {acc['rx'] + acc['rx_dropped']}",
            f"  TX-packets: {acc['tx']:<14d} TX-dropped: {acc['tx_dropped']:<14d}"
            f"TX-total: {acc['tx'] + acc['tx_dropped']}",
            f"  {ACC_BORDER}{'+' * 46}{ACC_BORDER}"]
    return "\n".join(out)


def stage_text(st: dict | None) -> str:
    """The stage's block (``--stage``): its counters, then its drops per reason."""
    if st is None:
        return ""
    cnt = "  ".join(f"{k}: {v}" for k, v in st["counters"].items()) or "(no counters)"
    drops = "  ".join(f"{k}: {v}" for k, v in st["drops"].items())
    return "\n".join([f"\n  {FWD_BORDER} Stage {st['name']} {FWD_BORDER}",
                      f"  {cnt}",
                      f"  Dropped: {st['dropped']:<14d} {drops}",
                      "  " + "-" * 76])


def emit_json(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def emit_text(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def end_line(errors: list, warnings: list, in_use: int, more: str = "") -> str:
    """The last line of a text run: "Done." only when nothing failed."""
    bad = []
    if errors:
        bad.append(f"{len(errors)} port error{'s' if len(errors) > 1 else ''} stopped the run "
                   "(see the error lines)")
    if in_use:
        bad.append(f"{in_use} mbufs were not returned")
    if more:
        bad.append(more)
    if bad:
        return "\nFailed: " + "; ".join(bad) + "."
    return "\nDone." + (f"  {len(warnings)} warning{'s' if len(warnings) > 1 else ''} "
                         "(see the warning lines)." if warnings else "")
