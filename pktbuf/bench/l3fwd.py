"""``pktbuf bench l3fwd``: ``pktbuf l3fwd`` against DPDK 22.11's l3fwd, same run, same ports,
routes and generator.

The forwarders (:mod:`.l3fwd_sides`): ``pktbuf l3fwd`` and DPDK's l3fwd built from
``dpdk-doc``'s sources with ``offloads.patch`` and ``cycles.patch`` (:mod:`.l3fwd_ref.build`),
each with one forwarding lcore on CPU 1 polling both ports, the default routes, and busy-cycle
counting (pktbuf's ``--record-core-cycles``, the patch's count for DPDK: TSC cycles of the
iterations that received packets, as testpmd's ``--record-core-cycles``).  The generator and
sink (:mod:`.l3fwd_gen`) runs in this process on CPU 0: 64-byte UDP frames into the
forwarder's port 0 that l3fwd's default LPM route and EM flow both send out of port 1, where
the sink counts them.

Cases (the targets of the project's issue 24):

* ``memif_lpm``: two memif interfaces (the forwarder the server, the generator the client).
  First, per side, one session with an unpaced probe; then one session of both sides at
  once (each on its own memif sockets, the one not under trial held with SIGSTOP:
  :mod:`.l3fwd_search`) for ``--searches`` loss-free rate searches, their trials interleaved
  (pktbuf, DPDK, pktbuf, ...) -- per side a bisection on the offered rate in (0, ceiling],
  the same ceiling for both (1.2 x the most either side absorbed unpaced), each probed rate
  passing when most of its ``--trials-per-rate`` trials of ``--trial-seconds`` lost at most
  ``--goal-loss`` of what they offered (0: none; :mod:`.lossfree`), stopping when the
  bracket is within ``--resolution`` of the ceiling; the figure is the median over the
  searches.  Then ``--rounds`` alternating rounds at one fixed offered load, ``--share`` x
  the lower loss-free figure (below both sides' capacity): busy cycles per forwarded packet.
* ``afxdp_lpm``: the same forwarders on ``net_af_xdp`` ports over two veth pairs in a network
  namespace the benchmark creates and removes (generator: AF_PACKET on the peers); fixed load
  ``--share`` x the lower unpaced rate at the sink.
* ``memif_em``: as ``memif_lpm`` with ``--lookup em``, cycles only.
* ``stage_io``: :mod:`.stage` -- the do-nothing stage's loop against ``pktbuf fwd``'s io mode,
  ns per packet on two ``net_ring`` loopback ports, alternating slices.

Figures are medians over the rounds (the loss-free rate: over the searches); the ratio is
pktbuf's median over DPDK's, with the spread of the per-round (per-search) ratios.  Each
session's figures are differences of two snapshots of the forwarder's counts (SIGUSR1), so one
process serves a session.  A reference that fails is reported as failed (and the command
exits 1).

``pktbuf bench l3fwd [--quick] [--json PATH] [--cases a,b] [--rounds N] [--seconds S] ...``
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

from ..errors import cli_number
from . import l3fwd_gen as LG
from . import lossfree as LF
from .l3fwd_search import SETTLE_S, run_searches
from .l3fwd_sides import L3fwdSide, dpdk_exe
from .memif_runs import Interference

SIDES = ("pktbuf", "dpdk")
GEN_CPU = 0
TARGETS = {"memif_lpm": ("<=", 1.0), "memif_lpm_rate": (">=", 1.0), "afxdp_lpm": ("<=", 1.0),
           "memif_em": ("<=", 1.0), "stage_io": ("<=", 1.05)}
TITLES = {"memif_lpm": "l3fwd LPM, 64 B, memif: busy cycles/packet at a fixed load",
          "memif_lpm_rate": "l3fwd LPM, 64 B, memif: loss-free rate (Mpps)",
          "afxdp_lpm": "l3fwd LPM, 64 B, AF_XDP on veth: busy cycles/packet at a fixed load",
          "memif_em": "l3fwd EM, 64 B, memif: busy cycles/packet at a fixed load",
          "stage_io": "do-nothing stage vs `--forward-mode io`: ns/packet"}


def _med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


class Transport:
    """Where the forwarders' ports are and who feeds them: memif sockets, or veth pairs in a
    namespace (``afxdp``)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.ns = self.gen = None
        tag = f"{os.getpid()}-{time.monotonic_ns() % 10**9}"
        if kind == "memif":
            self.socks = [f"/pktbuf-l3b-{tag}-{i}" for i in range(2)]
            self.gen = LG.MemifGenerator(self.socks, cpu=GEN_CPU, tag=f"-{tag}")
        else:
            from . import ports_gen as G
            G.warm()            # compiled here, not inside the first timed run
            self.ns = G.Netns()
            self.ns.__enter__()
            try:
                self.ns.veth("g0", "f0", 1)
                self.ns.veth("g1", "f1", 1)
                self.gen = G.Generator(self.ns.name, "g0", "g1", cpu=GEN_CPU)
                self.gen.hdr = LG.l3fwd_headers(LG.PKT_LEN, bytes(self.gen.tx.mac_addr))
            except BaseException:
                self.close()
                raise

    def vdevs(self, who: str) -> list:
        if self.kind == "memif":
            return [f"net_memif{i},role=server,id=0,socket={s}"
                    for i, s in enumerate(self.socks)]
        return [f"net_af_xdp{i},iface=f{i}" for i in range(2)]

    @contextlib.contextmanager
    def session(self, who: str, lookup: str, exe, lifetime: int = 900):
        """One forwarder process, started, fed, stopped; yields the side (status says)."""
        side = L3fwdSide(who, self.vdevs(who), lookup, netns=self.ns.name if self.ns else None,
                         bpffs=self.ns is not None and who == "dpdk", exe=exe,
                         lifetime=lifetime)
        try:
            if side.start() and self.kind == "memif" and not self.gen.connect():
                side.status, side.reason = "failed", f"{who} l3fwd: memif did not connect"
            yield side
            if side.status == "ok":
                side.stop()
        finally:
            if self.kind == "memif":
                self.gen.disconnect()
            side.close()

    def close(self) -> None:
        if self.gen is not None:
            self.gen.close()
            self.gen = None
        if self.ns is not None:
            self.ns.__exit__(None, None, None)
            self.ns = None


