"""memif benchmarks: ``pktbuf bench memif`` (``main``) and the measurements asv uses.

Three kinds of figures, all loops running inside jitted code:

* **loopback** (one thread, one process): a jitted loop that allocates and fills a burst,
  ``tx_burst`` on a client queue, ``rx_burst`` on the server queue and frees the packets.
  ns per packet for the whole round; the least noisy way to compare copy paths, so the
  fast-path / general-path ratios come from here (interleaved runs, medians).
* **two processes** (the real use): a sender process (memif client) and a receiver process
  (memif server), each pinned to its own CPU, each running a jitted loop for a fixed time;
  pps = packets the receiver got per second (median over 0.5 s samples, first one dropped).
  Round trip: the client generates and sinks, the server echoes.
* **testpmd <-> testpmd** over memif in the same run, the reference line: testpmd txonly
  client -> rxonly server, forwarding lcores on different CPUs (as
  ``shared/tools/dpdk-reference/memif_peer.sh`` does), Rx-pps median from ``show port stats``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from .._jit import kernel
from ..mbuf.free import pktmbuf_free_bulk
from ..memif._sys import now_ns
from ..memif.datapath import memif_rx_burst, memif_tx_burst
from ..memif.demo import alloc_fill
from ..memif.poll import backoff_idle, backoff_new, backoff_reset
from ..rawmem import stack_i32

BURST = 32
S_RX, S_TX, S_FULL = 0, 1, 2

# memif buffer size per size relation, with the default 2048-byte mbuf data room
RELATIONS = {"eq": 2048, "lt": 1024, "gt": 4096}


# -- jitted loops ---------------------------------------------------------------------------------
@kernel
def loopback_loop(dom, pid, lcore, txq, rxq, frame, iters):
    """``iters`` rounds of: alloc+fill a burst, tx on ``txq``, rx on ``rxq``, free.  Returns
    the packets received (the caller divides the time by it)."""
    tx = stack_i32(32)
    rx = stack_i32(32)
    got = 0
    for _ in range(iters):
        if alloc_fill(dom, pid, lcore, tx, BURST, frame) != 0:
            return -1
        k = memif_tx_burst(dom, txq, lcore, tx, BURST)
        if k < BURST:
            pktmbuf_free_bulk(dom, lcore, tx[k:], BURST - k)
        r = memif_rx_burst(dom, rxq, lcore, rx, BURST)
        pktmbuf_free_bulk(dom, lcore, rx, r)
        got += r
    return got


@kernel
def sender_loop(dom, pid, lcore, txq, frame, deadline_ns, stats, boff):
    """Generate ``frame`` copies into ``txq``; what the ring does not take is dropped (freed
    and counted), as testpmd's txonly does -- a generator never waits on a full ring."""
    tx = stack_i32(32)
    while now_ns() < deadline_ns:
        if alloc_fill(dom, pid, lcore, tx, BURST, frame) != 0:
            backoff_idle(boff)
            continue
        k = memif_tx_burst(dom, txq, lcore, tx, BURST)
        stats[S_TX] += k
        if k < BURST:
            pktmbuf_free_bulk(dom, lcore, tx[k:], BURST - k)
            stats[S_FULL] += BURST - k
        if k == 0:
            backoff_idle(boff)
        else:
            backoff_reset(boff)


@kernel
def sink_loop(dom, lcore, rxq, deadline_ns, stats, boff):
    """Receive and free everything arriving on ``rxq``."""
    rx = stack_i32(32)
    while now_ns() < deadline_ns:
        r = memif_rx_burst(dom, rxq, lcore, rx, BURST)
        if r:
            pktmbuf_free_bulk(dom, lcore, rx, r)
            stats[S_RX] += r
            backoff_reset(boff)
        else:
            backoff_idle(boff)


@kernel
def echo_loop(dom, lcore, rxq, txq, deadline_ns, stats, boff):
    """Send back everything received (the far end of a round trip)."""
    pk = stack_i32(32)
    while now_ns() < deadline_ns:
        r = memif_rx_burst(dom, rxq, lcore, pk, BURST)
        if r == 0:
            backoff_idle(boff)
            continue
        backoff_reset(boff)
        k = memif_tx_burst(dom, txq, lcore, pk, r)
        if k < r:
            pktmbuf_free_bulk(dom, lcore, pk[k:], r - k)
        stats[S_RX] += r
        stats[S_TX] += k


