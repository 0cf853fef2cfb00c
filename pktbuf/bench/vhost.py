"""``pktbuf bench vhost``: vhost-user figures as a table, pktbuf next to testpmd, in one run.

Three cases, each a pair of processes over one vhost-user socket, pktbuf's pair and testpmd's
run in interleaved rounds (the order alternates, so a slow phase of the machine hits both),
each run on the same schedule: ``--warmup`` seconds, then ``--samples`` one-second samples of
the receiving side's packet rate, whose median is the run's figure (pktbuf: the receiver's
``pktbuf fwd --json --stats-period 1`` counters; testpmd: its ``--stats-period 1`` Rx-pps):

* ``64 B one way`` / ``1500 B one way``: a ``txonly`` sender on ``net_virtio_user`` into an
  ``rxonly`` receiver on ``net_vhost`` -- pktbuf -> pktbuf against testpmd -> testpmd;
* ``vhost io``: the device side forwarding ``io`` (every frame sent back) with a testpmd
  ``net_virtio_user`` ``txonly`` peer -- pktbuf's ``net_vhost`` against testpmd's;
* (``--case fe64`` / ``fe1500``, for attribution, no target) the senders only: pktbuf's
  ``net_virtio_user`` and testpmd's, each into a testpmd ``net_vhost`` ``rxonly`` receiver;
  ``fe64p`` / ``fe1500p`` the same with packed rings (``packed_vq=1``) on both senders.

A round's ratio is pktbuf's figure over testpmd's; the table gives the median over rounds.
Figures taken on a machine shared with other work are noisy: say so when quoting them.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from ..errors import cli_number

TESTPMD = os.environ.get("PKTBUF_TESTPMD", "dpdk-testpmd")
CASES = {"64": ("64 B one way, virtio_user -> vhost", 64, "oneway", 1.3),
         "1500": ("1500 B one way, virtio_user -> vhost", 1500, "oneway", 1.0),
         "io": ("vhost io, testpmd virtio_user peer", 64, "io", 1.0),
         # attribution (no target): the same sender sides into one testpmd net_vhost rxonly
         "fe64": ("64 B virtio_user -> testpmd vhost", 64, "fe", None),
         "fe1500": ("1500 B virtio_user -> testpmd vhost", 1500, "fe", None),
         # the same with packed rings on both senders (packed_vq=1)
         "fe64p": ("64 B virtio_user packed -> testpmd vhost", 64, "fep", None),
         "fe1500p": ("1500 B virtio_user packed -> testpmd vhost", 1500, "fep", None)}
DEFAULT = ("64", "1500", "io")
_seq = 0


def _pktbuf_argv(vdev: str, mode: str, seconds: float, size: int, stats: bool) -> list:
    code = "import sys, pktbuf.cli as c; sys.exit(c.main(sys.argv[1:]))"
    argv = [sys.executable, "-c", code, "fwd", "--vdev", vdev, "--forward-mode", mode,
            "--seconds", f"{seconds:g}", "--no-telemetry", "--txpkts", str(size), "--json"]
    return argv + (["--stats-period", "1"] if stats else [])


def _testpmd_argv(vdev: str, mode: str, size: int, lcores: str) -> list:
    global _seq
    _seq += 1
    return [TESTPMD, "--lcores", lcores, "--no-huge", "-m", "512", "--no-pci",
            f"--file-prefix=pbvh{os.getpid()}_{_seq}", f"--vdev={vdev}", "--",
            f"--forward-mode={mode}", "--auto-start", "--stats-period", "1",
            "--total-num-mbufs=16384", f"--txpkts={size}"]


def _prefix(argv) -> str | None:
    for a in argv:
        if a.startswith("--file-prefix="):
            return a.split("=", 1)[1]
    return None


class _Proc:
    def __init__(self, argv, log):
        self.argv = argv
        self.log_path = log
        self._f = open(log, "wb")
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._f,
                                  stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self, timeout=15.0) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGINT)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(5)
        self._f.close()
        pre = _prefix(self.argv)
        if pre:
            shutil.rmtree(os.path.join("/var/run/dpdk", pre), ignore_errors=True)


def _wait_path(path, proc, timeout=60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.p.poll() is None:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return os.path.exists(path)


def _pktbuf_rates(text: str) -> list:
    """Per-second Rx rates from the receiver's ``stats`` events."""
    pts = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "stats":
            pts.append((ev["t"], ev["ports"][0]["ipackets"]))
    return [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(pts, pts[1:]) if b[0] > a[0]]