def phase(gen, side, rate: float, seconds: float) -> dict:
    """Offer ``rate`` (0: unpaced) for ``seconds`` to a running side: the generator's counts and
    the side's busy cycles over it (two snapshots)."""
    a = side.snapshot()
    intf = Interference()
    intf.start([side._target()])
    g = gen.run(rate, seconds)
    waited = intf.stop()
    b = side.snapshot()
    if a is None or b is None:
        side.status, side.reason = "failed", f"{side.who} l3fwd gave no cycle snapshot"
        return {"status": "failed", "reason": side.reason}
    cyc, pk = b["busy_cycles"] - a["busy_cycles"], b["packets"] - a["packets"]
    g["lost"] = g["sent"] - g["received"]
    return {"status": "ok", "gen": g, "busy_cycles": cyc, "packets": pk,
            "cycles_per_packet": cyc / pk if pk else None, "waited": waited,
            "busy_share": cyc / (b["tsc_hz"] * g["seconds"]) if b["tsc_hz"] else None,
            "received_pps": g["received"] / g["seconds"]}


def _failed(side) -> dict:
    return {"status": "failed", "reason": side.reason}


def _search(res: dict, ok: list, lookup: str, exe, top: float, **kw) -> dict:
    """The loss-free searches (:mod:`.l3fwd_search`): every side in ``ok`` up at once on its
    own memif sockets, held while the other runs; per side the searches' results go to
    ``res["sides"][who]["searches"]``, a side that fails is marked failed."""
    per = kw["trial_seconds"] + 0.3 + SETTLE_S + 0.2        # a trial, its drain, its turns
    life = int(900 + kw["searches"] * len(ok) * kw["max_trials"] * per)
    with contextlib.ExitStack() as st:
        trs, live, sides = {}, {}, {}
        for who in ok:
            trs[who] = Transport("memif")
            st.callback(trs[who].close)
        for who in ok:
            side = st.enter_context(trs[who].session(who, lookup, exe, lifetime=life))
            sides[who] = side
            if side.status == "ok" and not side.pause():
                side.status, side.reason = "failed", f"{who} l3fwd did not stop on SIGSTOP"
            if side.status == "ok":
                live[who] = (side, trs[who].gen)
        out = run_searches(live, top, **kw) if live else {"rounds": [], "results": {}}
        for who, rs in out["results"].items():
            res["sides"][who]["searches"] = rs
            bad = [r for r in rs if r["status"] != "ok"]
            if bad:
                sides[who].status, sides[who].reason = "failed", bad[0]["reason"]
        st.close()                  # stops the forwarders: a side that died says so here
        for who, side in sides.items():
            if side.status != "ok":
                res["sides"][who].update(_failed(side))
    return {"ceiling_pps": top, "rounds": out["rounds"],
            "rule": {k: kw[k] for k in ("searches", "trials_per_rate", "goal_loss",
                                        "trial_seconds", "resolution", "max_trials")}}


