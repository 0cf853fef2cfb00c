"""The AF_PACKET sections of ``pktbuf bench ports``: pktbuf's port against DPDK 22.11's
``net_af_packet`` under ``dpdk-testpmd``, in the same run, on the same veth pairs.

Over veth the kernel's receive work (the copy into the packet ring included) runs in softirq
on the *sender's* CPU, so a receiver's packet rate mostly measures its sender.  These sections
measure instead what the receiving or forwarding process itself spends: its busy TSC cycles
per packet at a fixed offered load below both sides' limits (``pktbuf fwd
--record-core-cycles``, testpmd's ``--record-core-cycles``: cycles of the loop iterations that
moved packets, from before the Rx burst to after the Tx burst), and, for forwarding, the
highest offered rate at which the sink gets every packet.  The generator and the sink are one
in-JIT loop in this process (:mod:`.ports_gen`), pinned to CPU 0; the receiver or forwarder
runs on CPU 1 (``taskset -c 1`` for ``pktbuf fwd``; testpmd ``--lcores=0@0,1@1``, its
forwarding lcore 1 on CPU 1).  Both receivers run with their defaults (1 MiB rings, bursts
of 32, 16384 mbufs of 2176 bytes, mempool cache 250).

* ``afpacket_rx``: one veth pair ``g0`` <-> ``f0``; the generator sends on ``g0``, the
  receiver (``rxonly``) reads ``f0``.
* ``afpacket_fwd``: two pairs; the generator sends on ``g0``, the forwarder (``io``, ports
  ``f0`` and ``f1``) sends what it gets to ``f1``, the sink reads ``g1``.

See docs/bench.md ("AF_PACKET ports") for the method.
"""
from __future__ import annotations

import statistics
import time

from . import ports_gen as G
from .memif_runs import Interference
from .ports_print import print_fwd, print_rx
from .ports_sides import GEN_CPU, _failed, _side, warm

__all__ = ["measure_fwd", "measure_rx", "print_fwd", "print_rx", "search_loss_free", "warm"]

def _one_run(gen: G.Generator, side, rate: float, seconds: float) -> dict:
    """Start ``side``, offer ``rate`` for ``seconds``, let it drain, stop it; one record."""
    try:
        if not side.start():
            return _failed(side)
        time.sleep(0.2)
        intf = Interference()
        intf.start([side.pid])
        g = gen.run(rate, seconds)
        waited = intf.stop()
        time.sleep(0.3)               # V3 blocks retire within ~1 ms; let both sides drain
        got = side.stop()
        if side.status != "ok":
            return _failed(side)
        hz = got.get("tsc_hz") or got.get("mhz", 0) * 1e6
        share = got["busy_cycles"] / (hz * g["seconds"]) if hz else None
        return {"status": "ok", **got, "gen": g, "waited": waited, "busy_share": share}
    finally:
        side.close()


def _ratio(a, b):
    return a / b if a and b else None


def _med(v):
    return statistics.median(v) if v else None


def _testpmd_status(testpmd: bool) -> str:
    from ..apps import testpmd as T
    if not testpmd:
        return "skipped"
    return "ok" if T.available() else "not available"


def _probe(ns, gen, ifaces, mode, sides, seconds, sink: bool, driver="net_af_packet") -> dict:
    """Each side's rate with the generator unpaced: min(generator, receiver) limits."""
    out = {}
    for who in sides:
        r = _one_run(gen, _side(who, ns, ifaces, mode, driver), 0, seconds)
        if r["status"] != "ok":
            out[who] = r
            continue
        g = r["gen"]
        got = g["received"] if sink else r["rx"]
        out[who] = {"status": "ok", "offered_pps": g["offered_pps"],
                    "received_pps": got / g["seconds"], "run": r}
    return out


def _pick_rate(probe: dict, share: float) -> float | None:
    rates = [p["received_pps"] for p in probe.values() if p.get("status") == "ok"]
    return share * min(rates) if rates else None


