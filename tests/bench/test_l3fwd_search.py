"""The interleaved loss-free searches of ``pktbuf bench l3fwd`` without forwarders: the rounds
(:func:`pktbuf.bench.l3fwd_search.run_searches` with a fake trial), holding a real process with
:meth:`L3fwdSide.pause` / :meth:`L3fwdSide.resume`, and the table's loss-free row."""
from __future__ import annotations

import os
import sys
import time

from pktbuf.bench.l3fwd import _summarise, markdown, rows
from pktbuf.bench.l3fwd_search import run_searches
from pktbuf.bench.l3fwd_sides import L3fwdSide, _state

CEIL = 1_000_000.0
KW = {"trials_per_rate": 3, "goal_loss": 0.0, "trial_seconds": 1.0, "resolution": 0.05,
      "max_trials": 40}


def _counts(rate, lost):
    return {"sent": 1000, "received": 1000 - lost, "offered_pps": rate}


def test_rounds_swap_who_goes_first_and_interleave():
    caps = {"pktbuf": 800_000.0, "dpdk": 400_000.0}
    log = []

    def trial(who, rate):
        log.append(who)
        return _counts(rate, 0 if rate <= caps[who] else 1)

    out = run_searches({"pktbuf": None, "dpdk": None}, CEIL, searches=3, trial=trial, **KW)
    assert [r["order"] for r in out["rounds"]] == [["pktbuf", "dpdk"], ["dpdk", "pktbuf"],
                                                   ["pktbuf", "dpdk"]]
    for rnd in out["rounds"]:
        who = [w for w, _ in rnd["schedule"]]
        n = min(who.count("pktbuf"), who.count("dpdk"))
        assert who[:2 * n] == rnd["order"] * n          # one trial each, in turn
    assert sum(len(r["schedule"]) for r in out["rounds"]) == len(log)
    for w, rs in out["results"].items():
        assert len(rs) == 3 and all(r["status"] == "ok" for r in rs)
        assert all(caps[w] - 0.05 * CEIL <= r["loss_free_pps"] <= caps[w] for r in rs)
        # every probed rate's trials and their losses are in the result (the JSON)
        assert all(len(x["lost"]) == len(x["trials"]) >= 2 for r in rs for x in r["rates"])


def test_a_failed_side_is_not_searched_again():
    def trial(who, rate):
        if who == "dpdk":
            return {"status": "failed", "reason": "dpdk l3fwd exited during the search"}
        return _counts(rate, 0 if rate <= 500_000 else 1)

    out = run_searches({"pktbuf": None, "dpdk": None}, CEIL, searches=2, trial=trial, **KW)
    assert [r["status"] for r in out["results"]["dpdk"]] == ["failed"]
    assert [r["status"] for r in out["results"]["pktbuf"]] == ["ok", "ok"]
    assert out["rounds"][1]["order"] == ["pktbuf"]


def _sleeper(tmp_path):
    side = L3fwdSide("pktbuf", [], "lpm", lifetime=60)
    # the same wrapper as a forwarder: timeout's child, which announces its main loop
    side.argv = ["timeout", "--kill-after=5", "60", sys.executable, "-c",
                 "import time; print('entering main loop', flush=True); time.sleep(60)"]
    assert side.start(timeout=30)
    return side


def test_pause_holds_the_process_and_resume_continues_it(tmp_path):
    side = _sleeper(tmp_path)
    try:
        pid = side._target()
        assert pid != side.proc.pid
        assert side.pause() and _state(pid) in ("T", "t")
        time.sleep(0.2)
        assert side.proc.poll() is None and _state(pid) in ("T", "t")   # timeout waits on
        side.resume()
        end = time.monotonic() + 5
        while _state(pid) in ("T", "t") and time.monotonic() < end:
            time.sleep(0.01)
        assert _state(pid) not in ("T", "t", None)
        assert side.pause()
    finally:
        side.close()                    # a held process is still ended
    assert side.proc.poll() is not None and _state(pid) is None


def test_pause_of_an_exited_side_says_so(tmp_path):
    side = _sleeper(tmp_path)
    side.close()
    assert side.pause() is False


