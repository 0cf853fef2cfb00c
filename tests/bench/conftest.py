"""Shared helpers for the bench tests: the CLI as a real process, DPDK's presence, canned runs.

Every CLI run sets PKTBUF_BENCH_QUICK=1 (short samples) and imports this checkout.  Nothing
here asserts a timing: figures are checked for presence, shape and arithmetic only.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("data")


def cli_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PKTBUF_BENCH_QUICK"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_cli(*args, env=None, timeout=900, cwd=None) -> subprocess.CompletedProcess:
    """``pktbuf <args>`` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "pktbuf.cli", *map(str, args)],
                          capture_output=True, text=True, env=env or cli_env(),
                          timeout=timeout, cwd=cwd or ROOT)


def dpdk_or_skip():
    """The toolchain, or skip (fail under CI, whose job installs DPDK)."""
    from pktbuf.bench import dpdk_ref
    try:
        return dpdk_ref.toolchain()
    except dpdk_ref.DpdkMissing as e:
        if os.environ.get("CI"):
            pytest.fail(f"DPDK is needed in CI: {e}", pytrace=False)
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def ref_cache(tmp_path_factory):
    """A private XDG_CACHE_HOME with the reference built once for the session."""
    from pktbuf.bench import dpdk_ref
    dpdk_or_skip()
    home = tmp_path_factory.mktemp("xdg-cache")
    env = dict(os.environ, XDG_CACHE_HOME=str(home))
    exe = dpdk_ref.build(env=env)
    return home, exe


@pytest.fixture
def core_doc():
    return copy.deepcopy(json.loads((DATA / "core.json").read_text()))


@pytest.fixture
def heap_doc():
    return copy.deepcopy(json.loads((DATA / "heap.json").read_text()))


def dpdk_runtime_entries() -> set:
    """Entries in EAL's runtime directories that a reference run of ours could leave."""
    found = set()
    for base in ("/var/run/dpdk", os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp"), "dpdk"),
                 "/tmp/dpdk"):
        try:
            found |= {os.path.join(base, e) for e in os.listdir(base) if e.startswith("pktbuf-ref-")}
        except OSError:
            pass
    return found