# -- afpacket_rx ------------------------------------------------------------------------------------
def measure_rx(rounds: int = 5, seconds: float = 3.0, probe_seconds: float = 1.0,
               rate: float | None = None, share: float = 0.5, testpmd: bool = True,
               driver: str = "net_af_packet", extra_sides=()) -> dict:
    """Busy cycles per packet of ``rxonly`` receivers at one fixed offered rate, alternating
    pktbuf fwd and testpmd (on ``driver``'s ports; plus ``extra_sides``, e.g.
    ``pktbuf_af_packet``) for ``rounds`` rounds."""
    why = G.need_root()
    if why:
        return {"status": "failed", "reason": why}
    tstat = _testpmd_status(testpmd)
    sides = ["pktbuf"] + (["testpmd"] if tstat == "ok" else []) + list(extra_sides)
    warm()
    res = {"status": "ok", "testpmd_status": tstat, "rounds": rounds, "seconds": seconds,
           "pkt_len": G.PKT_LEN, "burst": G.BURST, "runs": {s: [] for s in sides},
           "driver": driver}
    queues = 1 if driver == "net_af_xdp" else None
    with G.Netns() as ns:
        ns.veth("g0", "f0", queues)
        gen = G.Generator(ns.name, "g0", cpu=GEN_CPU)
        try:
            if rate is None:
                pr = _probe(ns, gen, ["f0"], "rxonly", sides, probe_seconds, sink=False,
                            driver=driver)
                res["probe"] = {k: {x: y for x, y in v.items() if x != "run"} for k, v in pr.items()}
                _note_failed(res, pr)
                rate = _pick_rate(pr, share)
                res["rate_rule"] = f"{share:g} x the lower unpaced rate"
            else:
                res["rate_rule"] = "given (--rate)"
            if rate is None:
                return {**res, "status": "failed", "reason": "pktbuf's probe failed"}
            res["rate_pps"] = rate
            for r in range(rounds):
                order = sides if r % 2 == 0 else sides[::-1]
                for who in order:
                    if who == "testpmd" and res["testpmd_status"] != "ok":
                        continue
                    run = _one_run(gen, _side(who, ns, ["f0"], "rxonly", driver), rate,
                                   seconds)
                    res["runs"][who].append(run)
                    if run["status"] != "ok" and who == "testpmd":
                        res["testpmd_status"] = f"failed: {run['reason']}"
        finally:
            gen.close()
    _summarise(res, lambda run: run["rx"])
    return res


def _note_failed(res, probe):
    t = probe.get("testpmd")
    if t is not None and t.get("status") != "ok":
        res["testpmd_status"] = f"failed: {t.get('reason')}"


def _summarise(res: dict, delivered) -> None:
    """Medians of cycles/packet per side, the per-round ratios and loss."""
    for who, runs in res["runs"].items():
        ok = [r for r in runs if r["status"] == "ok"]
        res[who] = {
            "cycles_per_packet": _med([r["cycles_per_packet"] for r in ok]),
            "samples_cycles_per_packet": [r["cycles_per_packet"] for r in ok],
            "offered_pps": _med([r["gen"]["offered_pps"] for r in ok]),
            "sent": [r["gen"]["sent"] for r in ok],
            "delivered": [delivered(r) for r in ok],
            "lost": [r["gen"]["sent"] - delivered(r) for r in ok],
            "waited": [r["waited"] for r in ok],
            "busy_share": [r["busy_share"] for r in ok],
            "failed_runs": len(runs) - len(ok)}
    pk, tp = res.get("pktbuf", {}), res.get("testpmd", {})
    if res["testpmd_status"] == "ok" and pk.get("cycles_per_packet") and \
            tp.get("cycles_per_packet"):
        res["ratio"] = pk["cycles_per_packet"] / tp["cycles_per_packet"]
        res["ratios_per_round"] = [a / b for a, b in zip(pk["samples_cycles_per_packet"],
                                                         tp["samples_cycles_per_packet"])]
    else:
        res["ratio"] = None
    res["ratios"] = {}          # every pktbuf side against every reference, medians and rounds
    for a in ("pktbuf", "pktbuf_coalesced"):
        for b in ("testpmd", "pktbuf_af_packet"):
            x, y = res.get(a, {}), res.get(b, {})
            if x.get("cycles_per_packet") and y.get("cycles_per_packet") and \
                    (b != "testpmd" or res["testpmd_status"] == "ok"):
                res["ratios"][f"{a}/{b}"] = {
                    "median": x["cycles_per_packet"] / y["cycles_per_packet"],
                    "per_round": [p / q for p, q in zip(x["samples_cycles_per_packet"],
                                                        y["samples_cycles_per_packet"])]}


# -- afpacket_fwd -----------------------------------------------------------------------------------
def _trial(gen, rate, seconds, drain=0.3) -> dict:
    g = gen.run(rate, seconds, drain=drain)
    g["lost"] = g["sent"] - g["received"]
    return g


def search_loss_free(gen, hi: float, seconds: float, resolution: float = 0.03,
                     max_trials: int = 14) -> dict:
    """The highest offered rate at which the sink received every packet, by bisection on the
    asked rate in (0, ``hi``].

    A trial passes when the sink received exactly what the generator sent (zero loss).  A
    failed trial is repeated once (the machine is shared: one preemption of the forwarder can
    cost a burst); the asked rate passes if either trial passes.  The figure is the highest
    *achieved* offered rate (packets the generator's Tx ring took / sending time) among the
    passing trials: when the generator itself is preempted it offers less than asked, and
    what counts is what was actually offered.  ``generator_limited``: the ceiling itself
    passed, so the figure is a lower bound.  Stops when the bracket is within ``resolution``
    of ``hi`` or after ``max_trials`` trials."""
    trials, lo, best = [], 0.0, 0.0
    top = hi

    def attempt(r):
        for k in range(2):
            t = _trial(gen, r, seconds)
            t["retry"] = k
            trials.append(t)
            if t["lost"] == 0:
                return t
        return None

    r = hi
    while len(trials) < max_trials:
        t = attempt(r)
        if t is not None:
            lo = r
            best = max(best, t["offered_pps"])
            if r >= top:
                break
        else:
            hi = r
        if hi - lo <= resolution * top:
            break
        r = (lo + hi) / 2
    return {"loss_free_pps": best, "asked_pps": lo, "upper_pps": hi,
            "generator_limited": lo >= top, "trials": trials}


