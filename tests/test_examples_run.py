"""The examples run as a user would run them (``python examples/<name>.py``), and end well:
status 0 and the figures they print say the work was done."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_every_example_is_run_here():
    assert sorted(f for f in os.listdir(EX) if f.endswith(".py")) == [
        "acl_firewall.py", "flow_counter.py", "memif_forwarder.py", "memif_traffic.py",
        "nat44.py", "njit_pipeline.py"]


def test_njit_pipeline(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(EX, "njit_pipeline.py"), "0.3"],
                       capture_output=True, text=True, timeout=600, env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    w = r.stdout.split()
    gen, sunk, errors = (int(w[w.index(k) + 1].replace(",", ""))
                         for k in ("generated", "sunk", "errors"))
    assert gen > 0 and sunk == gen and errors == 0
    assert "pool back to 4096/4096" in r.stdout


def test_memif_forwarder_and_traffic(tmp_path):
    from pktbuf.apps import forwarder, traffic
    forwarder.warm()                 # compile (or load) here, as `pktbuf demo` does: the two
    traffic.warm()                   # processes then only load, and run their seconds
    tag = f"/pktbuf-ex-{os.getpid()}"
    common = ["--sock0", tag + "-0", "--sock1", tag + "-1", "--mode", "l2fwd"]
    fwd = subprocess.Popen([sys.executable, os.path.join(EX, "memif_forwarder.py"), *common,
                            "--seconds", "2.5"], stdout=subprocess.PIPE, text=True, env=_env(),
                           cwd=tmp_path)
    try:
        assert fwd.stdout.readline().strip() == "READY"
        gen = subprocess.run([sys.executable, os.path.join(EX, "memif_traffic.py"), *common,
                              "--seconds", "1", "--size", "64"], capture_output=True, text=True,
                             timeout=600, env=_env(), cwd=tmp_path)
        out, _ = fwd.communicate(timeout=120)
    finally:
        if fwd.poll() is None:
            fwd.kill()
            fwd.wait()
    assert gen.returncode == 0, gen.stderr
    assert fwd.returncode == 0
    last_gen = [json.loads(x) for x in gen.stdout.splitlines() if x.startswith("{")][-1]
    last_fwd = [json.loads(x) for x in out.splitlines() if x.startswith("{")][-1]
    assert "error" not in last_gen and "error" not in last_fwd
    assert last_gen["final"] and last_gen["rx"] > 0 and last_gen["bad"] == 0
    assert last_fwd["rx"] >= last_gen["rx"] > 0


def _run_example(name, tmp_path):
    r = subprocess.run([sys.executable, os.path.join(EX, name)], capture_output=True, text=True,
                       timeout=900, env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_flow_counter(tmp_path):
    out = _run_example("flow_counter.py", tmp_path)
    assert "forwarded 9 of 9 frames" in out and "'new_flows': 3" in out
    top = [x.split() for x in out.splitlines() if x.startswith("  proto")]
    assert [(t[2], t[5], t[7]) for t in top] == [("10.0.0.2:2000", "3", "3126"),
                                                 ("10.0.0.1:1000", "5", "710"),
                                                 ("10.0.0.3:3000", "1", "52")]
    assert "pool back to 1024/1024" in out


def test_acl_firewall(tmp_path):
    out = _run_example("acl_firewall.py", tmp_path)
    assert "permitted 4 of 7 frames" in out and "'denied': 3" in out
    hits = [int(x.split()[0]) for x in out.splitlines() if x.strip().endswith(("}", "default"))
            and "hits" in x]
    assert hits == [1, 1, 1, 1, 1, 1, 1]
    assert "pool back to 1024/1024" in out


def test_nat44(tmp_path):
    out = _run_example("nat44.py", tmp_path)
    assert "inside -> outside: 3 of 3" in out and "'new_mappings': 2" in out
    assert "outside -> inside: 3 of 4" in out and "{'no_mapping': 1}" in out
    assert "BAD" not in out and out.count("checksums good") == 12
    assert "10.0.0.1:5001 <-> 203.0.113.4:1024" in out
    assert "pool back to 1024/1024" in out