def measure(kind: str, lookup: str, exe, *, rounds: int, seconds: float, probe_seconds: float,
            share: float, search: bool, trial_seconds: float, resolution: float,
            max_trials: int, searches: int = 1, trials_per_rate: int = 3,
            goal_loss: float = 0.0, rate: float | None = None, quick: bool = False) -> dict:
    """One case: per side a first session (the probe), with ``search`` one session of both
    sides at once for ``searches`` interleaved loss-free searches (one ceiling, trial length
    and rule for both: :mod:`.l3fwd_search`), then ``rounds`` alternating fixed-load
    sessions.  ``rate``: the fixed load, skipping the
    choice.  ``quick`` (needs ``rate``): the fixed load runs in the first session, and the
    search starts from it (a smoke test: the rate found is a lower bound)."""
    res = {"case": f"{kind}_{lookup}", "status": "ok", "sides": {}, "rounds": rounds,
           "seconds": seconds, "pkt_len": LG.PKT_LEN, "burst": LG.BURST}
    sides = [s for s in SIDES if s == "pktbuf" or not isinstance(exe, str)]
    for s in SIDES:
        res["sides"][s] = {"status": "ok", "runs": [], "probe": None, "searches": []}
    if isinstance(exe, str):
        res["sides"]["dpdk"].update(status="failed", reason=exe)
    tr = Transport(kind)
    try:
        fixed_in_first = quick and rate is not None
        for who in sides:
            with tr.session(who, lookup, exe) as side:
                if side.status != "ok":
                    res["sides"][who].update(_failed(side))
                    continue
                res["sides"][who]["probe"] = phase(tr.gen, side, 0, probe_seconds)
                if fixed_in_first and side.status == "ok":
                    res["sides"][who]["runs"].append(phase(tr.gen, side, rate, seconds))
                if side.status != "ok":
                    res["sides"][who].update(_failed(side))
        ok = [w for w in sides if res["sides"][w]["status"] == "ok"]
        if search:
            # one ceiling for both sides, so that both searches try the same rates while
            # they pass and fail alike: 1.2 x the most either side absorbed unpaced
            # (--quick: from the fixed load down)
            took = [p["gen"]["taken"] / p["gen"]["seconds"]
                    for p in (res["sides"][w]["probe"] for w in ok) if p["status"] == "ok"]
            top = rate if fixed_in_first else 1.2 * max(took + [1.0])
            res["search_ceiling_pps"] = top
            res["search"] = _search(res, ok, lookup, exe, top, searches=searches,
                                    trials_per_rate=trials_per_rate, goal_loss=goal_loss,
                                    trial_seconds=trial_seconds, resolution=resolution,
                                    max_trials=max_trials)
            ok = [w for w in sides if res["sides"][w]["status"] == "ok"]
        if rate is None:
            if search:
                caps = [LF.summarise(res["sides"][w]["searches"])["loss_free_pps"]
                        for w in ok]
                res["rate_rule"] = f"{share:g} x the lower loss-free rate"
            else:
                caps = [res["sides"][w]["probe"]["received_pps"] for w in ok]
                res["rate_rule"] = f"{share:g} x the lower unpaced rate at the sink"
            caps = [c for c in caps if c]
            rate = share * min(caps) if caps else None
        else:
            res["rate_rule"] = "given"
        res["rate_pps"] = rate
        if rate is None:
            res["status"] = "failed"
            res["reason"] = "no side forwarded anything in its first session"
            return res
        for r in range(0 if fixed_in_first else rounds):
            for who in (ok if r % 2 == 0 else ok[::-1]):
                if res["sides"][who]["status"] != "ok":
                    continue
                with tr.session(who, lookup, exe) as side:
                    if side.status == "ok":
                        res["sides"][who]["runs"].append(phase(tr.gen, side, rate, seconds))
                    if side.status != "ok":
                        res["sides"][who].update(_failed(side))
    finally:
        tr.close()
    _summarise(res)
    return res


