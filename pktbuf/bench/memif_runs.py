"""One memif measurement each: a loopback pair in this process, a pair of pktbuf processes, a
pair of testpmd processes.

The two-process runs follow one :class:`Schedule` whatever the implementation: traffic starts,
``warmup`` seconds pass, then ``samples`` intervals of ``interval`` seconds are measured at the
receiver -- each sample is the packets the receiver counted in its interval divided by the
interval's length as the receiver timed it (pktbuf: its ``CLOCK_MONOTONIC``; testpmd: the
``Rx-pps`` of ``show port stats``, timed by its TSC).  Every sample counts, zeros included, on
both sides; a run's figure is the median of its samples.  The sender and the receiver run on
CPUs 0 and 1 (testpmd: their forwarding lcores), with pools of 8192 mbufs, bursts of 32, rings
of 1024 slots of 2048 bytes on both sides.

Each run also records how much it was disturbed: ``waited``, the largest share of the measured
time one of its polling threads (sender's or receiver's) was runnable but waiting for a CPU
(:class:`Interference`, from the scheduler's own accounting), and ``foreign``, the CPUs' worth
other processes used (:class:`ForeignLoad`).

A testpmd pair that cannot run is reported as such: ``status`` is ``"not available"`` only when
``dpdk-testpmd`` is not installed, and ``"failed"`` (with the reason and the log's tail) when it
is installed but did not start, connect or answer.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from ..errors import cli_number
from ..apps.counters import CNT_DROPS, CNT_RX, CNT_TX, counters
from ..apps.txonly import udp_headers
from .memif_loops import echo_loop, loopback_loop, pingpong_loop, sender_loop, sink_loop

POOL_MBUFS = 8192          # testpmd --total-num-mbufs
POOL_CACHE = 256           # testpmd's default mempool cache is 250
PINGPONG_WINDOW = 512      # packets a round-trip client keeps in flight
SRC_MAC = bytes([2, 0, 0, 0, 0, 0x10])
DST_MAC = bytes([2, 0, 0, 0, 0, 0x20])


@dataclass
class Schedule:
    """When a two-process run measures: after ``warmup`` s, ``samples`` x ``interval`` s."""
    warmup: float = 1.0
    samples: int = 6
    interval: float = 0.5

    @property
    def seconds(self) -> float:
        return self.warmup + self.samples * self.interval


@dataclass
class PairResult:
    """A two-process run: ``pps`` per sample interval at the receiver, and what happened."""
    status: str = "ok"                  # "ok" | "failed" | "not available"
    reason: str = ""
    pps: list = field(default_factory=list)
    sent: int = 0                       # sender: packets the ring took
    received: int = 0                   # receiver: packets counted (after the sender drained)
    dropped: int = 0                    # sender: packets the ring did not take
    foreign: float = 0.0                # CPUs' worth used by other processes while measuring
    waited: float = 0.0                 # share of the time a polling thread waited for a CPU
    log: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def mpps(self) -> float | None:
        """Median of the samples, in Mpps (None if the run did not measure)."""
        return statistics.median(self.pps) / 1e6 if self.ok and self.pps else None

    @property
    def zero_samples(self) -> int:
        return sum(1 for x in self.pps if x == 0)


# -- CPU accounting: how much did *other* processes use while we measured? --------------------
def _busy_jiffies() -> int:
    with open("/proc/stat") as f:
        v = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in v[:8])
    return user + nice + system + irq + softirq + steal


def _tree_pids(pids) -> set:
    """The given processes and all their descendants."""
    seen = set()
    stack = list(pids)
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass
    return seen


def _jiffies(pid: int) -> int:
    """utime + stime of a process (all its threads; 0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return 0


class ForeignLoad:
    """CPUs' worth of time used by processes other than ``pids`` and their descendants (each
    counted once) between :meth:`start` and :meth:`stop`."""

    def start(self, pids) -> None:
        self.pids = list(pids)
        self._t = time.monotonic()
        self._b = _busy_jiffies()
        self._own = {p: _jiffies(p) for p in _tree_pids(self.pids)}

    def stop(self) -> float:
        dt = max(1e-3, time.monotonic() - self._t)
        now = {p: _jiffies(p) for p in _tree_pids(self.pids)}
        own = sum(now[p] - self._own.get(p, 0) for p in now)
        hz = os.sysconf("SC_CLK_TCK")
        return max(0.0, (_busy_jiffies() - self._b - own) / hz / dt)


def _schedstat(pids) -> dict:
    """``{(pid, tid): (ns on a CPU, ns runnable but waiting for one)}`` of every thread of the
    processes and their descendants (/proc/<pid>/task/<tid>/schedstat)."""
    out = {}
    for p in _tree_pids(pids):
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    run, wait = f.read().split()[:2]
                out[(p, int(t))] = (int(run), int(wait))
        except (OSError, ValueError):
            pass
    return out


class Interference:
    """How much the polling threads of a run were kept from their CPU.

    For each of the given processes (sender, receiver), the thread that ran most between
    :meth:`start` and :meth:`stop` is its polling loop; :meth:`stop` returns the largest share
    of the interval such a thread spent runnable but waiting for a CPU (0: never disturbed).
    A thread that sleeps by itself (pktbuf's back-off) is not counted as disturbed, a busy one
    that is preempted is -- the same rule for pktbuf and testpmd.
    """

    def start(self, pids) -> None:
        self.pids = list(pids)
        self._t = time.monotonic_ns()
        self._s = [_schedstat([p]) for p in self.pids]

    def stop(self) -> float:
        dt = max(1, time.monotonic_ns() - self._t)
        worst = 0.0
        for p, before in zip(self.pids, self._s):
            now = _schedstat([p])
            deltas = [(run - before.get(k, (0, 0))[0], wait - before.get(k, (0, 0))[1])
                      for k, (run, wait) in now.items()]
            if deltas:
                worst = max(worst, max(deltas)[1] / dt)
        return worst


def _sleep_until(t: float) -> None:
    while True:
        d = t - time.monotonic()
        if d <= 0:
            return
        time.sleep(min(d, 0.05))


def _pin(cpu: int) -> None:
    if cpu >= 0:
        try:
            os.sched_setaffinity(0, {cpu % (os.cpu_count() or 1)})
        except OSError:
            pass


# -- loopback: one process, one thread ------------------------------------------------------------
class Loopback:
    """A connected pktbuf client/server pair in this process, for the one-thread figures."""

    _seq = 0

    def __init__(self, buffer_size=2048, force_general=False, zero_copy=False, log2=10, pool=None):
        from ..drivers.memif.api.memif import Memif
        from ..buf.domain.pools import PktmbufPool
        Loopback._seq += 1
        name = f"/pktbuf-bench-{os.getpid()}-{Loopback._seq}"
        self.pool = pool or PktmbufPool(16384, POOL_CACHE, name="bench-lo")
        self._own_pool = pool is None
        self.s = Memif.server(name, pool=self.pool, buffer_size=buffer_size,
                              force_general=force_general)
        self.c = Memif.client(name, pool=self.pool, buffer_size=buffer_size,
                              force_general=force_general, zero_copy=zero_copy,
                              ring_size_log2=log2)
        if not (self.c.wait_connected(10) and self.s.wait_connected(10)):
            raise RuntimeError(f"loopback did not connect: {self.c.disconnect_reason}")
        self.run(64, 10)          # compile / load before anything is timed

    def run(self, size, iters, direction="c2s") -> int:
        """Packets received in ``iters`` bursts of 32 ``size``-byte packets."""
        tx, rx = (self.c, self.s) if direction == "c2s" else (self.s, self.c)
        return loopback_loop(self.pool.domain.state, self.pool.id, 0, tx.tx_queue(0),
                             rx.rx_queue(0), udp_headers(size, SRC_MAC, DST_MAC), size, iters)

    def ns_per_packet(self, size, iters=3000, repeat=5, direction="c2s") -> float:
        """Median over ``repeat`` runs of the ns per packet of ``iters`` bursts."""
        res = []
        hdr = udp_headers(size, SRC_MAC, DST_MAC)
        dom = self.pool.domain.state
        tx, rx = (self.c, self.s) if direction == "c2s" else (self.s, self.c)
        for _ in range(repeat):
            t = time.perf_counter_ns()
            n = loopback_loop(dom, self.pool.id, 0, tx.tx_queue(0), rx.rx_queue(0), hdr, size,
                              iters)
            dt = time.perf_counter_ns() - t
            if n <= 0:
                raise RuntimeError("loopback moved no packets")
            res.append(dt / n)
        return statistics.median(res)

    def close(self) -> None:
        self.c.close()
        self.s.close()
        if self._own_pool:
            self.pool.close(force=True)


# -- two pktbuf processes -------------------------------------------------------------------------
def _child(argv) -> int:
    """One side of a two-process run (a child of :func:`pktbuf_pair`).

    Prints READY (server, listening), then a JSON line when connected, waits for
    ``GO <t0_ns> <end_ns>`` on stdin, runs its loop, and prints JSON lines: the receiving side
    one per sample boundary (t0, t0 + interval, ...), every side a final line of totals.
    """
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["sender", "sink", "echo", "pingpong"])
    ap.add_argument("sock")
    ap.add_argument("--size", type=cli_number(int, 42, 65535), default=64)
    ap.add_argument("--bsize", type=cli_number(int, 1, 65535), default=2048)
    ap.add_argument("--general", action="store_true")
    ap.add_argument("--zc", action="store_true")
    ap.add_argument("--cpu", type=cli_number(int, -1, 4095), default=-1)
    ap.add_argument("--samples", type=cli_number(int, 1, 10**6), default=6)
    ap.add_argument("--interval", type=cli_number(float, 0.001, 3600), default=0.5)
    a = ap.parse_args(argv)
    _pin(a.cpu)
    from ..drivers.memif.api.memif import Memif
    from ..buf.domain.pools import PktmbufPool
    from ..drivers.memif import layout as L
    pool = PktmbufPool(POOL_MBUFS, POOL_CACHE, name=a.role)
    kw = dict(pool=pool, buffer_size=a.bsize, force_general=a.general)
    client = a.role in ("sender", "pingpong")
    m = Memif.client(a.sock, zero_copy=a.zc, **kw) if client else Memif.server(a.sock, **kw)

    def say(**rec):
        print(json.dumps(rec), flush=True)

    if not client:
        print("READY", flush=True)
    if not m.wait_connected(60):
        say(error=f"not connected: {m.disconnect_reason}")
        return 1
    say(event="connected")
    go = sys.stdin.readline().split()
    if len(go) != 3 or go[0] != "GO":
        say(error="no GO")
        return 1
    t0, end = int(go[1]), int(go[2])
    step = int(a.interval * 1e9)
    dom = pool.domain.state
    cnt = counters()
    hdr = udp_headers(a.size, SRC_MAC, DST_MAC)
    rxq = m.rx_queue(0)
    txq = m.tx_queue(0)
    if a.role == "sender":
        sender_loop(dom, pool.id, 0, txq, hdr, a.size, end + step, cnt)
        # every packet the ring took must reach the sink: wait until it consumed them all
        off = [o for c2s, _, o in m.device.ring_offsets if c2s][0]
        hdr_view = L.ring_header_view(m.device.regions[0].array, off)
        deadline = time.monotonic() + 10
        while int(hdr_view["tail"]) != int(hdr_view["head"]) and time.monotonic() < deadline:
            time.sleep(0.001)
        drained = int(hdr_view["tail"]) == int(hdr_view["head"])
        say(final=True, tx=int(cnt[CNT_TX]), drops=int(cnt[CNT_DROPS]), drained=drained)
    elif a.role in ("sink", "pingpong"):
        def run_until(dl, drain=False):
            if a.role == "sink":
                sink_loop(dom, 0, rxq, dl, drain, cnt)
            else:
                pingpong_loop(dom, pool.id, 0, txq, rxq, hdr, a.size, PINGPONG_WINDOW, dl, drain,
                              cnt)
        for k in range(a.samples + 1):
            run_until(t0 + k * step)
            say(t=time.monotonic_ns() / 1e9, rx=int(cnt[CNT_RX]))
        if a.role == "sink":      # until the sender has drained the ring and gone
            run_until(time.monotonic_ns() + int(60e9), True)
        else:                     # until every packet in flight is back
            run_until(time.monotonic_ns() + int(10e9), True)
        say(final=True, rx=int(cnt[CNT_RX]), tx=int(cnt[CNT_TX]), drops=int(cnt[CNT_DROPS]))
    else:                         # echo: until the client has gone
        echo_loop(dom, 0, rxq, txq, time.monotonic_ns() + int(120e9), True, cnt)
        say(final=True, rx=int(cnt[CNT_RX]), tx=int(cnt[CNT_TX]), drops=int(cnt[CNT_DROPS]))
    m.close()
    return 0