@kernel
def pingpong_loop(dom, pid, lcore, txq, rxq, frame, window, deadline_ns, stats, boff):
    """Round trip: keep ``window`` packets in flight, count the ones that come back."""
    tx = stack_i32(32)
    rx = stack_i32(32)
    inflight = 0
    while now_ns() < deadline_ns:
        if inflight + BURST <= window and alloc_fill(dom, pid, lcore, tx, BURST, frame) == 0:
            k = memif_tx_burst(dom, txq, lcore, tx, BURST)
            if k < BURST:
                pktmbuf_free_bulk(dom, lcore, tx[k:], BURST - k)
            inflight += k
            stats[S_TX] += k
        r = memif_rx_burst(dom, rxq, lcore, rx, BURST)
        if r:
            pktmbuf_free_bulk(dom, lcore, rx, r)
            inflight -= r
            stats[S_RX] += r
            backoff_reset(boff)
        elif inflight + BURST > window:
            backoff_idle(boff)


# -- loopback (one process) -----------------------------------------------------------------------
def frame_of(size: int) -> np.ndarray:
    return (np.arange(size) & 0xFF).astype(np.uint8)


class Loopback:
    """A connected pktbuf client/server pair in this process, for the loopback figures."""

    _seq = 0

    def __init__(self, buffer_size=2048, force_general=False, zero_copy=False, log2=10, pool=None):
        from ..api.pools import PktmbufPool
        from ..api.memif import Memif
        Loopback._seq += 1
        name = f"/pktbuf-bench-{os.getpid()}-{Loopback._seq}"
        self.pool = pool or PktmbufPool(16384, 256, name="bench-lo")
        self._own_pool = pool is None
        self.s = Memif.server(name, pool=self.pool, buffer_size=buffer_size,
                              force_general=force_general)
        self.c = Memif.client(name, pool=self.pool, buffer_size=buffer_size,
                              force_general=force_general, zero_copy=zero_copy,
                              ring_size_log2=log2)
        if not (self.c.wait_connected(10) and self.s.wait_connected(10)):
            raise RuntimeError(f"loopback did not connect: {self.c.disconnect_reason}")
        self.run(64, 10)          # compile / load before anything is timed

    def run(self, size, iters, direction="c2s"):
        tx, rx = (self.c, self.s) if direction == "c2s" else (self.s, self.c)
        return loopback_loop(self.pool.domain.state, self.pool.id, 0, tx.tx_queue(0),
                             rx.rx_queue(0), frame_of(size), iters)

    def ns_per_packet(self, size, iters=3000, repeat=5, direction="c2s"):
        best = []
        fr = frame_of(size)
        dom = self.pool.domain.state
        tx, rx = (self.c, self.s) if direction == "c2s" else (self.s, self.c)
        for _ in range(repeat):
            t = time.perf_counter_ns()
            n = loopback_loop(dom, self.pool.id, 0, tx.tx_queue(0), rx.rx_queue(0), fr, iters)
            dt = time.perf_counter_ns() - t
            if n <= 0:
                raise RuntimeError("loopback moved no packets")
            best.append(dt / n)
        return statistics.median(best)

    def close(self):
        self.c.close()
        self.s.close()
        if self._own_pool:
            self.pool.close(force=True)


def loopback_ratio(size: int, relation: str = "eq", repeat: int = 7, iters: int = 3000) -> dict:
    """ns/packet of the relation's fast path and of the forced general path, measured
    interleaved in one run; ``ratio`` = general / fast (> 1: the fast path is faster)."""
    bs = RELATIONS[relation]
    fast = Loopback(bs)
    gen = Loopback(bs, force_general=True, pool=fast.pool)
    try:
        f, g = [], []
        for _ in range(repeat):
            f.append(fast.ns_per_packet(size, iters, repeat=1))
            g.append(gen.ns_per_packet(size, iters, repeat=1))
        fm, gm = statistics.median(f), statistics.median(g)
        return {"fast_ns": fm, "general_ns": gm, "ratio": gm / fm}
    finally:
        gen.close()
        fast.close()


