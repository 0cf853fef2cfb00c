"""The loss-free rate search of ``pktbuf bench l3fwd``: a bisection on the offered rate whose
verdict at each rate is a majority of several trials, and a driver that interleaves the two
sides' searches trial by trial.

On a shared machine a forwarder is now and then preempted long enough for its Rx ring to
overflow; a search that fails a rate on one lost packet then measures the rarest stall of the
machine, not the forwarder.  Here a rate passes when more than half of its trials
(``trials_per_rate``) lost at most ``goal_loss`` of what they offered: 0, the default, is the
non-drop rate (NDR), RFC 1242's throughput (section 3.17, measured as in RFC 2544 section
26.1); FD.io CSIT reports besides it a partial-drop rate (PDR) at a loss ratio of 0.5 %.  The
majority is MLRsearch's (IETF BMWG draft-ietf-bmwg-mlrsearch) *goal exceed ratio* set to one
half: with trials of equal length, a load counts as an upper bound only when more than half
of its trials lost more than the goal loss ratio, so one unlucky trial neither passes nor
fails a load on its own.  A rate is decided as soon as the majority is
reached (two trials of three that agree decide it).

:class:`RateSearch` is one side's search as a state machine (:meth:`RateSearch.next_rate`,
:meth:`RateSearch.record`), so that :func:`interleave` can alternate the sides' trials --
pktbuf's, DPDK's, pktbuf's, ... -- and a noisy minute falls on both alike.  Nothing here
touches a port or a clock: the trial function does (tests give a fake one).
"""
from __future__ import annotations

import statistics
from typing import Callable

NDR = 0.0
PDR_CSIT = 0.005


def trial_passes(t: dict, goal_loss: float) -> bool:
    """A trial passes when it offered something and lost at most ``goal_loss`` of it."""
    sent, lost = t["sent"], t["sent"] - t["received"]
    return sent > 0 and lost <= goal_loss * sent


