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


def test_example_scripts_forward_between_processes(warm):
    """examples/memif_forwarder.py + examples/memif_traffic.py, started by hand as a user would."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    demo.warm()
    tag = f"/pktbuf-ex-{os.getpid()}"
    common = ["--sock0", tag + "-0", "--sock1", tag + "-1", "--mode", "l2fwd"]
    fwd = subprocess.Popen([sys.executable, os.path.join(root, "examples", "memif_forwarder.py")]
                           + common + ["--seconds", "2.5"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert fwd.stdout.readline().strip() == "READY"
        gen = subprocess.run([sys.executable, os.path.join(root, "examples", "memif_traffic.py")]
                             + common + ["--seconds", "1.5"], capture_output=True, text=True,
                             env=env, timeout=120)
        out, _ = fwd.communicate(timeout=60)
    finally:
        if fwd.poll() is None:
            fwd.kill()
            fwd.wait()
    assert gen.returncode == 0 and fwd.returncode == 0, gen.stderr
    g = json.loads(gen.stdout.splitlines()[-1])
    f = json.loads(out.splitlines()[-1])
    assert g["final"] and f["final"]
    assert g["rx"] > 0 and g["bad"] == 0
    assert f["rx"] >= g["rx"] and f["tx"] >= g["rx"]
