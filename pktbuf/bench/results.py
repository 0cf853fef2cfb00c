"""The record of a ``pktbuf bench`` run: one JSON-able dict per benchmark.

``pktbuf bench core|heap --json FILE`` writes it; :mod:`.markdown` and :mod:`.plot` render it.
Every figure carries its unit; pktbuf's and DPDK's samples are kept beside their medians, with
the count of timed intervals dropped as preempted.  A document looks like::

    {"schema": 1, "bench": "core", "date": ..., "command": "pktbuf bench core --dpdk",
     "git": {"commit": ..., "dirty": false} | null, "machine": {...}, "method": {...},
     "dpdk": {"status": "ok" | "missing" | "failed" | "off", "message": ..., "label": ...,
              "eal_args": [...], "info": {...}},
     "rows": [...], "extras": [...], "targets": [...]}

(rows and extras are described where they are made: report.py for core, heap.py for heap).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

SCHEMA = 1

# The pktbuf / DPDK ratios the project tracks, in this order: (title, case, burst).
TARGETS = (
    ("`pktbuf.kernels` alloc + free one at a time", "single", 32),
    ("raw mempool get + put, burst 32", "raw", 32),
    ("free_bulk alternating A,B,A,B burst 32", "alternating", 32),
    ("free_bulk flat burst 32", "flat", 32),
    ("alloc_bulk + free_bulk round trip burst 32", "roundtrip", 32),
)


def median(values) -> float:
    return float(statistics.median(values))


def figure(samples, kept: int | None = None, dropped: int | None = None, **more) -> dict:
    """A measured figure: its median and every sample (and interval counts when timed per call)."""
    out = {"median": median(samples), "samples": [round(float(v), 4) for v in samples]}
    if kept is not None:
        out["kept"] = int(kept)
    if dropped is not None:
        out["dropped"] = int(dropped)
    out.update(more)
    return out


def ratio(a: dict | None, b: dict | None) -> float | None:
    """a's median / b's median, or None when either is missing."""
    if not a or not b or not b.get("median"):
        return None
    return a["median"] / b["median"]


def dpdk_off() -> dict:
    return {"status": "off", "message": "not requested (--dpdk)", "label": None,
            "eal_args": None, "info": None}


def dpdk_missing(msg: str) -> dict:
    return {"status": "missing", "message": msg, "label": None, "eal_args": None, "info": None}


def dpdk_failed(msg: str, ref=None) -> dict:
    d = dpdk_ok(ref) if ref is not None else dpdk_missing(msg)
    d.update(status="failed", message=msg)
    return d


def dpdk_ok(ref) -> dict:
    return {"status": "ok", "message": None, "label": ref.label(), "eal_args": list(ref.eal),
            "info": dict(ref.info)}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info(tsc_hz: float | None = None) -> dict:
    import numba
    import numpy

    from .. import __version__
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {"cpu": _cpu_model(), "cpus": os.cpu_count(), "affinity": affinity,
            "system": f"{platform.system()} {platform.release()}", "machine": platform.machine(),
            "python": platform.python_version(), "numba": numba.__version__,
            "numpy": numpy.__version__, "pktbuf": __version__,
            "tsc_hz": round(tsc_hz) if tsc_hz else None, "loadavg_start": _loadavg()}


def git_info() -> dict | None:
    """The commit of the checkout pktbuf runs from (None when it is not a git checkout)."""
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if rev.returncode != 0:
            return None
        st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": rev.stdout.strip(), "dirty": bool(st.stdout.strip())}


def command_line(bench: str, argv) -> str:
    return shlex.join(["pktbuf", "bench", bench, *(sys.argv[1:] if argv is None else argv)])


def document(bench: str, argv, machine: dict, method: dict, dpdk: dict, rows: list,
             extras: list | None = None, targets: list | None = None) -> dict:
    machine = dict(machine, loadavg_end=_loadavg())
    return {"schema": SCHEMA, "bench": bench,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": command_line(bench, argv), "git": git_info(), "machine": machine,
            "method": method, "dpdk": dpdk, "rows": rows, "extras": extras or [],
            "targets": targets or []}


def core_targets(rows: list) -> list:
    """The tracked ratios from core rows: [{"title", "case", "burst", "pktbuf", "dpdk", "ratio"}]."""
    by = {(r["case"], r["burst"]): r for r in rows}
    out = []
    for title, case, burst in TARGETS:
        r = by.get((case, burst))
        out.append({"title": title, "case": case, "burst": burst,
                    "pktbuf": r["pktbuf"]["median"] if r else None,
                    "dpdk": r["dpdk"]["median"] if r and r.get("dpdk") else None,
                    "ratio": ratio(r["pktbuf"], r.get("dpdk")) if r else None})
    return out


def write_json(doc: dict, path) -> None:
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=1) + "\n")


def read_json(path) -> dict:
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or "bench" not in doc:
        raise ValueError(f"{path}: not a pktbuf bench record (schema {SCHEMA})")
    return doc