def _sample_rates(lines) -> list:
    """pps of each interval between consecutive sample lines ``{"t", "rx"}``."""
    recs = [r for r in lines if "t" in r and "rx" in r]
    return [(b["rx"] - a["rx"]) / (b["t"] - a["t"]) for a, b in zip(recs, recs[1:])]


def _json_lines(text: str) -> list:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def _readline(p, timeout: float) -> str:
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            return ""
        return p.stdout.readline()
    finally:
        sel.close()


def pktbuf_pair(case: str, size: int = 64, sched: Schedule | None = None, *, bsize: int = 2048,
                general: bool = False, zc: bool = False) -> PairResult:
    """Two pktbuf processes over memif: ``"oneway"`` (sender client on CPU 0 -> sink server on
    CPU 1) or ``"roundtrip"`` (pingpong client <-> echo server; packets back at the client)."""
    sched = sched or Schedule()
    sock = f"/pktbuf-bench-{os.getpid()}-{case}-{time.monotonic_ns()}"
    py = [sys.executable, "-c", "import sys; from pktbuf.bench import memif_runs as R; "
          "sys.exit(R._child(sys.argv[1:]))"]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    common = ["--size", str(size), "--bsize", str(bsize), "--samples", str(sched.samples),
              "--interval", str(sched.interval)] + (["--general"] if general else [])
    srole, crole = ("sink", "sender") if case == "oneway" else ("echo", "pingpong")
    res = PairResult()
    procs = []
    try:
        srv = subprocess.Popen(py + [srole, sock] + common + ["--cpu", "1"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env)
        procs.append(srv)
        if _readline(srv, 120).strip() != "READY":
            return PairResult("failed", "pktbuf server did not start")
        cli = subprocess.Popen(py + [crole, sock] + common + ["--cpu", "0"]
                               + (["--zc"] if zc else []), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env)
        procs.append(cli)
        for p in (srv, cli):
            line = _readline(p, 120)
            if '"connected"' not in line:
                return PairResult("failed", f"pktbuf pair did not connect: {line.strip()}")
        t0 = time.monotonic() + sched.warmup
        end = t0 + sched.samples * sched.interval
        for p in (srv, cli):
            p.stdin.write(f"GO {int(t0 * 1e9)} {int(end * 1e9)}\n")
            p.stdin.flush()
        fl, intf = ForeignLoad(), Interference()
        _sleep_until(t0)
        fl.start([srv.pid, cli.pid, os.getpid()])
        intf.start([cli.pid, srv.pid])
        _sleep_until(end)
        res.waited = intf.stop()
        res.foreign = fl.stop()
        cout, _ = cli.communicate(timeout=sched.seconds + 120)
        sout, _ = srv.communicate(timeout=120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    srecs, crecs = _json_lines(sout), _json_lines(cout)
    recv = srecs if case == "oneway" else crecs
    res.pps = _sample_rates(recv)
    sfin = [r for r in srecs if r.get("final")]
    cfin = [r for r in crecs if r.get("final")]
    if len(res.pps) != sched.samples or not sfin or not cfin:
        return PairResult("failed", f"incomplete output: {sout[-500:]!r} {cout[-500:]!r}")
    if case == "oneway":
        res.sent, res.received, res.dropped = cfin[0]["tx"], sfin[0]["rx"], cfin[0]["drops"]
    else:
        res.sent, res.received, res.dropped = cfin[0]["tx"], cfin[0]["rx"], cfin[0]["drops"]
    return res


# -- two testpmd processes ------------------------------------------------------------------------
def testpmd_pair(size: int = 64, sched: Schedule | None = None) -> PairResult:
    """testpmd ``txonly`` (client, forwarding lcore on CPU 0) -> testpmd ``rxonly`` (server,
    forwarding lcore on CPU 1) over memif, on the same schedule as :func:`pktbuf_pair`."""
    from ..apps import testpmd as T
    sched = sched or Schedule()
    if not T.available():
        return PairResult("not available", "dpdk-testpmd is not installed")
    sock = f"/pktbuf-bench-tp-{os.getpid()}-{time.monotonic_ns()}"
    life = int(sched.seconds) + 120
    common = dict(mbufs=POOL_MBUFS, lifetime=life)
    srv = T.Testpmd("server", sock, fwd="rxonly", lcores=["-l", "0-1"], **common)
    cli = T.Testpmd("client", sock, fwd="txonly", lcores=["--lcores=0@1,1@0"],
                    app_extra=[f"--txpkts={size}"], **common)
    res = PairResult()

    def failed(why: str) -> PairResult:
        return PairResult("failed", why, log=("server:\n" + srv.log()[-1500:] + "\nclient:\n"
                                              + cli.log()[-1500:]))
    try:
        srv.start()
        if not srv.wait_listening(60):
            return failed("testpmd server did not start listening")
        srv.cmd("start")
        cli.start()
        if not cli.wait_log(r"memif_connect\(\): Connected", 60):
            return failed("testpmd client did not connect")
        cli.cmd("start")
        t0 = time.monotonic() + sched.warmup
        fl, intf = ForeignLoad(), Interference()
        _sleep_until(t0)
        fl.start([srv.pid, cli.pid, os.getpid()])
        intf.start([cli.pid, srv.pid])
        if not srv.port_stats():                 # arms testpmd's "since the last call"
            return failed("show port stats did not answer")
        for k in range(1, sched.samples + 1):
            _sleep_until(t0 + k * sched.interval)
            st = srv.port_stats()
            if "rx_pps" not in st:
                return failed("show port stats did not answer")
            res.pps.append(float(st["rx_pps"]))
        res.waited = intf.stop()
        res.foreign = fl.stop()
        cs = cli.port_stats()
        cli.stop_forwarding()
        srv.stop_forwarding()
        ss = srv.port_stats()
        res.sent = cs.get("tx_packets", 0)
        res.received = ss.get("rx_packets", 0)
        return res
    finally:
        cli.cleanup()
        srv.cleanup()
