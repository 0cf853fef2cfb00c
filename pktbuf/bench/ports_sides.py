"""The two sides the AF_PACKET and AF_XDP sections of ``pktbuf bench ports`` compare, each
in the benchmark's network namespace, pinned to CPU 1, driven the same way (start, offer the
load, stop, read the busy cycles): ``pktbuf fwd`` (:class:`PktbufSide`) and an interactive
``dpdk-testpmd`` (:class:`TestpmdSide`).  Both run with ``--record-core-cycles``; see
docs/bench.md for the method.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

from . import ports_gen as G

FWD_CPU = 1
GEN_CPU = 0
CYCLES_RX = re.compile(r"CPU cycles/packet=([\d.]+) \((?:total|busy) cycles=(\d+) / total "
                       r"(\S+) packets=(\d+)\) at (\d+) MHz")
ACC_RX = re.compile(r"Accumulated forward statistics.*?RX-packets:\s+(\d+)\s+RX-dropped:\s+(\d+)"
                    r".*?TX-packets:\s+(\d+)\s+TX-dropped:\s+(\d+)", re.S)


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def warm() -> None:
    """Compile (or load) the generator and ``pktbuf fwd``'s loop here, before any child
    process loads them (several processes compiling one cached function at once can corrupt
    Numba's cache)."""
    from ..apps.fwd.forwarder import Forwarder
    G.warm()
    for mode in ("rxonly", "io"):
        fw = Forwarder(["net_ring0"], mode, record_cycles=True)
        try:
            fw.warm()
        finally:
            fw.close()


# -- the receivers / forwarders on CPU 1 --------------------------------------------------------
class PktbufSide:
    """``pktbuf fwd`` in the namespace, pinned to CPU 1, JSON output, stopped by SIGTERM."""

    name = "pktbuf"

    def __init__(self, ns: G.Netns, ifaces, mode: str, lifetime: int = 900, nice: int = 0,
                 driver: str = "net_af_packet", devargs: str = ""):
        vdevs = []
        for i, f in enumerate(ifaces):
            vdevs += ["--vdev", f"{driver}{i},iface={f}{devargs}"]
        self.argv = ns.exec_argv(_nice(nice) + ["timeout", "--kill-after=5", str(lifetime),
                                                "taskset", "-c",
                                  str(FWD_CPU), sys.executable, "-m", "pktbuf.cli", "fwd"]
                                 + vdevs + ["--forward-mode", mode, "--record-core-cycles",
                                            "--json", "--no-telemetry"]
                                 + (["--no-idle-backoff"] if BUSY_POLL["value"] else []))
        self.proc = None
        self.started: dict = {}
        self.status = "ok"
        self.reason = ""

    def start(self) -> bool:
        env = dict(os.environ)
        env["PYTHONPATH"] = _root() + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, start_new_session=True)
        line = _readline(self.proc, 180)
        if '"event": "start"' not in line:
            self.status, self.reason = "failed", f"pktbuf fwd did not start: {line.strip()}"
            self.close()
            return False
        self.started = json.loads(line)
        return True

    @property
    def pid(self):
        return self.proc.pid

    def stop(self) -> dict:
        """SIGTERM, then the summary: ``{"packets", "busy_cycles", "cycles_per_packet", "rx",
        "tx", "tx_dropped", "rx_missed"}`` (rx/tx: over every port)."""
        if self.proc is None or self.proc.poll() is not None:
            self.status, self.reason = "failed", "pktbuf fwd exited early"
            return {}
        os.kill(self.proc.pid, signal.SIGTERM)      # timeout(1) passes it to pktbuf fwd
        try:
            out, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.close()
            self.status, self.reason = "failed", "pktbuf fwd did not stop"
            return {}
        summ = [json.loads(x) for x in out.splitlines() if x.startswith('{"event": "summary"')]
        if not summ or not summ[0].get("core_cycles"):
            self.status, self.reason = "failed", f"no summary: {err[-500:]}"
            return {}
        s = summ[0]
        cc, acc = s["core_cycles"], s["accumulated"]
        return {"packets": cc["packets"], "busy_cycles": cc["busy_cycles"],
                "cycles_per_packet": cc["cycles_per_packet"], "rx": acc["rx"], "tx": acc["tx"],
                "tx_dropped": acc["tx_dropped"], "rx_missed": acc["rx_dropped"],
                "mbufs_in_use_at_close": s["mbufs_in_use_at_close"], "tsc_hz": cc["tsc_hz"],
                "idle_backoff": self.started.get("idle_backoff")}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                    self.proc.wait(10)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue


class TestpmdSide:
    """Interactive ``dpdk-testpmd`` with ``net_af_packet`` ports in the namespace, forwarding
    lcore on CPU 1, ``--record-core-cycles``; ``stop`` prints what we parse."""

    name = "testpmd"

    def __init__(self, ns: G.Netns, ifaces, mode: str, lifetime: int = 900, nice: int = 0,
                 driver: str = "net_af_packet"):
        from ..apps import testpmd as T
        self.tp = T.Testpmd(vdevs=[f"{driver}{i},iface={f}" for i, f in enumerate(ifaces)],
                            fwd=mode, lcores=[f"--lcores=0@{GEN_CPU},1@{FWD_CPU}"],
                            eal_extra=["--no-telemetry"], app_extra=["--record-core-cycles"],
                            netns=ns.name, mbufs=16384, lifetime=lifetime,
                            bpffs=driver == "net_af_xdp")
        at = len(ns.exec_argv([]))
        self.tp.argv[at:at] = _nice(nice)
        self.status = "ok"
        self.reason = ""

    def start(self) -> bool:
        self.tp.start()
        if not self.tp.wait_log(r"testpmd> ", 60):
            self.status, self.reason = "failed", "testpmd did not start"
            return False
        mark = len(self.tp.log())
        self.tp.cmd("start")
        if not self.tp.wait_log(r"packet forwarding - ports=", 20, since=mark):
            self.status, self.reason = "failed", "testpmd did not start forwarding"
            return False
        return True

    @property
    def pid(self):
        return self.tp.pid

    def stop(self) -> dict:
        mark = len(self.tp.log())
        self.tp.cmd("stop")
        if not self.tp.wait_log(r"Done\.", 20, since=mark):
            self.status, self.reason = "failed", "testpmd did not answer 'stop'"
            return {}
        text = self.tp.log()[mark:]
        a, c = ACC_RX.search(text), CYCLES_RX.search(text)
        if not a:
            self.status, self.reason = "failed", "no forward statistics in testpmd's output"
            return {}
        rx, rxd, tx, txd = (int(x) for x in a.groups())
        if not c:                 # testpmd prints no cycles line when it received nothing
            self.status, self.reason = "failed", f"no 'CPU cycles/packet' line (RX {rx})"
            return {}
        return {"packets": int(c.group(4)), "busy_cycles": int(c.group(2)),
                "cycles_per_packet": float(c.group(1)), "rx": rx, "tx": tx, "tx_dropped": txd,
                "rx_missed": rxd, "mhz": int(c.group(5))}

    def close(self) -> None:
        self.tp.cleanup()

    def log_tail(self) -> str:
        return self.tp.log()[-2000:]


def _readline(p, timeout: float) -> str:
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            if not sel.select(max(0.0, end - time.monotonic())):
                return ""
            line = p.stdout.readline()
            if not line:
                return ""
            if line.startswith("{"):
                return line
        return ""
    finally:
        sel.close()


NICE = {"value": 0}
BUSY_POLL = {"value": True}    # pktbuf's sides poll as testpmd does (pktbuf fwd --no-idle-backoff)


def _nice(n: int) -> list:
    return ["nice", "-n", str(n)] if n else []


COALESCE_US = 100          # the pktbuf_coalesced side's rx_coalesce_us


def _side(who, ns, ifaces, mode, driver="net_af_packet"):
    """``pktbuf`` and ``testpmd`` on ``driver``'s ports; ``pktbuf_af_packet``: pktbuf fwd on
    AF_PACKET ports (the AF_XDP sections' second reference); ``pktbuf_coalesced``: pktbuf
    fwd on ``driver``'s ports with ``rx_coalesce_us=COALESCE_US``."""
    if who == "pktbuf_af_packet":
        return PktbufSide(ns, ifaces, mode, nice=NICE["value"], driver="net_af_packet")
    if who == "pktbuf_coalesced":
        return PktbufSide(ns, ifaces, mode, nice=NICE["value"], driver=driver,
                          devargs=f",rx_coalesce_us={COALESCE_US}")
    return (PktbufSide if who == "pktbuf" else TestpmdSide)(ns, ifaces, mode,
                                                             nice=NICE["value"], driver=driver)


def _failed(side) -> dict:
    out = {"status": "failed", "reason": side.reason}
    if isinstance(side, TestpmdSide):
        out["log_tail"] = side.log_tail()
    return out