def loopback_zc_ratio(size: int, repeat: int = 7, iters: int = 3000) -> dict:
    """Client Tx in zero-copy vs copy mode (loopback, c2s); ratio = copy / zero-copy."""
    cp = Loopback(2048)
    zc = Loopback(2048, zero_copy=True, pool=cp.pool)
    try:
        a, b = [], []
        for _ in range(repeat):
            a.append(cp.ns_per_packet(size, iters, repeat=1))
            b.append(zc.ns_per_packet(size, iters, repeat=1))
        am, bm = statistics.median(a), statistics.median(b)
        return {"copy_ns": am, "zc_ns": bm, "ratio": am / bm}
    finally:
        zc.close()
        cp.close()


# -- CPU accounting: how much did *other* processes use while we measured? -------------------------
def _busy_jiffies() -> int:
    with open("/proc/stat") as f:
        v = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in v[:8])
    return user + nice + system + irq + softirq + steal


def _tree_jiffies(pid: int) -> int:
    """utime + stime of a process and all its descendants (0 once they are gone)."""
    total = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            pass
    return total


class ForeignLoad:
    """CPUs' worth of time used by processes other than ``pids`` (and their children) between
    :meth:`start` and :meth:`stop` -- a benchmark figure is suspect when this is not ~0."""

    def __init__(self):
        self.pids: list[int] = []
        self.value = 0.0

    def start(self, pids):
        self.pids = list(pids)
        self._t = time.monotonic()
        self._b = _busy_jiffies()
        self._o = sum(_tree_jiffies(p) for p in self.pids)

    def stop(self) -> float:
        dt = max(1e-3, time.monotonic() - self._t)
        own = sum(_tree_jiffies(p) for p in self.pids) - self._o
        hz = os.sysconf("SC_CLK_TCK")
        self.value = max(0.0, (_busy_jiffies() - self._b - own) / hz / dt)
        return self.value


LAST_FOREIGN = [0.0]


# -- two processes ---------------------------------------------------------------------------------
def _emit(stats, t0):
    print(json.dumps({"t": time.monotonic() - t0, "rx": int(stats[S_RX]), "tx": int(stats[S_TX]),
                      "full": int(stats[S_FULL])}), flush=True)


