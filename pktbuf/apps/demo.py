"""``pktbuf demo``: the memif forwarding demo, a forwarder and a traffic process.

It starts

* a **forwarder** (:mod:`.forwarder`, two memif server ports): receives on a port, rewrites MAC
  addresses and sends the packet out -- ``macswap`` or ``l2fwd``;
* a **traffic** process (:mod:`.traffic`, memif clients): generates UDP frames as fast as the
  ring takes them on port 0 and counts what comes back (macswap: port 0; l2fwd: port 1),
  checking the frames' MACs;

and prints live statistics (pps, bytes, drops) about once a second from the JSON lines both
print, and a summary table at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from ..errors import cli_number
from .compile import CompileFailed, ensure_compiled
from .forwarder import MODES
from .txonly import MIN_PKT_LEN


def _fmt_rate(x: float) -> str:
    return f"{x / 1e6:6.2f} M" if x >= 1e5 else f"{x / 1e3:6.1f} k"


def main(argv=None) -> int:
    """Run the forwarding demo: spawn forwarder + traffic processes, print live stats."""
    ap = argparse.ArgumentParser(prog="pktbuf demo", description=main.__doc__,
                                 epilog="exit status: 0 when frames came back with the right "
                                        "MACs and both processes ended cleanly; 1 otherwise "
                                        "(a process failed, reported an error or lost mbufs); "
                                        "2 for a usage error.  See docs/failures.md.")
    ap.add_argument("--mode", choices=MODES, default="l2fwd")
    ap.add_argument("--seconds", type=cli_number(float, 0.1, 3600), default=6.0,
                    help="traffic duration (0.1 .. 3600)")
    ap.add_argument("--size", type=cli_number(int, MIN_PKT_LEN, 2048), default=64,
                    help=f"frame size in bytes ({MIN_PKT_LEN} .. 2048)")
    a = ap.parse_args(argv)
    print(f"pktbuf memif demo: {a.mode}, {a.size}-byte frames, {a.seconds:g} s "
          f"(compiling on first run)...", flush=True)
    try:
        ensure_compiled(["demo"], "pktbuf demo")   # a first run: every core compiles
    except CompileFailed as e:
        print(f"pktbuf demo: {e}", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="pktbuf-demo-")
    tag = f"pktbuf-demo-{os.getpid()}"
    common = ["--sock0", f"/{tag}-0", "--sock1", f"/{tag}-1", "--mode", a.mode]
    py = [sys.executable, "-c", "import sys, importlib; "
          "m = importlib.import_module('pktbuf.apps.' + sys.argv[1]); "
          "sys.exit(getattr(m, sys.argv[2])(sys.argv[3:]))"]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    procs = []
    errors: list[dict] = []
    last: dict[str, dict] = {}
    prev: dict[str, dict] = {}
    try:
        fwd = subprocess.Popen(py + ["forwarder", "forwarder_main"] + common
                               + ["--seconds", str(a.seconds + 1)],
                               stdout=subprocess.PIPE, text=True, env=env, cwd=tmp)
        procs.append(fwd)
        # the traffic process starts beside it (both load their code at once, on 2 cores);
        # its memif clients retry until the forwarder's sockets listen
        gen = subprocess.Popen(py + ["traffic", "traffic_main"] + common
                               + ["--seconds", str(a.seconds), "--size", str(a.size)],
                               stdout=subprocess.PIPE, text=True, env=env, cwd=tmp)
        procs.append(gen)
        if fwd.stdout.readline().strip() != "READY":
            print("forwarder failed to start", file=sys.stderr)
            return 1
        print(f"{'time':>6} | {'generated':>10} {'received':>10} {'Gbit/s':>7} | "
              f"{'fwd rx':>10} {'fwd tx':>10} {'fwd drops':>9}", flush=True)
        import selectors
        sel = selectors.DefaultSelector()
        for p, role in ((fwd, "fwd"), (gen, "traffic")):
            sel.register(p.stdout, selectors.EVENT_READ, role)
        open_streams = 2
        deadline = time.monotonic() + a.seconds + 60
        next_print = time.monotonic() + 1.0
        while open_streams and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.2):
                line = key.fileobj.readline()
                if not line:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if "error" in rec:
                    print(f"{rec['role']}: {rec['error']}", file=sys.stderr)
                    errors.append(rec)
                    continue
                last[rec["role"]] = rec
            if (time.monotonic() >= next_print and "traffic" in last
                    and last["traffic"]["t"] > prev.get("traffic", {}).get("t", 0.0)):
                next_print += 1.0
                g, f = last["traffic"], last.get("fwd", {})
                pg, pf = prev.get("traffic", {}), prev.get("fwd", {})

                def rate(cur, old, k):      # per second over that process's own interval
                    dt = max(1e-3, cur.get("t", 0.0) - old.get("t", 0.0))
                    return (cur.get(k, 0) - old.get(k, 0)) / dt
                drops = f.get("drops", 0) - pf.get("drops", 0)
                print(f"{g['t']:5.1f}s | {_fmt_rate(rate(g, pg, 'tx'))}pps "
                      f"{_fmt_rate(rate(g, pg, 'rx'))}pps "
                      f"{rate(g, pg, 'bytes') * 8 / 1e9:7.2f} | {_fmt_rate(rate(f, pf, 'rx'))}pps "
                      f"{_fmt_rate(rate(f, pf, 'tx'))}pps {drops:9d}", flush=True)
                prev = {k: dict(v) for k, v in last.items()}
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    g, f = last.get("traffic"), last.get("fwd")
    if not g or not f:
        print("demo failed: a process reported nothing", file=sys.stderr)
        return 1
    secs = max(1e-3, g["t"])
    rows = [("generated (sent into port 0)", g["tx"], g["tx"] / secs),
            ("not taken by the ring (freed)", g["drops"], None),
            ("forwarder received", f["rx"], f["rx"] / secs),
            ("forwarder sent", f["tx"], f["tx"] / secs),
            ("forwarder drops (Tx ring full)", f["drops"], None),
            ("received back" + (" on port 1" if a.mode == "l2fwd" else ""), g["rx"],
             g["rx"] / secs),
            ("received with wrong MACs", g["bad"], None)]
    print(f"\nsummary ({a.mode}, {a.size} B frames, {secs:.1f} s)")
    print(f"  {'counter':<34} {'packets':>12} {'pps':>12}")
    for name, n, pps in rows:
        print(f"  {name:<34} {n:>12,} {('%.2f M' % (pps / 1e6)) if pps is not None else '':>12}")
    ok = g["rx"] > 0 and g["bad"] == 0 and not errors and all(p.returncode == 0 for p in procs)
    print(f"  {'throughput':<34} {g['bytes'] * 8 / secs / 1e9:>11.2f} Gbit/s received")
    print("result:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