def _testpmd_rates(text: str) -> list:
    return [float(v) for v in re.findall(r"Rx-pps:\s+(\d+)", text)]


def _figure(rates: list, warmup: int, samples: int) -> float:
    r = rates[warmup:warmup + samples]
    return statistics.median(r) if r else 0.0


def run_case(kind: str, size: int, side: str, warmup: int, samples: int, work: str) -> float:
    """One run: the median Rx rate (packets per second) of the measured side."""
    sock = os.path.join(work, f"vh{os.getpid()}_{time.monotonic_ns()}.sock")
    span = warmup + samples + 1
    procs = []
    try:
        if side == "pktbuf" and kind == "oneway":
            rx = _Proc(_pktbuf_argv(f"net_vhost0,iface={sock}", "rxonly", span + 30, size, True),
                       os.path.join(work, "rx.log"))
            procs.append(rx)
            if not _wait_path(sock, rx):
                raise RuntimeError("pktbuf net_vhost did not listen: " + rx.text()[-500:])
            procs.append(_Proc(_pktbuf_argv(f"net_virtio_user0,path={sock}", "txonly",
                                            span + 30, size, False),
                               os.path.join(work, "tx.log")))
        elif side == "testpmd" and kind == "oneway":
            rx = _Proc(_testpmd_argv(f"net_vhost0,iface={sock},queues=1", "rxonly", size,
                                     "0@0,1@0"), os.path.join(work, "rx.log"))
            procs.append(rx)
            if not _wait_path(sock, rx):
                raise RuntimeError("testpmd net_vhost did not listen: " + rx.text()[-500:])
            time.sleep(1.0)
            procs.append(_Proc(_testpmd_argv(f"net_virtio_user0,path={sock},queues=1",
                                             "txonly", size, "0@1,1@1"),
                               os.path.join(work, "tx.log")))
        elif kind in ("fe", "fep"):  # the sender differs, the receiver is testpmd's vhost
            pv = ",packed_vq=1" if kind == "fep" else ""
            rx = _Proc(_testpmd_argv(f"net_vhost0,iface={sock},queues=1", "rxonly", size,
                                     "0@0,1@0"), os.path.join(work, "rx.log"))
            procs.append(rx)
            if not _wait_path(sock, rx):
                raise RuntimeError("testpmd net_vhost did not listen: " + rx.text()[-500:])
            time.sleep(1.0)
            argv = (_pktbuf_argv(f"net_virtio_user0,path={sock}{pv}", "txonly", span + 30,
                                 size, False) if side == "pktbuf" else
                    _testpmd_argv(f"net_virtio_user0,path={sock},queues=1{pv}", "txonly", size,
                                  "0@1,1@1"))
            procs.append(_Proc(argv, os.path.join(work, "tx.log")))
        else:                      # io: the measured side is the vhost device
            if side == "pktbuf":
                rx = _Proc(_pktbuf_argv(f"net_vhost0,iface={sock}", "io", span + 30, size, True),
                           os.path.join(work, "rx.log"))
            else:
                rx = _Proc(_testpmd_argv(f"net_vhost0,iface={sock},queues=1", "io", size,
                                         "0@0,1@0"), os.path.join(work, "rx.log"))
            procs.append(rx)
            if not _wait_path(sock, rx):
                raise RuntimeError("net_vhost did not listen: " + rx.text()[-500:])
            time.sleep(1.0)
            procs.append(_Proc(_testpmd_argv(f"net_virtio_user0,path={sock},queues=1",
                                             "txonly", size, "0@1,1@1"),
                               os.path.join(work, "tx.log")))
        parse = _pktbuf_rates if side == "pktbuf" and kind not in ("fe", "fep") \
            else _testpmd_rates
        end = time.monotonic() + 120
        while time.monotonic() < end and rx.p.poll() is None:
            rates = parse(rx.text())
            # count samples from the first non-zero one (the peer is up)
            first = next((i for i, r in enumerate(rates) if r > 0), None)
            if first is not None and len(rates) - first >= warmup + samples:
                return _figure(rates[first:], warmup, samples)
            time.sleep(0.2)
        raise RuntimeError(f"{side} {kind} {size} B: no rates ({rx.text()[-800:]})")
    finally:
        for p in reversed(procs):
            p.stop()
        if os.path.exists(sock):
            try:
                os.unlink(sock)
            except OSError:
                pass


