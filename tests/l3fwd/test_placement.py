"""EAL's ``-l`` / ``-c`` in ``pktbuf l3fwd``: lcore N forwards on CPU N only, the ports'
control threads (memif's socket loops) run on the other CPUs, as DPDK's EAL places its
control threads; without either option nothing is pinned."""
import io
import os
import threading
import time

import pytest

from pktbuf.apps.l3fwd import app
from pktbuf.apps.l3fwd import options as O
from pktbuf.apps.l3fwd import placement as PL

CPUS = sorted(os.sched_getaffinity(0))


def parse(*eal):
    return O.parse(list(eal) + ["--vdev", "net_ring0", "--", "-p", "1", "--config", "(0,0,0)"])


@pytest.mark.parametrize("eal,cpus", [
    (["-l", "1"], [1]), (["-l1"], [1]), (["-l=3"], [3]), (["-l", "0-2,5"], [0, 1, 2, 5]),
    (["-l", "4,1-2"], [1, 2, 4]), (["-c", "0x6"], [1, 2]), (["-c6"], [1, 2]),
    (["-c", "1"], [0]), (["-l", "2", "-c", "0x1"], [2]), (["-c", "3", "-l", "5"], [0, 1]),
    (["--lcores", "1@0"], None), ([], None)])
def test_corelist_and_coremask(eal, cpus):
    assert parse(*eal).cpus == cpus


@pytest.mark.parametrize("eal", [["-l", ""], ["-l", "a"], ["-l", "3-1"], ["-l", "1-"],
                                 ["-l", "200"], ["-c", "0x"], ["-c", "0"], ["-c", "xyz"]])
def test_bad_corelist_or_coremask(eal):
    with pytest.raises(O.UsageError, match=eal[0]):
        parse(*eal)


def test_control_cpus_as_eal():
    assert PL.control_cpus([1], {0, 1}) == {0}
    assert PL.control_cpus([1, 2], {0, 1, 2, 3}) == {0, 3}
    assert PL.control_cpus([0, 1], {0, 1}) == {0}      # none left: the first lcore's CPU
    assert PL.unavailable([1, 5], {0, 1}) == [5]


def _argv(eal, lcore, tag):
    socks = [f"/pktbuf-test-place-{os.getpid()}-{tag}-{i}" for i in range(2)]
    return eal + [x for i, s in enumerate(socks)
                  for x in ("--vdev", f"net_memif{i},role=server,id=0,socket={s}")] + \
        ["--", "-p", "0x3", "--config", f"(0,0,{lcore}),(1,0,{lcore})", "--parse-ptype"]


class _Out(io.StringIO):
    def __init__(self):
        super().__init__()
        self.started = threading.Event()

    def write(self, s):
        n = super().write(s)
        if "entering main loop" in self.getvalue():
            self.started.set()
        return n


def _run_and_look(argv):
    """Start l3fwd in a thread; once it forwards, the affinity of that thread and of the
    memif control threads; then stop it."""
    out, stop, rc, seen = _Out(), threading.Event(), [], {}

    def body():
        rc.append(app.run(argv, out=out, stop=stop))
        seen["after"] = os.sched_getaffinity(0)

    t = threading.Thread(target=body)
    before = os.sched_getaffinity(0)
    t.start()
    try:
        assert out.started.wait(300), out.getvalue()
        time.sleep(0.2)
        seen["fwd"] = os.sched_getaffinity(t.native_id)
        seen["ctrl"] = [os.sched_getaffinity(x.native_id) for x in threading.enumerate()
                        if x.name.startswith("memif-")]
    finally:
        stop.set()
        t.join(60)
    assert rc == [0], out.getvalue()
    assert seen["after"] == before          # the caller's thread gets its CPUs back
    return seen


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs to keep control threads apart")
def test_lcore_pinned_control_threads_elsewhere():
    lc = CPUS[-1]
    seen = _run_and_look(_argv(["-l", str(lc)], lc, "l"))
    assert seen["fwd"] == {lc}
    assert len(seen["ctrl"]) == 2
    for aff in seen["ctrl"]:
        assert aff == set(CPUS) - {lc}


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs to keep control threads apart")
def test_coremask_places_the_same_way():
    lc = CPUS[0]
    seen = _run_and_look(_argv(["-c", hex(1 << lc)], lc, "c"))
    assert seen["fwd"] == {lc}
    assert seen["ctrl"] and all(aff == set(CPUS) - {lc} for aff in seen["ctrl"])


def test_without_l_nothing_is_pinned():
    seen = _run_and_look(_argv([], 1, "n"))
    assert seen["fwd"] == set(CPUS)
    assert seen["ctrl"] and all(aff == set(CPUS) for aff in seen["ctrl"])


def test_config_lcore_outside_the_list_is_refused(capsys):
    out = io.StringIO()
    # seconds: should the refusal regress, the run ends (and the test fails) instead of hanging
    assert app.run(_argv(["-l", str(CPUS[0])], CPUS[0] + 1, "r"), out=out, seconds=3) == 1
    assert f"error: lcore {CPUS[0] + 1} is not enabled in lcore mask" in out.getvalue()
    assert "check_lcore_params failed" in capsys.readouterr().err


def test_unavailable_cpu_is_refused(capsys):
    cpu = max(CPUS) + 1
    assert app.run(_argv(["-l", str(cpu)], cpu, "u"), out=io.StringIO(), seconds=3) == 1
    assert f"lcore {cpu} unavailable" in capsys.readouterr().err
