"""The demo and the benchmark command run end to end (short), with real processes."""
import pytest

from pktbuf.bench import memif as B
from pktbuf.memif import demo


@pytest.mark.parametrize("mode", ["l2fwd", "macswap"])
def test_demo_runs_and_checks_macs(warm, capsys, mode):
    assert demo.main(["--mode", mode, "--seconds", "1.5"]) == 0
    out = capsys.readouterr().out
    assert "result: OK" in out and "summary" in out
    line = [x for x in out.splitlines() if x.strip().startswith("received with wrong MACs")][0]
    assert line.split()[-1] == "0"
    back = [x for x in out.splitlines() if x.strip().startswith("received back")][0]
    assert int(back.split()[-3].replace(",", "")) > 0     # packets, pps, "M"


def test_two_process_oneway_moves_packets(warm):
    B.warm()
    assert B.two_process("oneway", 64, 1.5) > 0
    assert B.two_process("roundtrip", 64, 1.5) > 0


def test_loopback_ratio_reports_both_paths(warm):
    r = B.loopback_ratio(64, "eq", repeat=1, iters=50)
    assert r["fast_ns"] > 0 and r["general_ns"] > 0
