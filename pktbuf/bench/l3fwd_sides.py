"""The two forwarders ``pktbuf bench l3fwd`` compares, started, stopped and read the same way:
``pktbuf l3fwd`` (:class:`L3fwdSide` ``"pktbuf"``) and DPDK 22.11's l3fwd built with
``offloads.patch`` and ``cycles.patch`` (``"dpdk"``, :mod:`.l3fwd_ref.build`).

Both get the same ports (``--vdev``), the same l3fwd options (``-p 0x3 --config
"(0,0,1),(1,0,1)" --parse-ptype --lookup MODE``: one forwarding lcore polling both ports, the
default routes), run their lcore on CPU 1 (EAL's ``-l 1`` for both: the forwarding thread
pinned there, the control threads -- memif's socket loop, DPDK's interrupt thread -- on the
other CPUs, :mod:`pktbuf.apps.l3fwd.placement`), busy-poll
(pktbuf: ``--no-idle-backoff``) and print at SIGINT the same line, ``L3FWD: busy cycles=C
packets=N tsc_hz=H`` (pktbuf: ``--record-core-cycles``), and the sums so far on SIGUSR1:
:meth:`L3fwdSide.snapshot` asks for one, so one process serves a probe, a fixed-load run and
a rate search, each figure the difference of two snapshots.  A side is ready when it printed
``entering main loop``.  Each runs under ``timeout`` (a crashed benchmark leaves no poller
behind); the signals go to the forwarder itself, ``timeout``'s child.  :meth:`L3fwdSide.pause`
and :meth:`L3fwdSide.resume` hold a running forwarder with SIGSTOP / SIGCONT, so that two can
be up at once on the one forwarding CPU while only one of them runs (the interleaved loss-free
search, :mod:`.l3fwd_search`); ``timeout`` waits for its child's exit only, a stop does not
end it.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

FWD_CPU = 1
CYCLES = re.compile(r"L3FWD: busy cycles=(\d+) packets=(\d+) tsc_hz=(\d+)")
APP_ARGS = ["-p", "0x3", "--config", "(0,0,1),(1,0,1)", "--parse-ptype"]


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dpdk_exe():
    """The cycle-counting reference binary, or the reason it is not there (a string)."""
    from .dpdk_ref import DpdkFailed, DpdkMissing
    from .l3fwd_ref.build import build
    try:
        return build(cycles=True)
    except (DpdkMissing, DpdkFailed) as e:
        return str(e)


def _state(pid: int):
    """The process state letter of /proc/PID/stat (``T``: stopped), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


