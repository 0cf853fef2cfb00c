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

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

from . import ports_gen as G
from .memif_runs import Interference

FWD_CPU = 1
GEN_CPU = 0
CYCLES_RX = re.compile(r"CPU cycles/packet=([\d.]+) \((?:total|busy) cycles=(\d+) / total "
                       r"(\S+) packets=(\d+)\) at (\d+) MHz")
ACC_RX = re.compile(r"Accumulated forward statistics.*?RX-packets:\s+(\d+)\s+RX-dropped:\s+(\d+)"
                    r".*?TX-packets:\s+(\d+)\s+TX-dropped:\s+(\d+)", re.S)


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def warm() -> None:
    """Compile (or load) the generator and ``pktbuf fwd``'s loop here, before any child
    process loads them (several processes compiling one cached function at once can corrupt
    Numba's cache)."""
    from ..apps.fwd import Forwarder
    G.warm()
    for mode in ("rxonly", "io"):
        fw = Forwarder(["net_ring0"], mode, record_cycles=True)
        try:
            fw.warm()
        finally:
            fw.close()


# -- the receivers / forwarders on CPU 1 --------------------------------------------------------
class PktbufSide:
    """``pktbuf fwd`` in the namespace, pinned to CPU 1, JSON output, stopped by SIGTERM."""

    name = "pktbuf"

    def __init__(self, ns: G.Netns, ifaces, mode: str, lifetime: int = 900, nice: int = 0,
                 driver: str = "net_af_packet", devargs: str = ""):
        vdevs = []
        for i, f in enumerate(ifaces):
            vdevs += ["--vdev", f"{driver}{i},iface={f}{devargs}"]
        self.argv = ns.exec_argv(_nice(nice) + ["timeout", "--kill-after=5", str(lifetime),
                                                "taskset", "-c",
                                  str(FWD_CPU), sys.executable, "-m", "pktbuf.cli", "fwd"]
                                 + vdevs + ["--forward-mode", mode, "--record-core-cycles",
                                            "--json", "--no-telemetry"]
                                 + (["--no-idle-backoff"] if BUSY_POLL["value"] else []))
        self.proc = None
        self.status = "ok"
        self.reason = ""

    def start(self) -> bool:
        env = dict(os.environ)
        env["PYTHONPATH"] = _root() + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, start_new_session=True)
        line = _readline(self.proc, 180)
        if '"event": "start"' not in line:
            self.status, self.reason = "failed", f"pktbuf fwd did not start: {line.strip()}"
            self.close()
            return False
        return True

    @property
    def pid(self):
        return self.proc.pid

    def stop(self) -> dict:
        """SIGTERM, then the summary: ``{"packets", "busy_cycles", "cycles_per_packet", "rx",
        "tx", "tx_dropped", "rx_missed"}`` (rx/tx: over every port)."""
        if self.proc is None or self.proc.poll() is not None:
            self.status, self.reason = "failed", "pktbuf fwd exited early"
            return {}
        os.kill(self.proc.pid, signal.SIGTERM)      # timeout(1) passes it to pktbuf fwd
        try:
            out, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.close()
            self.status, self.reason = "failed", "pktbuf fwd did not stop"
            return {}
        summ = [json.loads(x) for x in out.splitlines() if x.startswith('{"event": "summary"')]
        if not summ or not summ[0].get("core_cycles"):
            self.status, self.reason = "failed", f"no summary: {err[-500:]}"
            return {}
        s = summ[0]
        cc, acc = s["core_cycles"], s["accumulated"]
        return {"packets": cc["packets"], "busy_cycles": cc["busy_cycles"],
                "cycles_per_packet": cc["cycles_per_packet"], "rx": acc["rx"], "tx": acc["tx"],
                "tx_dropped": acc["tx_dropped"], "rx_missed": acc["rx_dropped"],
                "mbufs_in_use_at_close": s["mbufs_in_use_at_close"], "tsc_hz": cc["tsc_hz"]}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                    self.proc.wait(10)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue


