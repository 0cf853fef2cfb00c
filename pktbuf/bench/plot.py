"""Charts of a ``pktbuf bench`` run (SVG, matplotlib -- the optional ``plot`` extra).

core: ns per unit at burst 32, pktbuf beside DPDK per case, and pktbuf/DPDK per burst.
heap: ns per pair against block size, one and two threads, pktbuf beside rte_malloc.
"""
from __future__ import annotations

import importlib.util

MISSING = ("drawing charts needs matplotlib, which is not installed: "
           "pip install 'pktbuf[plot]' (or pip install matplotlib)")
PKTBUF_C, STAGED_C, DPDK_C = "#1f77b4", "#9ecae1", "#d62728"


class PlotUnavailable(RuntimeError):
    pass


def available() -> bool:
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotUnavailable(MISSING) from e
    plt.rcParams["svg.hashsalt"] = "pktbuf-bench"     # stable ids: small diffs between runs
    return plt


def _save(fig, path):
    fig.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")


def _subtitle(doc) -> str:
    d = doc["dpdk"]
    g = doc.get("git") or {}
    who = (d["info"] or {}).get("dpdk", "DPDK") if d["status"] == "ok" else "no DPDK column"
    return (f"{doc['date'][:10]}  {(g.get('commit') or '')[:10]}  {doc['machine']['cpu']}, "
            f"{doc['machine']['cpus']} CPUs; {who}")


def draw_core(doc: dict, path) -> None:
    plt = _pyplot()
    rows = doc["rows"]
    ok = doc["dpdk"]["status"] == "ok"
    bursts = sorted({r["burst"] for r in rows})
    pick = 32 if 32 in bursts else (bursts[0] if bursts else None)
    at = [r for r in rows if r["burst"] == pick]
    fig, axes = plt.subplots(1, 2 if ok else 1, figsize=(13 if ok else 7.5, 0.5 * len(at) + 2.2),
                             squeeze=False)
    ax = axes[0][0]
    names = [f"{r['label'].strip()}  ({r['unit'].split('/')[1]})" for r in at][::-1]
    ys = range(len(at))
    h = 0.38 if ok else 0.6
    pk = [r["pktbuf"]["median"] for r in at][::-1]
    ax.barh([y + (h / 2 if ok else 0) for y in ys], pk, h, color=PKTBUF_C, label="pktbuf")
    if ok:
        dp = [(r["dpdk"] or {}).get("median", 0) for r in at][::-1]
        ax.barh([y - h / 2 for y in ys], dp, h, color=DPDK_C, label="DPDK")
        for y, r in zip(ys, at[::-1]):
            if r.get("ratio"):
                ax.text(max(r["pktbuf"]["median"], r["dpdk"]["median"]) * 1.05, y,
                        f"{r['ratio']:.2f}x", va="center", fontsize=8)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel(f"ns per unit at burst {pick} (log scale; lower is better)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("pktbuf" + (" against DPDK" if ok else "") + f", burst {pick}", fontsize=10)
    if ok:
        ax2 = axes[0][1]
        for case in dict.fromkeys(r["case"] for r in rows):
            pts = [(r["burst"], r["ratio"]) for r in rows if r["case"] == case and r.get("ratio")]
            if pts:
                label = next(r["label"].strip() for r in rows if r["case"] == case)
                ax2.plot(*zip(*pts), marker="o", label=label)
        ax2.axhline(1.0, color="k", lw=0.8, ls="--")
        ax2.set_yscale("log", base=2)
        ax2.yaxis.set_major_formatter(plt.matplotlib.ticker.FormatStrFormatter("%g"))
        ax2.set_xscale("log", base=2)
        ax2.set_xticks(bursts)
        ax2.set_xticklabels([str(b) for b in bursts])
        ax2.set_xlabel("burst")
        ax2.set_ylabel("pktbuf time / DPDK time (log scale; below 1: pktbuf faster)")
        ax2.legend(fontsize=7)
        ax2.set_title("pktbuf / DPDK per burst", fontsize=10)
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo, hi * 1.8)               # room for the ratio labels
    fig.suptitle(_subtitle(doc), fontsize=8, y=1.0, va="bottom")
    _save(fig, path)
    plt.close(fig)


def draw_heap(doc: dict, path) -> None:
    plt = _pyplot()
    ok = doc["dpdk"]["status"] == "ok"
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), squeeze=False)
    series = [("pktbuf_outside", "pktbuf", PKTBUF_C, "-"),
              ("pktbuf_inside", "pktbuf, zero inside the lock", STAGED_C, "-")]
    if ok:
        series += [("dpdk_malloc", "rte_malloc + rte_free", DPDK_C, "-"),
                   ("dpdk_zmalloc", "rte_zmalloc + rte_free", "#ff9896", "--")]
    for i, threads in enumerate((1, 2)):
        ax = axes[0][i]
        rows = [r for r in doc["rows"] if r["threads"] == threads]
        for key, label, color, ls in series:
            pts = [(r["size"], r[key]["median"]) for r in rows if r.get(key)]
            if pts:
                ax.plot(*zip(*pts), marker="o", color=color, ls=ls, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("block size (bytes)")
        ax.set_ylabel("ns per malloc + free pair, per thread")
        ax.set_title(f"{threads} thread{'s' if threads > 1 else ''}", fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(_subtitle(doc), fontsize=8, y=1.0, va="bottom")
    _save(fig, path)
    plt.close(fig)


def draw(doc: dict, path) -> None:
    """Draw ``doc`` into the SVG file ``path`` (:class:`PlotUnavailable` without matplotlib)."""
    {"core": draw_core, "heap": draw_heap}[doc["bench"]](doc, path)