def measure_fwd(rounds: int = 5, seconds: float = 3.0, probe_seconds: float = 1.0,
                rate: float | None = None, share: float = 0.5, search_rounds: int = 3,
                trial_seconds: float = 1.0, testpmd: bool = True,
                driver: str = "net_af_packet") -> dict:
    """io forwarding between two veth pairs: (a) busy cycles per packet at a fixed offered
    rate, alternating sides for ``rounds`` rounds; (b) each side's loss-free rate, searched the
    same way, ``search_rounds`` alternating rounds."""
    why = G.need_root()
    if why:
        return {"status": "failed", "reason": why}
    tstat = _testpmd_status(testpmd)
    sides = ["pktbuf"] + (["testpmd"] if tstat == "ok" else [])
    warm()
    ifaces = ["f0", "f1"]
    res = {"status": "ok", "testpmd_status": tstat, "rounds": rounds, "seconds": seconds,
           "pkt_len": G.PKT_LEN, "burst": G.BURST, "runs": {s: [] for s in sides},
           "search": {s: [] for s in sides}, "trial_seconds": trial_seconds, "driver": driver}
    queues = 1 if driver == "net_af_xdp" else None
    with G.Netns() as ns:
        ns.veth("g0", "f0", queues)
        ns.veth("g1", "f1", queues)
        gen = G.Generator(ns.name, "g0", "g1", cpu=GEN_CPU)
        try:
            pr = _probe(ns, gen, ifaces, "io", sides, probe_seconds, sink=True, driver=driver)
            res["probe"] = {k: {x: y for x, y in v.items() if x != "run"} for k, v in pr.items()}
            _note_failed(res, pr)
            if rate is None:
                rate = _pick_rate(pr, share)
                res["rate_rule"] = f"{share:g} x the lower unpaced rate at the sink"
            else:
                res["rate_rule"] = "given (--rate)"
            if rate is None:
                return {**res, "status": "failed", "reason": "pktbuf's probe failed"}
            res["rate_pps"] = rate
            # the search's ceiling: the most the generator offered unpaced (either side)
            top = max(p["offered_pps"] for p in pr.values() if p.get("status") == "ok")
            res["search_ceiling_pps"] = top
            for r in range(rounds):
                order = sides if r % 2 == 0 else sides[::-1]
                for who in order:
                    if who == "testpmd" and res["testpmd_status"] != "ok":
                        continue
                    run = _one_run(gen, _side(who, ns, ifaces, "io", driver), rate, seconds)
                    res["runs"][who].append(run)
                    if run["status"] != "ok" and who == "testpmd":
                        res["testpmd_status"] = f"failed: {run['reason']}"
            for r in range(search_rounds):
                order = sides if r % 2 == 0 else sides[::-1]
                for who in order:
                    if who == "testpmd" and res["testpmd_status"] != "ok":
                        continue
                    side = _side(who, ns, ifaces, "io", driver)
                    try:
                        if not side.start():
                            res["search"][who].append(_failed(side))
                            if who == "testpmd":
                                res["testpmd_status"] = f"failed: {side.reason}"
                            continue
                        time.sleep(0.2)
                        intf = Interference()
                        intf.start([side.pid])
                        s = search_loss_free(gen, top, trial_seconds)
                        s["waited"] = intf.stop()
                        side.stop()
                        if side.status != "ok":
                            res["search"][who].append(_failed(side))
                            if who == "testpmd":
                                res["testpmd_status"] = f"failed: {side.reason}"
                            continue
                        res["search"][who].append({"status": "ok", **s})
                    finally:
                        side.close()
        finally:
            gen.close()
    _summarise(res, lambda run: run["gen"]["received"])
    for who, runs in res["search"].items():
        ok = [s for s in runs if s["status"] == "ok"]
        res[who]["loss_free_pps"] = _med([s["loss_free_pps"] for s in ok])
        res[who]["samples_loss_free_pps"] = [s["loss_free_pps"] for s in ok]
        res[who]["loss_free_generator_limited"] = any(s["generator_limited"] for s in ok)
        res[who]["search_waited"] = [s["waited"] for s in ok]
    pk, tp = res.get("pktbuf", {}), res.get("testpmd", {})
    res["rate_ratio"] = (_ratio(pk.get("loss_free_pps"), tp.get("loss_free_pps"))
                         if res["testpmd_status"] == "ok" else None)
    return res
