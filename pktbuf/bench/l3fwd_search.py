"""The loss-free rate search of ``pktbuf bench l3fwd`` (case ``memif_lpm``): both forwarders
up at once, their trials interleaved in time.

Both forwarders run their lcore on the same CPU (1), so they cannot forward at the same time
without sharing it.  Instead each gets its own pair of memif sockets and its own generator
(:class:`.l3fwd_gen.MemifGenerator`, on CPU 0), both processes start once for the whole
search, and the one whose turn it is not is held with SIGSTOP (:meth:`.L3fwdSide.pause`): a
stopped process is never scheduled, so the running one has CPU 1 as it would alone.  A trial
continues its side (SIGCONT), waits ``SETTLE_S`` for it to be scheduled again, offers the rate
for ``trial_seconds`` plus the generator's drain, and stops the side again.  The sides take
turns trial by trial (:func:`.lossfree.interleave`: pktbuf, DPDK, pktbuf, ...), so a noisy
stretch of the machine lands on both; each side has its own bisection
(:class:`.lossfree.RateSearch`) under the same ceiling, trial length and rule.  The whole
search runs ``searches`` times, the side that goes first swapping from one to the next; the
spread of the figures over the searches is the figure's repeatability.

Alternating sessions instead (one forwarder process per trial) would pay a process start per
trial -- seconds for pktbuf's, whose compiled loops load at start -- and put those starts, not
forwarding, between the two sides' trials.

Each trial records, besides the generator's counts, ``waited``: the share of it the
forwarder's busiest thread was runnable but off its CPU, and ``gen_waited``, the same for this
process (the generator): :class:`.memif_runs.Interference`.  A trial lost to a preemption
shows there.
"""
from __future__ import annotations

import os
import time

from .lossfree import RateSearch, interleave
from .memif_runs import Interference

SETTLE_S = 0.1


def _trial_fn(live: dict, seconds: float, settle: float):
    def trial(who: str, rate: float) -> dict:
        side, gen = live[who]
        if side.proc is None or side.proc.poll() is not None:
            return {"status": "failed", "reason": f"{who} l3fwd exited during the search"}
        side.resume()
        fwd, own = Interference(), Interference()
        try:
            time.sleep(settle)
            fwd.start([side._target()])
            own.start([os.getpid()])
            g = gen.run(rate, seconds)
            g["waited"], g["gen_waited"] = fwd.stop(), own.stop()
        finally:
            held = side.pause()
        if not held:
            return {"status": "failed",
                    "reason": f"{who} l3fwd exited (or did not stop) during the search"}
        g["lost"] = g["sent"] - g["received"]
        return g
    return trial


def run_searches(live: dict, ceiling: float, *, searches: int, trials_per_rate: int,
                 goal_loss: float, trial_seconds: float, resolution: float, max_trials: int,
                 settle: float = SETTLE_S, trial=None) -> dict:
    """``live``: ``{side: (L3fwdSide, MemifGenerator)}``, every side started, connected and
    paused.  Returns ``{"rounds": [{"order", "schedule"}], "results": {side: [result per
    search]}}`` (:meth:`.lossfree.RateSearch.result`).  ``trial``: a stand-in for the
    generator (the tests')."""
    order = list(live)
    trial = trial or _trial_fn(live, trial_seconds, settle)
    out = {"rounds": [], "results": {w: [] for w in order}}
    dead = set()
    for k in range(searches):
        turn = [w for w in (order if k % 2 == 0 else order[::-1]) if w not in dead]
        ss = {w: RateSearch(ceiling, trials_per_rate=trials_per_rate, goal_loss=goal_loss,
                            resolution=resolution, max_trials=max_trials) for w in turn}
        sched = interleave(ss, trial, order=turn)
        out["rounds"].append({"order": turn, "schedule": sched})
        for w, s in ss.items():
            r = s.result()
            out["results"][w].append(r)
            if r["status"] != "ok":
                dead.add(w)             # a side that failed is not searched again
    return out
