"""The examples run and do what they say."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_njit_pipeline_example():
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "njit_pipeline.py"), "1"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    assert "errors 0" in out.stdout
    assert "pool back to 4096/4096" in out.stdout
    sunk = int(out.stdout.split("sunk ")[1].split()[0].replace(",", ""))
    assert sunk > 0