def _doc(pk_figs, dp_figs, dp_status="ok"):
    def sd(figs, status):
        rs = [{"status": "ok", "loss_free_pps": f, "asked_pps": f, "generator_limited": False,
               "passes_at_figure": 2, "trials_at_figure": 3} for f in figs]
        if status != "ok":
            rs = [{"status": "failed", "reason": "dpdk l3fwd exited during the search"}]
        return {"status": status, "reason": "" if status == "ok" else rs[0]["reason"],
                "runs": [], "searches": rs}
    c = {"case": "memif_lpm", "status": "ok", "rate_pps": 1e5, "rate_rule": "r",
         "sides": {"pktbuf": sd(pk_figs, "ok"), "dpdk": sd(dp_figs, dp_status)}}
    _summarise(c)
    return {"method": {"rounds": 1, "seconds": 1.0, "resolution": 0.03, "trials_per_rate": 3,
                       "trial_seconds": 1.0, "goal_loss": 0.0},
            "loadavg": [0.0], "cases": {"memif_lpm": c}}


def test_rate_row_has_the_median_the_spread_and_the_pass_fractions():
    doc = _doc([1.0e6, 1.2e6, 1.1e6], [1.0e6, 1.0e6, 0.5e6])
    c = doc["cases"]["memif_lpm"]
    assert c["rate_ratio"] == 1.1e6 / 1.0e6
    assert sorted(c["rate_ratios_per_search"]) == [1.0, 1.2, 2.2]
    (row,) = [r for r in rows(doc) if r[0] == "memif_lpm_rate"]
    _, mine, ref, ratio, spread, _t, met, note = row
    assert (mine, ref, spread, met) == ("1.100", "1.000", "1.00..2.20 (3)", "yes")
    assert "most of its 3 trial(s) of 1 s lose nothing" in note
    assert "pktbuf 1.000..1.200 Mpps over 3 search(es), passed 2/3 2/3 2/3" in note
    assert "trials interleaved" in note


def test_rate_row_of_a_failed_reference_says_failed():
    doc = _doc([1.0e6], [], dp_status="failed")
    c = doc["cases"]["memif_lpm"]
    assert c["rate_ratio"] is None and c["rate_ratios_per_search"] == []
    (row,) = [r for r in rows(doc) if r[0] == "memif_lpm_rate"]
    assert row[2].startswith("FAILED") and "exited during the search" in row[2]
    assert row[6] == "n/a"
    assert "FAILED" in markdown(doc)


class _FakeProc:
    def __init__(self):
        self.rc = None

    def poll(self):
        return self.rc


class _FakeSide:
    def __init__(self, who, log):
        self.who, self.log, self.proc, self.held = who, log, _FakeProc(), True

    def resume(self):
        self.log.append((self.who, "resume"))

    def _target(self):
        return os.getpid()

    def pause(self):
        self.log.append((self.who, "pause"))
        return self.held


class _FakeGen:
    def __init__(self, who, log, sides):
        self.who, self.log, self.sides = who, log, sides

    def run(self, rate, seconds):
        self.log.append((self.who, "run"))
        # the other side is held while this one runs: its last act was a pause
        for w, s in self.sides.items():
            if w != self.who:
                acts = [a for x, a in self.log if x == w]
                assert not acts or acts[-1] == "pause"
        return {"sent": 100, "received": 100, "offered_pps": rate}


def test_each_trial_continues_its_side_and_holds_it_again():
    from pktbuf.bench.l3fwd_search import _trial_fn
    log = []
    sides = {w: _FakeSide(w, log) for w in ("pktbuf", "dpdk")}
    live = {w: (sides[w], _FakeGen(w, log, sides)) for w in sides}
    trial = _trial_fn(live, 0.01, 0.0)
    for w in ("pktbuf", "dpdk", "pktbuf"):
        g = trial(w, 1000.0)
        assert g["lost"] == 0 and 0 <= g["waited"] <= 1 and 0 <= g["gen_waited"] <= 1
    assert log == [(w, a) for w in ("pktbuf", "dpdk", "pktbuf")
                   for a in ("resume", "run", "pause")]
    sides["dpdk"].held = False                  # it exited: pause could not stop it
    assert trial("dpdk", 1000.0)["status"] == "failed"
    sides["pktbuf"].proc.rc = 1                 # exited between trials: no trial at all
    n = len(log)
    assert trial("pktbuf", 1000.0)["status"] == "failed" and len(log) == n