def _child(argv) -> int:
    """One side of a two-process case (run as a child by :func:`two_process`)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["sender", "sink", "echo", "pingpong"])
    ap.add_argument("sock")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--bsize", type=int, default=2048)
    ap.add_argument("--general", action="store_true")
    ap.add_argument("--zc", action="store_true")
    ap.add_argument("--cpu", type=int, default=-1)
    a = ap.parse_args(argv)
    if a.cpu >= 0:
        try:
            os.sched_setaffinity(0, {a.cpu})
        except OSError:
            pass
    from ..api.pools import PktmbufPool
    from ..api.memif import Memif
    pool = PktmbufPool(16384, 256, name=a.role)
    kw = dict(pool=pool, buffer_size=a.bsize, force_general=a.general)
    client = a.role in ("sender", "pingpong")
    m = Memif.client(a.sock, zero_copy=a.zc, **kw) if client else Memif.server(a.sock, **kw)
    print("READY", flush=True)
    if not m.wait_connected(30):
        print(json.dumps({"error": m.disconnect_reason}), flush=True)
        return 1
    dom = pool.domain.state
    stats = np.zeros(4, np.int64)
    boff = backoff_new()
    fr = frame_of(a.size)
    t0 = time.monotonic()
    end = t0 + a.seconds
    while time.monotonic() < end:
        dl = time.monotonic_ns() + int(min(0.5, end - time.monotonic()) * 1e9)
        if a.role == "sender":
            sender_loop(dom, pool.id, 0, m.tx_queue(0), fr, dl, stats, boff)
        elif a.role == "sink":
            sink_loop(dom, 0, m.rx_queue(0), dl, stats, boff)
        elif a.role == "echo":
            echo_loop(dom, 0, m.rx_queue(0), m.tx_queue(0), dl, stats, boff)
        else:
            pingpong_loop(dom, pool.id, 0, m.tx_queue(0), m.rx_queue(0), fr, 512, dl, stats, boff)
        _emit(stats, t0)
    if client:
        m.close()              # the client stops first; the server sees it go
    else:
        m.wait_disconnected(5)
        m.close()
    return 0


def _samples_pps(lines, key):
    """Median pps over consecutive samples, dropping the first (partial) interval."""
    recs = [json.loads(x) for x in lines if x.startswith("{")]
    recs = [r for r in recs if "t" in r]
    rates = [(b[key] - a[key]) / (b["t"] - a["t"]) for a, b in zip(recs, recs[1:]) if b["t"] > a["t"]]
    rates = rates[1:] if len(rates) > 2 else rates
    return statistics.median(rates) if rates else 0.0


def warm() -> None:
    """Compile (or load) every loop here before children compile them concurrently."""
    from ..api.pools import PktmbufPool
    from ..memif.queue import queue_alloc
    pool = PktmbufPool(64, 0, name="bench-warm")
    q = queue_alloc()
    st = np.zeros(4, np.int64)
    fr = frame_of(64)
    sender_loop(pool.domain.state, pool.id, 0, q, fr, 0, st, backoff_new())
    sink_loop(pool.domain.state, 0, q, 0, st, backoff_new())
    echo_loop(pool.domain.state, 0, q, q, 0, st, backoff_new())
    pingpong_loop(pool.domain.state, pool.id, 0, q, q, fr, 64, 0, st, backoff_new())
    pool.close()
    Loopback().close()
    Loopback(zero_copy=True).close()


def two_process(case: str, size: int = 64, seconds: float = 3.0, bsize: int = 2048,
                general: bool = False, zc: bool = False) -> float:
    """Mpps of a two-process case: "oneway" (sender -> sink) or "roundtrip" (pingpong <-> echo).

    The server side is pinned to CPU 1, the client side to CPU 0 (when the machine has them).
    Returns the receiving side's median pps / 1e6 (round trip: packets back at the client).
    """
    sock = f"/pktbuf-bench-{os.getpid()}-{case}-{time.monotonic_ns()}"
    py = [sys.executable, "-c", "import sys; from pktbuf.bench import memif as B; "
          "sys.exit(B._child(sys.argv[1:]))"]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    ncpu = os.cpu_count() or 1
    common = ["--seconds", str(seconds), "--size", str(size), "--bsize", str(bsize)]
    if general:
        common.append("--general")
    srole, crole = ("sink", "sender") if case == "oneway" else ("echo", "pingpong")
    procs = []
    try:
        srv = subprocess.Popen(py + [srole, sock] + common + ["--cpu", str(1 % ncpu)],
                               stdout=subprocess.PIPE, text=True, env=env)
        procs.append(srv)
        if srv.stdout.readline().strip() != "READY":
            raise RuntimeError("bench server did not start")
        cli = subprocess.Popen(py + [crole, sock] + common + ["--cpu", "0"] + (["--zc"] if zc else []),
                               stdout=subprocess.PIPE, text=True, env=env)
        procs.append(cli)
        fl = ForeignLoad()
        time.sleep(min(1.0, seconds / 3))        # connected and running
        fl.start([srv.pid, cli.pid, os.getpid()])
        time.sleep(seconds / 2)
        LAST_FOREIGN[0] = fl.stop()
        cout, _ = cli.communicate(timeout=seconds + 60)
        sout, _ = srv.communicate(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    lines = (sout if case == "oneway" else cout).splitlines()
    return _samples_pps(lines, "rx") / 1e6


def testpmd_pair(size: int = 64, seconds: float = 5.0) -> float | None:
    """Mpps of testpmd txonly (client) -> testpmd rxonly (server) over memif, or None if
    dpdk-testpmd is not installed or the pair did not come up."""
    from ..memif import testpmd as T
    if not T.available():
        return None
    sock = f"/pktbuf-bench-tp-{os.getpid()}-{time.monotonic_ns()}"
    srv = T.Testpmd("server", sock, fwd="rxonly", lifetime=int(seconds) + 90)
    cli = T.Testpmd("client", sock, fwd="txonly", lcores=["--lcores=0@1,1@0"],
                    app_extra=[f"--txpkts={size}"], lifetime=int(seconds) + 90)
    try:
        srv.start()
        if not srv.wait_listening(60):
            return None
        srv.cmd("start")
        cli.start()
        if not cli.wait_log(r"memif_connect\(\): Connected", 60):
            return None
        cli.cmd("start")
        time.sleep(1.0)
        srv.port_stats()                     # arms "since last show"
        rates = []
        fl = ForeignLoad()
        fl.start([srv.pid, cli.pid, os.getpid()])
        for _ in range(int(max(2, seconds))):
            time.sleep(1.0)
            st = srv.port_stats()
            if st.get("rx_pps"):
                rates.append(st["rx_pps"])
        LAST_FOREIGN[0] = fl.stop()
        cli.stop_forwarding()
        srv.stop_forwarding()
        return statistics.median(rates) / 1e6 if rates else None
    finally:
        cli.cleanup()
        time.sleep(0.3)
        srv.cleanup()


# -- the command ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    """pktbuf bench memif: pps between two pktbuf processes, copy paths, zero-copy, and
    testpmd <-> testpmd as the reference, in one run."""
    ap = argparse.ArgumentParser(prog="pktbuf bench memif", description=main.__doc__)
    ap.add_argument("--seconds", type=float, default=3.0, help="traffic per two-process case")
    ap.add_argument("--quick", action="store_true", help="short runs (CI smoke test)")
    ap.add_argument("--no-testpmd", action="store_true")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved testpmd/pktbuf rounds for the one-way comparison")
    a = ap.parse_args(argv)
    secs = 1.5 if a.quick else a.seconds
    rep = 3 if a.quick else 7
    print(f"memif benchmark: {os.cpu_count()} CPUs, {secs:g} s per two-process case; "
          "compiling on first run...", flush=True)
    warm()
    rows = []

    def row(name, value, unit, note=""):
        rows.append((name, value, unit, note))
        v = "n/a" if value is None else f"{value:.2f}"
        print(f"  {name:<48} {v:>9} {unit:<7} {note}", flush=True)

    print("two processes (client CPU 0 -> server CPU 1); 'other' = CPUs used by foreign "
          "processes meanwhile (figures are suspect when it is not ~0):", flush=True)
    rounds = 1 if a.quick else a.rounds
    res = {}
    for size in (64, 1500):
        tps, pks, ratios, fls = [], [], [], []
        for _ in range(rounds):       # interleaved, so slow phases of the machine hit both
            tp = None if a.no_testpmd else testpmd_pair(size, max(3.0, secs))
            fl_tp = LAST_FOREIGN[0]
            pk = two_process("oneway", size, secs)
            fls += [fl_tp, LAST_FOREIGN[0]]
            pks.append(pk)
            if tp:
                tps.append(tp)
                ratios.append(pk / tp)
        res[size] = statistics.median(pks)
        other = f"other {max(fls):.2f}"
        row(f"testpmd -> testpmd one way {size} B (reference)",
            statistics.median(tps) if tps else None, "Mpps",
            f"{rounds} rounds, {other}" if tps else "testpmd not available")
        row(f"pktbuf -> pktbuf one way {size} B", res[size], "Mpps",
            (f"{statistics.median(ratios):.2f}x testpmd (median of {len(ratios)} interleaved "
             f"rounds: {', '.join(f'{r:.2f}' for r in ratios)})") if ratios else other)
    one64 = res[64]
    for size in (64, 1500):
        v = two_process("roundtrip", size, secs)
        row(f"pktbuf <-> pktbuf round trip {size} B", v, "Mpps",
            f"back at the sender, other {LAST_FOREIGN[0]:.2f}")
    g64 = two_process("oneway", 64, secs, general=True)
    row("pktbuf -> pktbuf one way 64 B, general path", g64, "Mpps",
        (f"fast/general {one64 / g64:.2f}x, " if g64 else "") + f"other {LAST_FOREIGN[0]:.2f}")
    z64 = two_process("oneway", 64, secs, zc=True)
    row("pktbuf -> pktbuf one way 64 B, zero-copy client", z64, "Mpps",
        (f"zc/copy {z64 / one64:.2f}x, " if one64 else "") + f"other {LAST_FOREIGN[0]:.2f}")
    print("loopback, one thread (alloc+fill, tx, rx, free per packet):", flush=True)
    for size in (64, 1500):
        for rel in ("eq", "lt", "gt"):
            r = loopback_ratio(size, rel, repeat=rep)
            row(f"{rel} (memif {RELATIONS[rel]} vs mbuf 2048) {size} B: fast", r["fast_ns"], "ns/pkt")
            row(f"{rel} {size} B: general", r["general_ns"], "ns/pkt",
                f"fast over general {100 * (r['ratio'] - 1):+.0f} %")
    for size in (64, 1500):
        z = loopback_zc_ratio(size, repeat=rep)
        row(f"zero-copy client Tx {size} B", z["zc_ns"], "ns/pkt", f"copy {z['copy_ns']:.1f} ns, "
            f"copy/zc {z['ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