def _summarise(res: dict) -> None:
    for sd in res["sides"].values():
        runs = [r for r in sd["runs"] if r.get("status") == "ok"]
        sd["cycles_per_packet"] = _med([r["cycles_per_packet"] for r in runs])
        sd["samples_cycles_per_packet"] = [r["cycles_per_packet"] for r in runs]
        sd["lost"] = [r["gen"]["lost"] for r in runs]
        sd["waited"] = [r["waited"] for r in runs]
        sd.update(LF.summarise(sd.get("searches", [])))
    pk, dp = res["sides"]["pktbuf"], res["sides"]["dpdk"]
    res["ratio"] = res["ratios_per_round"] = None
    if pk["cycles_per_packet"] and dp["cycles_per_packet"]:
        res["ratio"] = pk["cycles_per_packet"] / dp["cycles_per_packet"]
        res["ratios_per_round"] = [a / b for a, b in zip(pk["samples_cycles_per_packet"],
                                                         dp["samples_cycles_per_packet"])
                                   if a and b]
    ok = pk["status"] == "ok" and dp["status"] == "ok"
    res["rate_ratio"] = (pk["loss_free_pps"] / dp["loss_free_pps"]
                         if ok and pk["loss_free_pps"] and dp["loss_free_pps"] else None)
    # per search: pktbuf's figure over DPDK's of the same (interleaved) search
    res["rate_ratios_per_search"] = [a / b for a, b in zip(pk["samples_loss_free_pps"],
                                                           dp["samples_loss_free_pps"])
                                     if a and b] if ok else []


def _cell(v, fmt):
    return "n/a" if v is None else format(v, fmt)


def _met(key, ratio):
    op, t = TARGETS[key]
    if ratio is None:
        return "n/a"
    return "yes" if (ratio <= t if op == "<=" else ratio >= t) else "**no**"


def _rate_note(m: dict, c: dict) -> str:
    """The loss-free row's rule and repeatability: per side the figures of the repeated
    searches and, per search, how many trials at the figure's rate passed."""
    n, goal = m.get("trials_per_rate", 1), m.get("goal_loss", 0.0)
    rule = (f"a rate passes when most of its {n} trial(s) of {m.get('trial_seconds', 0):g} s "
            + ("lose nothing (NDR)" if not goal else f"lose <= {100 * goal:g} %")
            + f"; resolution {m['resolution']:g} of the ceiling")
    parts = []
    for w in ("pktbuf", "dpdk"):
        sd = c["sides"][w]
        figs = sd.get("samples_loss_free_pps") or []
        if not figs:
            continue
        fr = " ".join(f"{p}/{t}" for p, t in sd.get("pass_fractions", []))
        parts.append(f"{w} {min(figs) / 1e6:.3f}..{max(figs) / 1e6:.3f} Mpps over "
                     f"{len(figs)} search(es), passed {fr} at the figure"
                     + ("; generator-limited" if sd.get("loss_free_generator_limited")
                        else ""))
    return "; ".join([rule] + parts) + ("; trials interleaved" if len(parts) == 2 else "")


