"""The loss-free search of ``pktbuf bench l3fwd`` (:mod:`pktbuf.bench.lossfree`) against fake
trial functions: the majority rule, the ceiling, the interleaving order, a failing side.
Nothing is timed: a "trial" is a function of the asked rate."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pktbuf.bench.lossfree import RateSearch, interleave, summarise, trial_passes

CEIL = 1_000_000.0


def counts(rate, lost=0, sent=1000, offered=None):
    return {"sent": sent, "received": sent - lost,
            "offered_pps": rate if offered is None else offered}


def run_alone(s, fn):
    """Drive one search with ``fn(rate, k)`` (k: the trial's index at that rate)."""
    seen = {}
    while (r := s.next_rate()) is not None:
        k = seen.get(r, 0)
        seen[r] = k + 1
        s.record(fn(r, k))
    return s.result()


def test_trial_passes_goal_loss():
    assert trial_passes(counts(1, 0), 0.0)
    assert not trial_passes(counts(1, 1), 0.0)
    assert trial_passes(counts(1, 5, sent=1000), 0.005)
    assert not trial_passes(counts(1, 6, sent=1000), 0.005)
    assert not trial_passes(counts(1, 0, sent=0), 0.0)        # nothing offered: no pass


def test_one_lost_trial_of_three_does_not_fail_a_rate():
    """Below the capacity every rate's first trial loses a packet (a stall); the two others
    are clean, so the majority passes the rate and the search still finds the capacity."""
    cap = 600_000.0
    res = run_alone(RateSearch(CEIL, trials_per_rate=3, resolution=0.01),
                    lambda r, k: counts(r, lost=(1 if k == 0 else 0) if r <= cap else 50))
    assert cap * 0.98 <= res["loss_free_pps"] <= cap
    assert res["passes_at_figure"] == 2 and res["trials_at_figure"] == 3
    at = next(x for x in res["rates"] if x["asked_pps"] == res["asked_pps"])
    assert at["lost"] == [1, 0, 0] and at["verdict"] == "pass"


def test_zero_loss_rule_of_one_trial_is_the_old_search():
    """With one trial per rate the same stalls fail every rate: the figure collapses."""
    cap = 600_000.0
    res = run_alone(RateSearch(CEIL, trials_per_rate=1, resolution=0.01),
                    lambda r, k: counts(r, lost=1 if r > cap or k == 0 else 0))
    assert res["loss_free_pps"] == 0.0 and res["passes_at_figure"] == 0


def test_two_clean_trials_of_three_decide_early():
    s = RateSearch(CEIL, trials_per_rate=3)
    s.record(counts(CEIL))
    assert s.next_rate() == CEIL                    # one pass: not decided yet
    s.record(counts(CEIL))
    assert s.next_rate() is None                    # two of three: decided, and it was the top
    res = s.result()
    assert res["generator_limited"] and res["stopped"] == "ceiling_passed"
    assert res["trials"] == 2 and res["loss_free_pps"] == CEIL


def test_two_lost_trials_of_three_fail_and_bisect():
    s = RateSearch(CEIL, trials_per_rate=3)
    s.record(counts(CEIL, lost=3))
    s.record(counts(CEIL, lost=1))
    assert s.next_rate() == CEIL / 2
    assert s.rates[0]["verdict"] == "fail" and s.rates[0]["lost"] == [3, 1]


def test_even_trials_need_a_strict_majority():
    s = RateSearch(CEIL, trials_per_rate=2)
    s.record(counts(CEIL))
    s.record(counts(CEIL, lost=1))                  # 1 of 2 is no majority
    assert s.rates[0]["verdict"] == "fail" and s.next_rate() == CEIL / 2


def test_pdr_tolerance():
    """goal_loss 0.5 %: a trial losing 0.3 % passes, one losing 1 % fails."""
    cap = 500_000.0
    res = run_alone(RateSearch(CEIL, trials_per_rate=1, goal_loss=0.005, resolution=0.01),
                    lambda r, k: counts(r, lost=3 if r <= cap else 10))
    assert cap * 0.98 <= res["loss_free_pps"] <= cap and res["goal_loss"] == 0.005


def test_figure_is_the_median_achieved_rate_at_the_passing_rate():
    offered = iter([900_000.0, 700_000.0, 800_000.0])
    s = RateSearch(CEIL, trials_per_rate=3)
    s.record(counts(CEIL, lost=1, offered=next(offered)))
    s.record(counts(CEIL, offered=next(offered)))
    s.record(counts(CEIL, offered=next(offered)))
    assert s.result()["loss_free_pps"] == 800_000.0


def test_nothing_passes_gives_zero_not_the_ceiling():
    res = run_alone(RateSearch(CEIL, trials_per_rate=3, resolution=0.1),
                    lambda r, k: counts(r, lost=1))
    assert res["loss_free_pps"] == 0.0 and res["asked_pps"] == 0.0
    assert not res["generator_limited"] and res["stopped"] == "resolution"
    assert res["upper_pps"] <= 0.1 * CEIL


def test_max_trials_leaves_the_last_rate_undecided():
    s = RateSearch(CEIL, trials_per_rate=3, max_trials=3)
    s.record(counts(CEIL, lost=1))
    s.record(counts(CEIL, lost=1))                  # fail: next is CEIL / 2
    s.record(counts(CEIL / 2))                      # one pass: undecided at the cap
    assert s.next_rate() is None
    res = s.result()
    assert res["stopped"] == "max_trials" and res["trials"] == 3
    assert [x["verdict"] for x in res["rates"]] == ["fail", "undecided"]
    assert res["loss_free_pps"] == 0.0               # an undecided rate counts for nothing


def test_bad_parameters_raise():
    for kw in ({"trials_per_rate": 0}, {"max_trials": 0}, {"goal_loss": 1.0},
               {"resolution": 0.0}):
        with pytest.raises(ValueError):
            RateSearch(CEIL, **kw)
    with pytest.raises(ValueError):
        RateSearch(0.0)
    s = RateSearch(CEIL, trials_per_rate=1)
    s.record(counts(CEIL))
    with pytest.raises(RuntimeError):
        s.record(counts(CEIL))


@settings(max_examples=60, deadline=None)
@given(cap=st.floats(0.05, 1.0), per=st.integers(1, 5), res=st.floats(0.01, 0.3))
def test_deterministic_forwarder_is_found_within_resolution(cap, per, res):
    """A forwarder that is clean up to ``cap`` x ceiling and lossy above: the figure is in
    [cap - resolution, cap] x ceiling (or the ceiling itself, marked generator-limited)."""
    c = cap * CEIL
    out = run_alone(RateSearch(CEIL, trials_per_rate=per, resolution=res, max_trials=1000),
                    lambda r, k: counts(r, lost=0 if r <= c else 1))
    assert c - res * CEIL - 1e-6 <= out["loss_free_pps"] <= c
    assert out["generator_limited"] == (c >= CEIL)
    assert all(x["verdict"] in ("pass", "fail") for x in out["rates"])


def test_interleave_alternates_the_sides_trial_by_trial():
    caps = {"pktbuf": 700_000.0, "dpdk": 300_000.0}
    searches = {w: RateSearch(CEIL, trials_per_rate=3, resolution=0.05) for w in caps}
    log = []

    def trial(who, rate):
        log.append(who)
        return counts(rate, lost=0 if rate <= caps[who] else 1)

    sched = interleave(searches, trial, order=["dpdk", "pktbuf"])
    assert [w for w, _ in sched] == log
    n = {w: searches[w].n_trials for w in caps}
    both = 2 * min(n.values())
    assert log[:both] == ["dpdk", "pktbuf"] * (both // 2)      # strict alternation ...
    assert len(set(log[both:])) <= 1                            # ... then the longer one alone
    for w in caps:
        r = searches[w].result()
        assert caps[w] - 0.05 * CEIL <= r["loss_free_pps"] <= caps[w]
        assert [x for x, _ in sched].count(w) == r["trials"]


def test_interleave_same_ceiling_first_and_same_rule():
    """Both searches start at the shared ceiling and probe the same rates while they agree."""
    searches = {w: RateSearch(CEIL, trials_per_rate=3) for w in ("pktbuf", "dpdk")}
    sched = interleave(searches, lambda who, r: counts(r, lost=0 if r <= 400_000 else 1))
    assert sched[0] == ("pktbuf", CEIL) and sched[1] == ("dpdk", CEIL)
    a = [r for w, r in sched if w == "pktbuf"]
    b = [r for w, r in sched if w == "dpdk"]
    assert a == b


def test_a_failing_reference_is_reported_failed_and_the_other_side_goes_on():
    searches = {w: RateSearch(CEIL, trials_per_rate=3, resolution=0.05)
                for w in ("pktbuf", "dpdk")}
    calls = {"dpdk": 0}

    def trial(who, rate):
        if who == "dpdk":
            calls["dpdk"] += 1
            if calls["dpdk"] == 2:
                return {"status": "failed", "reason": "dpdk l3fwd exited early"}
        return counts(rate, lost=0 if rate <= 500_000 else 1)

    sched = interleave(searches, trial)
    assert [w for w, _ in sched].count("dpdk") == 2          # no trial after the failure
    bad = searches["dpdk"].result()
    assert bad["status"] == "failed" and "exited early" in bad["reason"]
    good = searches["pktbuf"].result()
    assert good["status"] == "ok" and 450_000 <= good["loss_free_pps"] <= 500_000
    s = summarise([bad])
    assert s["loss_free_pps"] is None and s["samples_loss_free_pps"] == []


def test_summarise_repeated_searches():
    rs = []
    for cap in (400_000.0, 500_000.0, 450_000.0):
        rs.append(run_alone(RateSearch(CEIL, trials_per_rate=1, resolution=0.001),
                            lambda r, k, cap=cap: counts(r, lost=0 if r <= cap else 1)))
    s = summarise(rs)
    assert len(s["samples_loss_free_pps"]) == 3
    assert s["loss_free_pps"] == sorted(s["samples_loss_free_pps"])[1]
    assert s["pass_fractions"] == [(1, 1)] * 3 and not s["loss_free_generator_limited"]