class RateSearch:
    """One side's search in (0, ``ceiling``]: the ceiling first; after a pass the rate is a
    lower bound (the ceiling passing ends the search: ``generator_limited``), after a fail an
    upper bound; then the midpoint, until the bracket is within ``resolution`` x ``ceiling``
    or ``max_trials`` trials ran (a rate left undecided then counts for nothing).  Each rate
    gets up to ``trials_per_rate`` trials and passes on a strict majority of passing ones."""

    def __init__(self, ceiling: float, *, trials_per_rate: int = 3, goal_loss: float = NDR,
                 resolution: float = 0.03, max_trials: int = 24):
        if not ceiling > 0 or trials_per_rate < 1 or max_trials < 1 or \
                not 0 <= goal_loss < 1 or not 0 < resolution <= 1:
            raise ValueError("RateSearch: bad parameters")
        self.ceiling, self.per_rate, self.goal_loss = float(ceiling), trials_per_rate, goal_loss
        self.resolution, self.max_trials = resolution, max_trials
        self.need = trials_per_rate // 2 + 1            # a strict majority
        self.lo, self.hi = 0.0, self.ceiling
        self.rates: list = []           # per probed rate: asked, its trials, the verdict
        self.n_trials = 0
        self.done = False
        self.stopped = None             # why the search ended
        self.failed = None              # the reason, when the side itself failed
        self._cur = self._new(self.ceiling)

    @staticmethod
    def _new(rate):
        return {"asked_pps": rate, "trials": [], "lost": [], "passes": 0, "verdict": None}

    def next_rate(self) -> float | None:
        """The rate of the next trial, or None when the search is over."""
        if self.done:
            return None
        if self.n_trials >= self.max_trials:
            self._finish("max_trials")
            return None
        return self._cur["asked_pps"]

    def record(self, t: dict) -> None:
        """One trial at :meth:`next_rate`'s rate: the generator's counts (``sent``,
        ``received``, ``offered_pps``)."""
        if self.done:
            raise RuntimeError("RateSearch: the search is over")
        cur = self._cur
        ok = trial_passes(t, self.goal_loss)
        cur["trials"].append({**t, "lost": t["sent"] - t["received"], "passed": ok})
        cur["lost"].append(t["sent"] - t["received"])
        cur["passes"] += ok
        self.n_trials += 1
        fails = len(cur["trials"]) - cur["passes"]
        if cur["passes"] >= self.need:
            self._decide(True)
        elif fails > self.per_rate - self.need:
            self._decide(False)

    def _decide(self, passed: bool) -> None:
        cur = self._cur
        cur["verdict"] = "pass" if passed else "fail"
        self.rates.append(cur)
        r = cur["asked_pps"]
        if passed:
            self.lo = r
            if r >= self.ceiling:
                self._finish("ceiling_passed")
                return
        else:
            self.hi = r
        if self.hi - self.lo <= self.resolution * self.ceiling:
            self._finish("resolution")
            return
        self._cur = self._new((self.lo + self.hi) / 2)

    def _finish(self, why: str) -> None:
        if self._cur is not None and self._cur["verdict"] is None and self._cur["trials"]:
            self._cur["verdict"] = "undecided"
            self.rates.append(self._cur)
        self._cur = None
        self.done, self.stopped = True, why

    def fail(self, reason: str) -> None:
        """The side itself failed (its forwarder died, its trial could not run)."""
        self.failed = reason
        self._finish("failed")

    def result(self) -> dict:
        """The figure: the median *achieved* offered rate (what the generator's Tx ring took
        per second of sending) of the trials at the highest passing rate -- a preempted
        generator offers less than asked -- or 0 when no rate passed."""
        if self.failed is not None:
            return {"status": "failed", "reason": self.failed, "rates": self.rates}
        at = next((x for x in reversed(self.rates)
                   if x["verdict"] == "pass" and x["asked_pps"] == self.lo), None)
        fig = statistics.median(t["offered_pps"] for t in at["trials"]) if at else 0.0
        return {"status": "ok", "loss_free_pps": fig, "asked_pps": self.lo,
                "upper_pps": self.hi, "generator_limited": self.stopped == "ceiling_passed",
                "passes_at_figure": at["passes"] if at else 0,
                "trials_at_figure": len(at["trials"]) if at else 0,
                "stopped": self.stopped, "trials": self.n_trials, "goal_loss": self.goal_loss,
                "trials_per_rate": self.per_rate, "rates": self.rates}


def interleave(searches: dict, trial: Callable[[str, float], dict], order=None) -> list:
    """Run the searches ``{side: RateSearch}`` trial by trial, in turn in ``order`` (default:
    the dict's), until all are over; returns the schedule ``[(side, rate), ...]``.
    ``trial(side, rate)`` returns the generator's counts, or ``{"status": "failed",
    "reason": ...}``: that side's search stops as failed and the others go on."""
    order = list(order if order is not None else searches)
    sched = []
    while True:
        ran = False
        for who in order:
            s = searches[who]
            r = s.next_rate()
            if r is None:
                continue
            sched.append((who, r))
            t = trial(who, r)
            ran = True
            if t.get("status", "ok") != "ok":
                s.fail(t.get("reason") or f"{who}: trial failed")
            else:
                s.record(t)
        if not ran:
            return sched


def summarise(results: list) -> dict:
    """One side's repeated searches: the median figure, its range, the pass fractions."""
    ok = [r for r in results if r.get("status") == "ok"]
    figs = [r["loss_free_pps"] for r in ok]
    return {"loss_free_pps": statistics.median(figs) if figs else None,
            "samples_loss_free_pps": figs,
            "pass_fractions": [(r["passes_at_figure"], r["trials_at_figure"]) for r in ok],
            "loss_free_generator_limited": any(r["generator_limited"] for r in ok)}
