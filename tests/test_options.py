"""Every numeric and enumerated option of every ``pktbuf`` command (and of the processes they
start) refuses a bad value with argparse's one-line error and exit status 2 -- before anything
starts.  The parsers are taken from the commands themselves, so an option added later without
a range check fails here."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from pktbuf.apps import demo, forwarder, traffic
from pktbuf.apps.fwd import main as fwd
from pktbuf.apps import compile as compile_cmd
from pktbuf.bench import (distrib, dpdk_ref, heap, memif, memif_runs, net, pagepool, ports, report,
                          rss)

# command -> (its main, the arguments it requires)
COMMANDS = {
    "fwd": (fwd.main, ["--vdev", "net_ring0"]),
    "demo": (demo.main, []),
    "demo forwarder": (forwarder.forwarder_main, []),
    "demo traffic": (traffic.traffic_main, []),
    "bench core": (report.main, []),
    "bench memif": (memif.main, []),
    "bench memif child": (memif_runs._child, ["sink", "/x"]),
    "bench pagepool": (pagepool.main, []),
    "bench heap": (heap.main, []),
    "bench ports": (ports.main, []),
    "bench rss": (rss.main, []),
    "bench distrib": (distrib.main, []),
    "bench dpdk_ref": (dpdk_ref.main, []),
    "bench net": (net.main, []),
    "compile": (compile_cmd.main, []),
}


class _Got(Exception):
    pass


def parser_of(main) -> argparse.ArgumentParser:
    """The parser ``main`` builds: its parse_args is stopped before anything runs."""
    seen = []
    real = argparse.ArgumentParser.parse_args

    def grab(self, *a, **k):
        seen.append(self)
        raise _Got()
    argparse.ArgumentParser.parse_args = grab
    try:
        with pytest.raises(_Got):
            main([])
    finally:
        argparse.ArgumentParser.parse_args = real
    return seen[0]


def bad_values(action) -> list[str]:
    """Values out of the option's range or set, and not a number at all."""
    t = action.type
    if action.choices is not None:
        return ["no-such-" + str(next(iter(action.choices))), ""]
    kind = getattr(t, "kind", None)
    if kind is None:
        return []
    out = ["x1", ""]
    if getattr(t, "lo", None) is not None:
        lo = t.lo
        out.append(str(lo - 1) if kind is int else repr(lo - 0.5 if lo > 0 else lo - 1.0))
    if getattr(t, "hi", None) is not None:
        hi = t.hi
        out.append(str(hi + 1) if kind is int else repr(hi * 2 + 1.0))
    if kind is float:
        out += ["nan", "inf"]
    return out


def _cases():
    for cmd, (main, req) in COMMANDS.items():
        ap = parser_of(main)
        for act in ap._actions:
            if not act.option_strings and act.choices is None:
                continue
            for v in bad_values(act):
                yield pytest.param(cmd, act.option_strings[0] if act.option_strings else None,
                                   v, id=f"{cmd}:{(act.option_strings or [act.dest])[0]}={v!r}")


def test_every_numeric_option_is_range_checked():
    """No option of any command takes a plain int/float: each goes through cli_number (or is
    an enumeration), so every one has a range."""
    unchecked = []
    for cmd, (main, _) in COMMANDS.items():
        for act in parser_of(main)._actions:
            if act.type in (int, float):
                unchecked.append(f"{cmd} {act.option_strings}")
    assert not unchecked, unchecked


@pytest.mark.parametrize("cmd, opt, value", list(_cases()))
def test_bad_value_is_a_usage_error(cmd, opt, value, capsys):
    main, req = COMMANDS[cmd]
    ap = parser_of(main)
    if opt is None:                                 # a positional enumeration (the child's role)
        argv = [value] + req[1:]
    else:
        argv = req + [opt, value]
    with pytest.raises(SystemExit) as ei:
        ap.parse_args(argv)
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "error: argument" in err[-1], err
    assert (opt or "role") in err[-1]


@pytest.mark.parametrize("argv, what", [
    (["--vdev", "net_ring0", "--stats-period", "-1"], "--stats-period"),
    (["--vdev", "net_ring0", "--txpkts", "3000"], "--txpkts"),
    (["--vdev", "net_ring0", "--distributor"], "--distributor"),
    (["--vdev", "net_ring0", "--symmetric"], "--symmetric"),
    (["--vdev", "net_ring0", "--eth-peer", "40,02:00:00:00:00:01"], "--eth-peer"),
    (["--vdev", "net_ring0", "--eth-peer", "1,02:00:00"], "--eth-peer"),
    (["--vdev", "net_ring0", "--file-prefix", "a/b"], "--file-prefix"),
    (["--vdev", "net_ring0", "--dist-ring-size", "1", "--workers", "1",
      "--distributor"], "--dist-ring-size"),
])
def test_fwd_refuses_before_starting(argv, what, capsys):
    """Values that need the whole command line to judge, and the issue's own example."""
    with pytest.raises(SystemExit) as ei:
        fwd.main(argv)
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert what in err[-1] and "error:" in err[-1]


def test_the_command_line_itself():
    """Through the ``pktbuf`` entry point: a usage error is status 2 with one error line;
    ``--help`` shows the exit statuses."""
    def run(*argv):
        return subprocess.run([sys.executable, "-m", "pktbuf.cli", *argv], capture_output=True,
                              text=True, timeout=120)
    r = run("fwd", "--vdev", "net_ring0", "--stats-period", "-1")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1].startswith("pktbuf fwd: error: argument "
                                                        "--stats-period")
    assert run("info", "extra").returncode == 2
    assert run("nosuchcommand").returncode == 2
    assert run("bench", "nosuch").returncode == 2
    h = run("fwd", "--help")
    assert h.returncode == 0 and "exit status:" in h.stdout and "usage error" in h.stdout
