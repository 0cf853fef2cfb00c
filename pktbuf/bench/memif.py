"""``pktbuf bench memif``: memif figures as a table, pktbuf next to testpmd, in one run.

Three kinds of figures (the loops: :mod:`.memif_loops`; one measurement each:
:mod:`.memif_runs`):

* **pktbuf vs testpmd** (:func:`compare`): memif one way, pktbuf -> pktbuf and testpmd ->
  testpmd, in interleaved rounds (the order alternates, so a slow phase of the machine hits
  both), each run on the same schedule and sampling policy, doing the same work per packet
  (testpmd's ``txonly`` / ``rxonly``).  A round's ratio is pktbuf's median pps over testpmd's;
  the figure is the median ratio over the *clean* rounds, those in which no polling thread
  of either run waited for a CPU more than ``--max-wait`` of the time (more rounds are run,
  up to three times as many, to get them);
* **two pktbuf processes**: round trip, the forced general path and the zero-copy client;
* **loopback** (one thread): the copy paths' ns per packet, fast loop vs general loop
  measured interleaved (the least noisy way to compare them), and zero-copy vs copy.

``waited`` is the largest share of a run's time one of its polling threads spent waiting for a
CPU (preempted by something else); ``other`` the CPUs' worth of time foreign processes used
meanwhile.  Figures are suspect when ``waited`` is not ~0.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

from ..errors import cli_number
from .memif_loops import warm as warm_loops
from .memif_runs import Loopback, PairResult, Schedule, pktbuf_pair, testpmd_pair

# memif buffer size per size relation, with the default 2048-byte mbuf data room
RELATIONS = {"eq": 2048, "lt": 1024, "gt": 4096}


def warm() -> None:
    """Compile (or load) every loop and the loopback paths here, before children run them."""
    warm_loops()
    Loopback().close()
    Loopback(zero_copy=True).close()


def loopback_ratio(size: int, relation: str = "eq", repeat: int = 7, iters: int = 3000) -> dict:
    """ns/packet of the relation's fast path and of the forced general path, measured
    interleaved in one run; ``ratio`` = general / fast (> 1: the fast path is faster)."""
    bs = RELATIONS[relation]
    fast = Loopback(bs)
    gen = Loopback(bs, force_general=True, pool=fast.pool)
    try:
        f, g = [], []
        for _ in range(repeat):
            f.append(fast.ns_per_packet(size, iters, repeat=1))
            g.append(gen.ns_per_packet(size, iters, repeat=1))
        fm, gm = statistics.median(f), statistics.median(g)
        return {"fast_ns": fm, "general_ns": gm, "ratio": gm / fm}
    finally:
        gen.close()
        fast.close()


def loopback_zc_ratio(size: int, repeat: int = 7, iters: int = 3000) -> dict:
    """Client Tx in zero-copy vs copy mode (loopback, c2s); ratio = copy / zero-copy."""
    cp = Loopback(2048)
    zc = Loopback(2048, zero_copy=True, pool=cp.pool)
    try:
        a, b = [], []
        for _ in range(repeat):
            a.append(cp.ns_per_packet(size, iters, repeat=1))
            b.append(zc.ns_per_packet(size, iters, repeat=1))
        am, bm = statistics.median(a), statistics.median(b)
        return {"copy_ns": am, "zc_ns": bm, "ratio": am / bm}
    finally:
        zc.close()
        cp.close()


def compare(size: int = 64, rounds: int = 3, sched: Schedule | None = None,
            testpmd: bool = True, max_wait: float = 0.1, max_attempts: int | None = None) -> dict:
    """pktbuf -> pktbuf vs testpmd -> testpmd, memif one way, in interleaved rounds.

    A round is one run of each, the order alternating from round to round.  It is *clean* when
    in both runs no polling thread (sender's or receiver's) waited for a CPU more than
    ``max_wait`` of the measured time (:class:`~.memif_runs.Interference`: the same rule for
    both); rounds are run until ``rounds`` are clean or ``max_attempts`` (default
    ``3 * rounds``) were made.  The ratio is the median over the clean rounds of
    pktbuf's figure over testpmd's, or over all rounds (``clean`` False) if none was clean.

    Returns ``{"pktbuf": [PairResult], "testpmd": [PairResult] (every run), "rounds":
    [(pktbuf run, testpmd run)] (every compared round), "ratios": [...], "clean": [bool] (per
    round), "ratio": median or None, "testpmd_status": "ok" | "failed: ..." | "not available" |
    "skipped"}``.
    """
    sched = sched or Schedule()
    max_attempts = max_attempts or 3 * rounds
    pk, tp, pairs, ratios, clean = [], [], [], [], []
    status = "skipped" if not testpmd else "ok"
    r = 0
    while r < max_attempts and sum(clean) < rounds:
        order = ("tp", "pk") if r % 2 == 0 else ("pk", "tp")
        r += 1
        got = {}
        for who in order:
            if who == "pk":
                got["pk"] = pktbuf_pair("oneway", size, sched)
                pk.append(got["pk"])
            elif testpmd and status == "ok":
                got["tp"] = testpmd_pair(size, sched)
                tp.append(got["tp"])
                if not got["tp"].ok:
                    status = got["tp"].status if got["tp"].status == "not available" else \
                        f"failed: {got['tp'].reason}"
        a, b = got["pk"], got.get("tp")
        if b is None or not (a.ok and b.ok and a.mpps and b.mpps):
            if b is None or not b.ok or not a.ok:
                break           # nothing to compare against (or pktbuf failed): stop
            continue
        pairs.append((a, b))
        ratios.append(a.mpps / b.mpps)
        clean.append(a.waited <= max_wait and b.waited <= max_wait)
    pick = [x for x, c in zip(ratios, clean) if c] or ratios
    return {"pktbuf": pk, "testpmd": tp, "rounds": pairs, "ratios": ratios, "clean": clean,
            "ratio": statistics.median(pick) if pick else None, "testpmd_status": status}


def _median_mpps(results) -> float | None:
    v = [r.mpps for r in results if r.ok and r.mpps is not None]
    return statistics.median(v) if v else None


def _run_note(results) -> str:
    ok = [r for r in results if r.ok]
    if not ok:
        return ""
    zeros = sum(r.zero_samples for r in ok)
    n = sum(len(r.pps) for r in ok)
    waited = max(r.waited for r in ok)
    other = max(r.foreign for r in ok)
    return (f"{len(ok)} runs x {n // len(ok)} samples, {zeros} zero, waited {waited:.2f}, "
            f"other {other:.2f}")


def main(argv=None) -> int:
    """pktbuf bench memif: pktbuf <-> pktbuf vs testpmd <-> testpmd over memif (interleaved
    rounds, equal schedules), round trip, copy paths, zero-copy."""
    ap = argparse.ArgumentParser(prog="pktbuf bench memif", description=main.__doc__)
    ap.add_argument("--rounds", type=cli_number(int, 1, 10**6), default=3, help="interleaved pktbuf/testpmd rounds")
    ap.add_argument("--samples", type=cli_number(int, 1, 10**6), default=6, help="sample intervals per run")
    ap.add_argument("--interval", type=cli_number(float, 0.001, 3600), default=0.5, help="seconds per sample")
    ap.add_argument("--warmup", type=cli_number(float, 0, 3600), default=1.0, help="seconds before sampling")
    ap.add_argument("--quick", action="store_true", help="one short round (CI smoke test)")
    ap.add_argument("--no-testpmd", action="store_true", help="skip the testpmd reference")
    ap.add_argument("--max-wait", type=cli_number(float, 0, 1), default=0.1,
                    help="a comparison round is clean when no polling thread of either run "
                         "waited for a CPU more than this share of the time")
    ap.add_argument("--only-compare", action="store_true",
                    help="only the 64 B pktbuf vs testpmd comparison")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds, a.samples, a.interval, a.warmup = 1, 3, 0.5, 0.5
    if a.rounds < 1 or a.samples < 1 or a.interval <= 0 or a.warmup < 0:
        ap.error("--rounds and --samples must be >= 1, --interval > 0, --warmup >= 0")
    sched = Schedule(a.warmup, a.samples, a.interval)
    rep = 3 if a.quick else 7
    print(f"memif benchmark: {os.cpu_count()} CPUs; two-process runs: {sched.warmup:g} s "
          f"warm-up + {sched.samples} x {sched.interval:g} s samples at the receiver, median "
          f"of the samples (zeros count); compiling on first run...", flush=True)
    warm()
    rc = 0

    def row(name, value, unit, note=""):
        v = "n/a" if value is None else f"{value:.2f}"
        print(f"  {name:<50} {v:>9} {unit:<7} {note}", flush=True)

    print("one way, sender on CPU 0 -> receiver on CPU 1, same work per packet (testpmd "
          "txonly/rxonly):", flush=True)
    sizes = (64,) if a.only_compare else (64, 1500)
    one64 = None
    for size in sizes:
        c = compare(size, a.rounds, sched, testpmd=not a.no_testpmd, max_wait=a.max_wait)
        st = c["testpmd_status"]
        # the figures of the clean rounds (of every run when no round could be compared)
        good = [p for p, ok in zip(c["rounds"], c["clean"]) if ok] or c["rounds"]
        pk_runs = [p[0] for p in good] if good else c["pktbuf"]
        tp_runs = [p[1] for p in good] if good else c["testpmd"]
        tp_note = _run_note(tp_runs) if st == "ok" else st.upper() if \
            st.startswith("failed") else st
        row(f"testpmd -> testpmd {size} B (reference)", _median_mpps(tp_runs), "Mpps", tp_note)
        if st.startswith("failed"):
            rc = 1
            for r in c["testpmd"]:
                if r.log:
                    print(r.log, file=sys.stderr)
        pk_mpps = _median_mpps(pk_runs)
        if any(not r.ok for r in c["pktbuf"]):
            rc = 1
            print("  pktbuf run FAILED: " + "; ".join(r.reason for r in c["pktbuf"] if not r.ok))
        row(f"pktbuf -> pktbuf {size} B", pk_mpps, "Mpps", _run_note(pk_runs))
        if c["ratio"] is not None:
            n_clean = sum(c["clean"])
            which = (f"median of {n_clean} clean interleaved rounds" if n_clean else
                     f"SUSPECT: no clean round (waited > {a.max_wait:g} in all); median of all")
            row(f"pktbuf / testpmd {size} B", c["ratio"], "x", f"{which}: " + ", ".join(
                f"{r:.2f}{'' if ok else '*'}" for r, ok in zip(c["ratios"], c["clean"]))
                + (" (* = not clean)" if not all(c["clean"]) else ""))
        if size == 64:
            one64 = pk_mpps
    if a.only_compare:
        return rc
    print("two pktbuf processes:", flush=True)
    for size in (64, 1500):
        r = pktbuf_pair("roundtrip", size, sched)
        row(f"pktbuf <-> pktbuf round trip {size} B", r.mpps, "Mpps",
            f"back at the sender, {_run_note([r])}" if r.ok else f"FAILED: {r.reason}")
    g = pktbuf_pair("oneway", 64, sched, general=True)
    row("pktbuf -> pktbuf 64 B, general path", g.mpps, "Mpps",
        (f"fast/general {one64 / g.mpps:.2f}x, " if one64 and g.mpps else "") + _run_note([g]))
    z = pktbuf_pair("oneway", 64, sched, zc=True)
    row("pktbuf -> pktbuf 64 B, zero-copy client", z.mpps, "Mpps",
        (f"zc/copy {z.mpps / one64:.2f}x, " if one64 and z.mpps else "") + _run_note([z]))
    print("loopback, one thread (generate, tx, rx, free per packet):", flush=True)
    for size in (64, 1500):
        for rel in ("eq", "lt", "gt"):
            r = loopback_ratio(size, rel, repeat=rep)
            row(f"{rel} (memif {RELATIONS[rel]} vs mbuf 2048) {size} B: fast", r["fast_ns"],
                "ns/pkt")
            row(f"{rel} {size} B: general", r["general_ns"], "ns/pkt",
                f"fast over general {100 * (r['ratio'] - 1):+.0f} %")
    for size in (64, 1500):
        z = loopback_zc_ratio(size, repeat=rep)
        row(f"zero-copy client Tx {size} B", z["zc_ns"], "ns/pkt",
            f"copy {z['copy_ns']:.1f} ns, copy/zc {z['ratio']:.2f}x")
    return rc


__all__ = ["main", "compare", "warm", "loopback_ratio", "loopback_zc_ratio", "RELATIONS",
           "Loopback", "PairResult", "Schedule", "pktbuf_pair", "testpmd_pair"]

if __name__ == "__main__":
    sys.exit(main())
