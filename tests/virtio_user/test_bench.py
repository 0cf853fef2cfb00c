"""``pktbuf bench vhost``: the rate parsers on the two tools' outputs, and a ``--quick`` smoke
run of one case against live testpmd (pktbuf's pair and testpmd's, one round)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pktbuf.apps import testpmd as T
from pktbuf.bench import vhost as B

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_rates_are_read_from_each_tool():
    ev = [{"event": "stats", "t": t, "ports": [{"ipackets": n}]}
          for t, n in ((1.0, 0), (2.0, 1000), (3.0, 3000))]
    text = "\n".join(json.dumps(e) for e in ev) + "\nnoise\n"
    assert B._pktbuf_rates(text) == [1000.0, 2000.0]
    tp = "  Rx-pps:       123          Rx-bps: 1\n  Tx-pps: 9\n  Rx-pps:   456   Rx-bps: 2\n"
    assert B._testpmd_rates(tp) == [123.0, 456.0]
    assert B._figure([0, 5, 1, 3, 100], 1, 3) == 3
    assert B._figure([], 1, 3) == 0.0


@pytest.mark.skipif(not T.available(), reason="dpdk-testpmd is not installed")
def test_quick_run_gives_the_table_row():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", "import sys, pktbuf.cli as c; "
                        "sys.exit(c.main(sys.argv[1:]))", "bench", "vhost", "--quick",
                        "--case", "64", "--json"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(rows) == 1 and rows[0]["size"] == 64
    assert rows[0]["pktbuf_mpps"] > 0 and rows[0]["testpmd_mpps"] > 0