def rows(doc: dict) -> list:
    """The targets table's rows: (key, pktbuf, reference, ratio, spread, target, met, note)."""
    out = []

    def status(sd):
        return "ok" if sd["status"] == "ok" else f"FAILED: {sd.get('reason', '')[:160]}"

    for key in ("memif_lpm", "memif_lpm_rate", "afxdp_lpm", "memif_em"):
        c = doc["cases"].get(key.replace("_rate", ""))
        if c is None:
            continue
        pk, dp = c["sides"]["pktbuf"], c["sides"]["dpdk"]
        if key.endswith("_rate"):
            a, b, r = pk["loss_free_pps"], dp["loss_free_pps"], c["rate_ratio"]
            a, b = (None if a is None else a / 1e6), (None if b is None else b / 1e6)
            per = c.get("rate_ratios_per_search") or []
            spread = f"{min(per):.2f}..{max(per):.2f} ({len(per)})" if per else ""
            fmt = ".3f"
            note = _rate_note(doc["method"], c)
        else:
            a, b, r = pk["cycles_per_packet"], dp["cycles_per_packet"], c["ratio"]
            per = c["ratios_per_round"] or []
            spread = f"{min(per):.2f}..{max(per):.2f} ({len(per)})" if per else ""
            fmt = ".0f"
            w = [x for sd in (pk, dp) for x in sd.get("waited", [])]
            note = (f"at {c['rate_pps'] / 1e6:.3f} Mpps ({c['rate_rule']})"
                    if c.get("rate_pps") else c.get("reason", ""))
            if w:
                note += f"; waited <= {max(w):.2f}"
        ref = _cell(b, fmt) if dp["status"] == "ok" else status(dp)
        mine = _cell(a, fmt) if pk["status"] == "ok" else status(pk)
        out.append((key, mine, ref, r, spread, TARGETS[key], _met(key, r), note))
    s = doc["cases"].get("stage_io")
    if s is not None:
        if s.get("status", "ok") == "ok":
            per = [a / b for a, b in zip(s["stage_samples"], s["io_samples"])]
            out.append(("stage_io", f"{s['noop_stage_ns_per_pkt']:.2f}",
                        f"{s['io_ns_per_pkt']:.2f}", s["ratio"],
                        f"{min(per):.2f}..{max(per):.2f} ({len(per)})", TARGETS["stage_io"],
                        _met("stage_io", s["ratio"]), "reference: pktbuf fwd io, net_ring"))
        else:
            out.append(("stage_io", f"FAILED: {s['reason']}", "n/a", None, "",
                        TARGETS["stage_io"], "n/a", ""))
    return out


def markdown(doc: dict) -> str:
    lines = ["| case | pktbuf | reference | ratio | per-round spread | target | met | note |",
             "|---|---|---|---|---|---|---|---|"]
    for key, a, b, r, spread, (op, t), met, note in rows(doc):
        lines.append(f"| {TITLES[key]} | {a} | {b} | {_cell(r, '.2f')} | {spread} | "
                     f"{op} {t:g}x | {met} | {note} |")
    m = doc["method"]
    lines += ["", (f"Reference: DPDK 22.11 l3fwd (`offloads.patch` + `cycles.patch`) except "
                   f"the last row (pktbuf fwd io).  {m['rounds']} round(s) x {m['seconds']:g} s "
                   f"at the fixed load per side, alternating; medians; generator and sink on "
                   f"CPU {GEN_CPU}, forwarders on CPU 1; {os.cpu_count()} CPUs, load average "
                   f"{doc['loadavg'][0]:.2f} at the start (figures from a busy machine are "
                   "noisy).")]
    return "\n".join(lines)


def run(a) -> dict:
    from . import stage
    from .ports_gen import need_root
    method = {k: getattr(a, k) for k in ("rounds", "seconds", "probe_seconds", "share",
                                         "trial_seconds", "resolution", "max_trials",
                                         "searches", "trials_per_rate", "goal_loss", "quick")}
    doc = {"bench": "l3fwd", "method": method, "loadavg": os.getloadavg(), "cases": {}}
    exe = dpdk_exe()
    doc["reference"] = str(exe)
    LG.warm()          # the sides run one at a time: the first pktbuf one compiles its loop
    kw = {k: getattr(a, k) for k in ("rounds", "seconds", "probe_seconds", "share",
                                     "trial_seconds", "resolution", "max_trials", "rate",
                                     "quick")}
    want = set(a.cases)
    if "memif_lpm" in want:
        doc["cases"]["memif_lpm"] = measure("memif", "lpm", exe, search=True,
                                            searches=a.searches,
                                            trials_per_rate=a.trials_per_rate,
                                            goal_loss=a.goal_loss, **kw)
    if "afxdp_lpm" in want:
        why = need_root()
        doc["cases"]["afxdp_lpm"] = (
            measure("afxdp", "lpm", exe, search=False, **kw) if why is None else
            {"case": "afxdp_lpm", "status": "failed", "reason": why, "rate_ratio": None,
             "ratio": None, "ratios_per_round": None,
             "sides": {s: {"status": "failed", "reason": why, "cycles_per_packet": None,
                           "loss_free_pps": None, "loss_free_generator_limited": False}
                       for s in SIDES}})
    if "memif_em" in want:
        doc["cases"]["memif_em"] = measure("memif", "em", exe, search=False, **kw)
    if "stage_io" in want:
        try:
            doc["cases"]["stage_io"] = stage.run(rounds=max(3, a.rounds),
                                                 slice_s=0.05 if a.quick else 0.3)
        except Exception as e:  # noqa: BLE001 -- reported as failed, never omitted
            doc["cases"]["stage_io"] = {"status": "failed", "reason": f"{type(e).__name__}: {e}"}
    return doc