def compare(rounds: int, warmup: int, samples: int, cases=tuple(CASES.values())) -> list:
    out = []
    with tempfile.TemporaryDirectory(prefix="pktbuf-bench-vhost-") as work:
        for name, size, kind, target in cases:
            ratios, pk, tp = [], [], []
            for r in range(rounds):
                order = ("pktbuf", "testpmd") if r % 2 == 0 else ("testpmd", "pktbuf")
                got = {s: run_case(kind, size, s, warmup, samples, work) for s in order}
                pk.append(got["pktbuf"])
                tp.append(got["testpmd"])
                ratios.append(got["pktbuf"] / got["testpmd"] if got["testpmd"] else 0.0)
            out.append({"case": name, "size": size, "pktbuf_mpps": statistics.median(pk) / 1e6,
                        "testpmd_mpps": statistics.median(tp) / 1e6,
                        "ratio": statistics.median(ratios), "ratios": ratios,
                        "target": target})
    return out


def main(argv=None) -> int:
    """pktbuf bench vhost: pktbuf's vhost-user ports against testpmd's, interleaved rounds."""
    ap = argparse.ArgumentParser(prog="pktbuf bench vhost", description=main.__doc__)
    ap.add_argument("--rounds", type=cli_number(int, 1, 1000), default=3)
    ap.add_argument("--samples", type=cli_number(int, 1, 3600), default=5,
                    help="one-second samples per run")
    ap.add_argument("--warmup", type=cli_number(int, 0, 3600), default=2,
                    help="one-second samples skipped first")
    ap.add_argument("--quick", action="store_true", help="one short round (CI smoke test)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--case", action="append", choices=list(CASES),
                    help="only this case (repeatable; default: all)")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds, a.samples, a.warmup = 1, 2, 1
    if shutil.which(TESTPMD) is None:
        print("pktbuf bench vhost: dpdk-testpmd is not installed", file=sys.stderr)
        return 2
    from ..apps.compile import ensure_compiled, fwd_unit_for
    ensure_compiled([fwd_unit_for(["net_vhost0"]), fwd_unit_for(["net_virtio_user0"])],
                    "pktbuf bench vhost")
    print(f"vhost benchmark: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"{a.rounds} interleaved round(s), each run {a.warmup} + {a.samples} one-second "
          "samples at the receiver, median", flush=True)
    try:
        rows = compare(a.rounds, a.warmup, a.samples,
                       tuple(CASES[c] for c in (a.case or DEFAULT)))
    except RuntimeError as e:
        print(f"pktbuf bench vhost: {e}", file=sys.stderr)
        return 1
    if a.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"  {'case':<40} {'pktbuf Mpps':>11} {'testpmd Mpps':>12} {'ratio':>6} {'target':>7}")
    for r in rows:
        t = r["target"]
        ok = "" if t is None else "met" if r["ratio"] >= t else "not met"
        print(f"  {r['case']:<40} {r['pktbuf_mpps']:>11.3f} {r['testpmd_mpps']:>12.3f} "
              f"{r['ratio']:>6.2f} {'-' if t is None else '>= ' + format(t, 'g'):>7} {ok}  "
              f"(rounds: {', '.join(f'{x:.2f}' for x in r['ratios'])})")
    return 0