class TestpmdSide:
    """Interactive ``dpdk-testpmd`` with ``net_af_packet`` ports in the namespace, forwarding
    lcore on CPU 1, ``--record-core-cycles``; ``stop`` prints what we parse."""

    name = "testpmd"

    def __init__(self, ns: G.Netns, ifaces, mode: str, lifetime: int = 900, nice: int = 0,
                 driver: str = "net_af_packet"):
        from ..apps import testpmd as T
        self.tp = T.Testpmd(vdevs=[f"{driver}{i},iface={f}" for i, f in enumerate(ifaces)],
                            fwd=mode, lcores=[f"--lcores=0@{GEN_CPU},1@{FWD_CPU}"],
                            eal_extra=["--no-telemetry"], app_extra=["--record-core-cycles"],
                            netns=ns.name, mbufs=16384, lifetime=lifetime,
                            bpffs=driver == "net_af_xdp")
        at = len(ns.exec_argv([]))
        self.tp.argv[at:at] = _nice(nice)
        self.status = "ok"
        self.reason = ""

    def start(self) -> bool:
        self.tp.start()
        if not self.tp.wait_log(r"testpmd> ", 60):
            self.status, self.reason = "failed", "testpmd did not start"
            return False
        mark = len(self.tp.log())
        self.tp.cmd("start")
        if not self.tp.wait_log(r"packet forwarding - ports=", 20, since=mark):
            self.status, self.reason = "failed", "testpmd did not start forwarding"
            return False
        return True

    @property
    def pid(self):
        return self.tp.pid

    def stop(self) -> dict:
        mark = len(self.tp.log())
        self.tp.cmd("stop")
        if not self.tp.wait_log(r"Done\.", 20, since=mark):
            self.status, self.reason = "failed", "testpmd did not answer 'stop'"
            return {}
        text = self.tp.log()[mark:]
        a, c = ACC_RX.search(text), CYCLES_RX.search(text)
        if not a:
            self.status, self.reason = "failed", "no forward statistics in testpmd's output"
            return {}
        rx, rxd, tx, txd = (int(x) for x in a.groups())
        if not c:                 # testpmd prints no cycles line when it received nothing
            self.status, self.reason = "failed", f"no 'CPU cycles/packet' line (RX {rx})"
            return {}
        return {"packets": int(c.group(4)), "busy_cycles": int(c.group(2)),
                "cycles_per_packet": float(c.group(1)), "rx": rx, "tx": tx, "tx_dropped": txd,
                "rx_missed": rxd, "mhz": int(c.group(5))}

    def close(self) -> None:
        self.tp.cleanup()

    def log_tail(self) -> str:
        return self.tp.log()[-2000:]


def _readline(p, timeout: float) -> str:
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            if not sel.select(max(0.0, end - time.monotonic())):
                return ""
            line = p.stdout.readline()
            if not line:
                return ""
            if line.startswith("{"):
                return line
        return ""
    finally:
        sel.close()


NICE = {"value": 0}
BUSY_POLL = {"value": True}    # pktbuf's sides poll as testpmd does (pktbuf fwd --no-idle-backoff)


def _nice(n: int) -> list:
    return ["nice", "-n", str(n)] if n else []


COALESCE_US = 100          # the pktbuf_coalesced side's rx_coalesce_us


def _side(who, ns, ifaces, mode, driver="net_af_packet"):
    """``pktbuf`` and ``testpmd`` on ``driver``'s ports; ``pktbuf_af_packet``: pktbuf fwd on
    AF_PACKET ports (the AF_XDP sections' second reference); ``pktbuf_coalesced``: pktbuf
    fwd on ``driver``'s ports with ``rx_coalesce_us=COALESCE_US``."""
    if who == "pktbuf_af_packet":
        return PktbufSide(ns, ifaces, mode, nice=NICE["value"], driver="net_af_packet")
    if who == "pktbuf_coalesced":
        return PktbufSide(ns, ifaces, mode, nice=NICE["value"], driver=driver,
                          devargs=f",rx_coalesce_us={COALESCE_US}")
    return (PktbufSide if who == "pktbuf" else TestpmdSide)(ns, ifaces, mode,
                                                             nice=NICE["value"], driver=driver)


def _failed(side) -> dict:
    out = {"status": "failed", "reason": side.reason}
    if isinstance(side, TestpmdSide):
        out["log_tail"] = side.log_tail()
    return out


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


# -- console ---------------------------------------------------------------------------------------
def _fmt(v, spec=".1f", none="n/a"):
    return none if v is None else format(v, spec)


def _ref_note(res) -> str:
    st = res["testpmd_status"]
    return "FAILED: " + st[len("failed: "):] if st.startswith("failed") else st