CASES = ("memif_lpm", "afxdp_lpm", "memif_em", "stage_io")


def main(argv=None) -> int:
    """pktbuf bench l3fwd: pktbuf l3fwd vs DPDK's l3fwd (busy cycles per packet at a fixed
    load, loss-free rate) over memif and AF_XDP, LPM and EM; the do-nothing stage vs io."""
    ap = argparse.ArgumentParser(prog="pktbuf bench l3fwd", description=main.__doc__)
    ap.add_argument("--rounds", type=cli_number(int, 1, 1000), default=5,
                    help="alternating fixed-load sessions per side")
    ap.add_argument("--seconds", type=cli_number(float, 0.05, 3600), default=3.0,
                    help="offered-load seconds per session")
    ap.add_argument("--probe-seconds", type=cli_number(float, 0.05, 3600), default=1.0)
    ap.add_argument("--share", type=cli_number(float, 0.01, 1.0), default=0.5,
                    help="the fixed load as a share of the lower capacity")
    ap.add_argument("--rate", type=cli_number(float, 1, 1e9), default=None,
                    help="the fixed load in packets/s (skips choosing it)")
    ap.add_argument("--trial-seconds", type=cli_number(float, 0.05, 3600), default=1.0,
                    help="seconds per loss-free search trial")
    ap.add_argument("--trials-per-rate", type=cli_number(int, 1, 15), default=3,
                    help="trials per probed rate; the rate passes on a majority of them")
    ap.add_argument("--goal-loss", type=cli_number(float, 0.0, 0.5), default=0.0,
                    help="the loss ratio a passing trial may have: 0 (the non-drop rate), "
                         "0.005 for FD.io CSIT's partial-drop rate")
    ap.add_argument("--searches", type=cli_number(int, 1, 50), default=3,
                    help="interleaved loss-free searches per side (the figure: their "
                         "median)")
    ap.add_argument("--resolution", type=cli_number(float, 0.001, 1.0), default=0.03,
                    help="the search stops when its bracket is within this share of the "
                         "ceiling")
    ap.add_argument("--max-trials", type=cli_number(int, 1, 500), default=24,
                    help="trials per side and search at most")
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"comma-separated subset of {','.join(CASES)}")
    ap.add_argument("--quick", action="store_true",
                    help="one short session per side and case (smoke test)")
    ap.add_argument("--json", metavar="PATH", help="also write the JSON document there")
    a = ap.parse_args(argv)
    a.cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    bad = [c for c in a.cases if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {', '.join(bad)} (choose from {', '.join(CASES)})")
    if a.quick:
        a.rounds, a.seconds, a.probe_seconds, a.trial_seconds = 1, 0.3, 0.2, 0.2
        a.resolution, a.max_trials, a.trials_per_rate, a.searches = 0.25, 3, 1, 1
        a.rate = a.rate or 100_000.0
    print(f"pktbuf bench l3fwd: {', '.join(a.cases)}; loading/compiling first...",
          file=sys.stderr, flush=True)
    doc = run(a)
    failed = [f"{k}: {s}: {sd['reason']}" for k, c in doc["cases"].items()
              for s, sd in c.get("sides", {}).items() if sd.get("status") != "ok"]
    failed += [f"{k}: {c['reason']}" for k, c in doc["cases"].items()
               if c.get("status") not in (None, "ok")]
    doc["failed"] = failed
    print(markdown(doc))
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, default=str, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