class L3fwdSide:
    """One forwarder run: ``who`` ``"pktbuf"`` or ``"dpdk"``, ``vdevs`` its ports, ``lookup``
    ``lpm`` or ``em``; ``netns``: run inside that namespace (``bpffs``: mount the BPF
    filesystem there first, for ``net_af_xdp``)."""

    def __init__(self, who: str, vdevs, lookup: str, *, netns: str | None = None,
                 bpffs: bool = False, lifetime: int = 900, exe=None):
        self.who, self.status, self.reason = who, "ok", ""
        app = APP_ARGS + ["--lookup", lookup]
        vd = [x for v in vdevs for x in ("--vdev", v)]
        pre = ["ip", "netns", "exec", netns] if netns else []
        if netns and bpffs:
            pre += ["sh", "-c", ("mountpoint -q /sys/fs/bpf || mount -t bpf bpf "
                                 '/sys/fs/bpf; exec "$@"'), "sh"]
        pre += ["timeout", "--kill-after=5", str(lifetime)]
        if who == "pktbuf":
            # -P: no working directory on sys.path, so the pktbuf that runs is the one of
            # PYTHONPATH (this tree), not a checkout the benchmark happens to be started in
            self.argv = pre + [sys.executable, "-P", "-m", "pktbuf.apps.l3fwd", "-l",
                               str(FWD_CPU)] + vd + ["--"] + app + \
                ["--record-core-cycles", "--no-idle-backoff"]
        else:
            prefix = f"pbl3b-{os.getpid()}-{time.monotonic_ns() % 10**9}"
            mem = 2048 if lookup == "em" else 512
            self.argv = pre + [str(exe), "--no-huge", "-m", str(mem), "--no-pci",
                               "--no-shconf", "--no-telemetry", f"--file-prefix={prefix}",
                               "-l", str(FWD_CPU), "--log-level=lib.eal:warning"] + vd + \
                ["--"] + app
        self.proc = None
        self.out = None         # the output file's path
        self.paused = False

    @property
    def pid(self):
        return self.proc.pid

    def _text(self) -> str:
        # read through a descriptor of our own: the child's is opened O_APPEND, so our reads
        # never move the offset it writes at (an inherited descriptor would share it)
        try:
            with open(self.out, errors="replace") as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def start(self, timeout: float = 900.0) -> bool:
        env = dict(os.environ)
        env["PYTHONPATH"] = _root() + os.pathsep + env.get("PYTHONPATH", "")
        fd, self.out = tempfile.mkstemp(prefix="pktbuf-l3b-", suffix=".log")
        os.close(fd)
        with open(self.out, "ab") as w:
            self.proc = subprocess.Popen(self.argv, stdout=w, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if "entering main loop" in self._text():
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.status = "failed"
        self.reason = (f"{self.who} l3fwd did not start (exit {self.proc.poll()}): "
                       + self._text()[-600:].strip())
        self._kill()
        return False

    def _target(self) -> int:
        """The forwarder's pid: ``timeout``'s only child (``ip netns exec`` and ``sh -c exec``
        exec in place)."""
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                kids = f.read().split()
        except OSError:
            kids = []
        return int(kids[0]) if kids else self.proc.pid

    def pause(self, timeout: float = 2.0) -> bool:
        """SIGSTOP the forwarder (every thread of it) and wait until it is stopped, so that it
        takes no CPU time until :meth:`resume`; False if it did not stop (or is gone)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        pid = self._target()
        os.kill(pid, signal.SIGSTOP)
        self.paused = True
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = _state(pid)
            if st is None or st in "Tt":
                return st is not None
            time.sleep(0.002)
        return False

    def resume(self) -> None:
        """SIGCONT what :meth:`pause` stopped."""
        if self.paused and self.proc is not None and self.proc.poll() is None:
            os.kill(self._target(), signal.SIGCONT)
        self.paused = False

    def _lines(self) -> list:
        return CYCLES.findall(self._text())

    def snapshot(self, timeout: float = 10.0) -> dict | None:
        """The sums so far (SIGUSR1, then the new line), or None when no line came."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        n = len(self._lines())
        os.kill(self._target(), signal.SIGUSR1)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = self._lines()
            if len(got) > n:
                cyc, pk, hz = (int(x) for x in got[-1])
                return {"busy_cycles": cyc, "packets": pk, "tsc_hz": hz}
            time.sleep(0.02)
        return None

    def stop(self, grace: float = 15.0) -> dict:
        """SIGINT (a user's Ctrl-C), then the cycle line: ``{"busy_cycles", "packets",
        "cycles_per_packet", "tsc_hz"}``.  DPDK 22.11 may hang in EAL cleanup after printing
        it: killed then, the line is still good."""
        self.resume()
        if self.proc is None or self.proc.poll() is not None:
            self.status, self.reason = "failed", f"{self.who} l3fwd exited early: " + \
                (self._text()[-600:].strip() if self.out else "")
            return {}
        os.kill(self._target(), signal.SIGINT)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self._kill()
        got = self._lines()
        if not got:
            self.status, self.reason = "failed", f"{self.who} l3fwd printed no cycle " \
                "line: " + self._text()[-600:].strip()
            return {}
        cyc, pk, hz = (int(x) for x in got[-1])
        return {"busy_cycles": cyc, "packets": pk, "tsc_hz": hz,
                "cycles_per_packet": cyc / pk if pk else None}

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                    if self.paused:         # a stopped process acts on SIGTERM once continued
                        os.killpg(self.proc.pid, signal.SIGCONT)
                    self.proc.wait(10)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue

    def close(self) -> None:
        """Kill what is left of the process and drop its output."""
        self._kill()
        if self.out is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.out)
            self.out = None