def print_head(res: dict, title: str) -> bool:
    """The title, the offered load and the probe lines of an rx section; False if it
    failed."""
    print(title)
    if res["status"] != "ok":
        print(f"  FAILED: {res['reason']}")
        return False
    print(f"  offered load: {res['rate_pps'] / 1e3:.0f} kpps ({res['rate_rule']}); "
          f"{res['rounds']} rounds x {res['seconds']:g} s")
    for who, p in res.get("probe", {}).items():
        if p.get("status") == "ok":
            print(f"    probe, unpaced: {who:<16} received {p['received_pps'] / 1e3:.0f} kpps "
                  f"(generator offered {p['offered_pps'] / 1e3:.0f} kpps)")
    return True


def print_rx(res: dict) -> int:
    if not print_head(res, "\nAF_PACKET 64 B rx-only over veth: busy TSC cycles per packet of "
                           "the receiver (CPU 1)\nat a fixed offered load (generator on CPU 0), "
                           "alternating rounds"):
        return 1
    rc = _print_cycles(res)
    ratio = res.get("ratio")
    print(f"  pktbuf / testpmd cycles per packet: {_fmt(ratio, '.2f')}x   "
          f"(target <= 1.0x, aim 0.8x)" + _per_round(res))
    return rc


def _print_cycles(res) -> int:
    rc = 0
    drv = res.get("driver", "net_af_packet")
    for who in ("testpmd", "pktbuf_af_packet", "pktbuf", "pktbuf_coalesced"):
        if who == "testpmd" and res["testpmd_status"] != "ok":
            print(f"  testpmd {drv} (reference): {_ref_note(res)}")
            if res["testpmd_status"].startswith("failed"):
                rc = 1
            continue
        p = res.get(who)
        if not p:
            continue
        label = {"testpmd": f"testpmd {drv} (reference)",
                 "pktbuf_af_packet": "pktbuf fwd net_af_packet",
                 "pktbuf_coalesced": f"pktbuf fwd {drv},rx_coalesce_us={COALESCE_US}"}.get(
                     who, "pktbuf fwd" if drv == "net_af_packet" else f"pktbuf fwd {drv}")
        loss = ", ".join(f"{l}/{s}" for l, s in zip(p["lost"], p["sent"]))
        print(f"  {label:<34} {_fmt(p['cycles_per_packet']):>9} cycles/packet\n    "
              f"(samples {', '.join(_fmt(x, '.0f') for x in p['samples_cycles_per_packet'])};"
              f" lost/sent {loss}; waited {', '.join(f'{w:.2f}' for w in p['waited'])};"
              f" busy {', '.join(_fmt(b, '.2f') for b in p['busy_share'])})")
        if p["failed_runs"]:
            print(f"    {p['failed_runs']} run(s) FAILED")
            rc = 1
    return rc


def _per_round(res) -> str:
    r = res.get("ratios_per_round")
    return f"\n    per round: {', '.join(f'{x:.2f}' for x in r)}" if r else ""


def print_fwd(res: dict, title: str = "\nAF_PACKET 64 B io forwarding between two veth "
              "pairs: forwarder on CPU 1, generator + sink on CPU 0",
              cycles_target: str = "   (target <= 1.0x)") -> int:
    print(title)
    if res["status"] != "ok":
        print(f"  FAILED: {res['reason']}")
        return 1
    print(f"  (a) busy cycles per packet at {res['rate_pps'] / 1e3:.0f} kpps "
          f"({res['rate_rule']}); {res['rounds']} rounds x {res['seconds']:g} s")
    rc = _print_cycles(res)
    print(f"  pktbuf / testpmd cycles per packet: {_fmt(res.get('ratio'), '.2f')}x"
          + cycles_target + _per_round(res))
    print(f"  (b) loss-free rate (zero loss at the sink, bisection under "
          f"{res['search_ceiling_pps'] / 1e3:.0f} kpps, {res['trial_seconds']:g} s trials)")
    for who in ("testpmd", "pktbuf"):
        p = res.get(who)
        if not p or (who == "testpmd" and res["testpmd_status"] != "ok"):
            continue
        lim = "  (reached the generator's limit: a lower bound)" \
            if p.get("loss_free_generator_limited") else ""
        print(f"  {who:<34} {_fmt(p['loss_free_pps'] and p['loss_free_pps'] / 1e3, '.0f'):>9}"
              f" kpps  (samples {', '.join(f'{x / 1e3:.0f}' for x in p['samples_loss_free_pps'])};"
              f" waited {', '.join(f'{w:.2f}' for w in p['search_waited'])})" + lim)
    print(f"  pktbuf / testpmd loss-free rate: {_fmt(res.get('rate_ratio'), '.2f')}x   "
          f"(target >= 1.0x)")
    return rc
