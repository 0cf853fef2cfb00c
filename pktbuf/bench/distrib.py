"""Scale-out stages: the distributor hop, the distributor pipeline over two cores, and one
against two self-fed workers.  ``pktbuf bench distrib`` runs :func:`main`.

Work per packet everywhere: a 64-byte UDP/IPv4 frame of one of ``FLOWS`` flows (the pool's data
rooms are filled once; an allocated mbuf finds its frame there), the worker stage swaps the
MAC addresses (``macswap``) and frees the burst.  Bursts of 32.

* **hop** (one thread, in-JIT, fenced TSC, the core bench's sampling): ``base`` = allocate a
  burst, worker stage; ``hop`` = allocate, :func:`~pktbuf.net.distrib.kernels.distributor_burst`
  (Toeplitz over the tuple, RETA, enqueue), the worker's
  :func:`~pktbuf.net.distrib.kernels.distributor_worker_burst`, worker stage; ``hop_prehashed`` =
  the same with the hash taken from the mbuf (a port that sets it).  Variants take turns
  sample by sample; the figure is ``hop - base`` per packet (the distributor's added cost),
  with a 95 % bootstrap interval over the paired samples.  One thread: rings and descriptors
  stay in its caches, so this is the hop's instruction cost without cache-line transfers.
* **pipeline** (two threads pinned to CPUs 0 and 1, ``seconds`` each run): the distributor
  thread allocates and distributes; the worker thread takes its ring, does the worker stage
  and frees: packets per second through the worker, next to ``base`` on one thread.
  Descriptors, ring slots and mempool cache contents now cross cores.
* **workers** (``seconds`` each run): one, then two self-fed worker threads (each allocates its
  own bursts and does the worker stage on its own lcore, pinned to its own CPU): aggregate
  packets per second and the ratio.  The kernels release the GIL, so threads of one process
  scale as processes would; the pool is shared as a shared domain's is.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np

from ..errors import cli_number
from .._jit import kernel
from ..atomics import load_acquire
from ..net.distrib.kernels import distributor_burst, distributor_worker_burst
from ..buf.mbuf.free import pktmbuf_free_bulk
from ..buf.mbuf.raw import pktmbuf_alloc_bulk
from ..rawmem import addr_u8
from . import results as R
from .core import NEVER, QUICK, BenchError, chunking
from .heap import ratio_ci
from .tsc import pair_overhead_cycles, tsc_begin, tsc_end, tsc_hz

BURST = 32
FLOWS = 1024
POOL = 8192
PKT_LEN = 64
VARIANTS = ("empty", "base", "hop", "hop_prehashed")
M_BASE, M_HOP, M_EMPTY = 0, 1, 2
C_D = 2 + 1 + 1 / 16 + 2 / 32 + 1 / 16      # lines into the distributor's core per packet
C_W = 2 + 1 + 1 / 16 + 2 / 32 + 1 / 16      # lines into a worker's core per packet (docs)
CORES = (1, 2, 4, 8, 16, 32, 64)


def _frame(f: int) -> bytes:
    """A 64-byte UDP/IPv4 frame of flow ``f``."""
    import struct
    eth = bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]) + b"\x08\x00"
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 50, 0, 0, 64, 17, 0,
                     0x0A000000 | f, 0x0A800000 | (f * 7919 & 0xFFFF))
    udp = struct.pack("!HHHH", 1024 + f, 53, 30, 0)
    return (eth + ip + udp).ljust(PKT_LEN, b"\x00")


@kernel(inline="always")
def _alloc(dom, pid, lcore, b, n):
    if pktmbuf_alloc_bulk(dom, pid, lcore, b, n) != 0:
        return False
    for i in range(n):
        m = dom.mb[b[i]]
        m.data_len = PKT_LEN
        m.pkt_len = PKT_LEN
    return True


@kernel(inline="always")
def _worker_stage(dom, lcore, b, n, work=True):
    """macswap every packet of ``b[:n]`` (unless ``work`` is False), then free them."""
    for i in range(n if work else 0):
        m = dom.mb[b[i]]
        p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 12)
        for j in range(6):
            t = p[j]
            p[j] = p[6 + j]
            p[6 + j] = t
    pktmbuf_free_bulk(dom, lcore, b, n)


@kernel
def stage_loop(dom, pid, lcore, d, mode, b, w, nchunks, chunk, drop_cyc):
    """``nchunks`` timed intervals of ``chunk`` bursts: ``mode`` M_BASE (allocate, worker
    stage) or M_HOP (allocate, distribute, worker 0 takes its ring, worker stage).  Returns
    ``(cycles, kept, dropped, packets)``; packets -1 when the pool ran dry."""
    acc = np.uint64(0)
    kept = 0
    dropped = 0
    pk = 0
    n = b.size
    for _ in range(nchunks):
        t0 = tsc_begin()
        for _ in range(chunk):
            if not _alloc(dom, pid, lcore, b, n):
                return acc, kept, dropped, -1
            if mode == M_HOP:
                k = distributor_burst(dom, d, b, n)
                if k < n:                        # cannot happen with an emptied ring
                    pktmbuf_free_bulk(dom, lcore, b[k:], n - k)
                got = distributor_worker_burst(d, 0, w, n)
                _worker_stage(dom, lcore, w, got)
                pk += got
            else:
                _worker_stage(dom, lcore, b, n, mode == M_BASE)
                pk += n
        dt = tsc_end() - t0
        if dt < drop_cyc:
            acc += dt
            kept += 1
        else:
            dropped += 1
    return acc, kept, dropped, pk


@kernel
def run_producer(dom, pid, lcore, d, b, stop):
    """The distributor thread: allocate and distribute until ``stop[0]``; refused packets
    (a full ring) are offered again.  Returns packets handed over (-1: the pool ran dry)."""
    n = b.size
    sent = 0
    while load_acquire(stop, 0) == 0:
        if not _alloc(dom, pid, lcore, b, n):
            return -1
        off = 0
        while off < n:
            k = distributor_burst(dom, d, b[off:], n - off)   # the taken ones come first
            off += k
            sent += k
            if off < n and load_acquire(stop, 0) != 0:
                pktmbuf_free_bulk(dom, lcore, b[off:], n - off)
                return sent
    return sent


@kernel
def run_consumer(dom, lcore, d, w, stop):
    """A worker thread: take the ring, worker stage, until ``stop[0]`` and the ring is
    empty.  Returns packets done."""
    done = 0
    n = w.size
    while True:
        got = distributor_worker_burst(d, 0, w, n)
        if got > 0:
            _worker_stage(dom, lcore, w, got)
            done += got
        elif load_acquire(stop, 0) != 0:
            return done
    return done


@kernel
def run_selffed(dom, pid, lcore, b, stop):
    """A self-fed worker: allocate, worker stage, until ``stop[0]``.  Packets done."""
    done = 0
    n = b.size
    while load_acquire(stop, 0) == 0:
        if not _alloc(dom, pid, lcore, b, n):
            return -1
        _worker_stage(dom, lcore, b, n)
        done += n
    return done


# -- Python side ----------------------------------------------------------------------------------
def _diff_ci(a: list, b: list, seed: int = 12) -> tuple[float, float, float]:
    """median(a) - median(b) of paired series and its 95 % bootstrap interval."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    r = float(np.median(a) - np.median(b))
    if a.size < 2:
        return r, r, r
    idx = np.random.default_rng(seed).integers(0, a.size, size=(2000, a.size))
    boot = np.median(a[idx], axis=1) - np.median(b[idx], axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return r, float(lo), float(hi)


class Setup:
    """A pool whose data rooms hold the flows' frames, and distributors for one worker (hash
    here, or the mbuf's) -- warm."""

    def __init__(self, workers: int = 1):
        from ..net.distrib.api import Distributor
        from ..buf.domain.pools import PktmbufPool
        from ..lcore import reserve_lcores
        reserve_lcores(4)
        self.pool = PktmbufPool(POOL, cache_size=256, name="bench-distrib")
        hs = self.pool.alloc_bulk(POOL)
        for i, h in enumerate(hs):
            _append(self.pool, int(h), _frame(i % FLOWS))
        self.pool.free_bulk(hs)
        self.dom = self.pool.domain.state
        self.hop = Distributor(self.pool, workers, ring_size=1024)
        self.pre = Distributor(self.pool, workers, ring_size=1024, use_mbuf_hash=True)
        self.b = np.empty(BURST, np.int32)
        self.w = np.empty(BURST, np.int32)
        self.hz = tsc_hz()
        self.pair_cyc = pair_overhead_cycles()
        for m, d in ((M_BASE, self.hop), (M_EMPTY, self.hop), (M_HOP, self.hop),
                     (M_HOP, self.pre)):
            stage_loop(self.dom, self.pool.id, 0, d.state, m, self.b, self.w, 1, 1,
                       np.uint64(NEVER))
        # compile the threads' loops here, not inside a timed run (a stop flag already set:
        # each returns at once)
        stop = np.ones(1, np.int64)
        run_producer(self.dom, self.pool.id, 1, self.hop.state, self.b, stop)
        run_consumer(self.dom, 2, self.hop.state, self.w, stop)
        run_selffed(self.dom, self.pool.id, 1, self.b, stop)

    def sample(self, variant: str, nchunks: int, chunk: int, drop_cyc: int):
        d = self.pre if variant == "hop_prehashed" else self.hop
        mode = {"base": M_BASE, "empty": M_EMPTY}.get(variant, M_HOP)
        acc, kept, dropped, pk = stage_loop(self.dom, self.pool.id, 0, d.state, mode, self.b,
                                            self.w, nchunks, chunk, np.uint64(drop_cyc))
        if pk < 0:
            raise BenchError("distrib: the pool ran dry")
        if kept == 0:
            raise BenchError(f"distrib: all {dropped} intervals were dropped (preempted)")
        ns = (float(acc) - kept * self.pair_cyc) / (kept * chunk * BURST) * 1e9 / self.hz
        return ns, int(kept), int(dropped)

    def close(self):
        self.hop.close()
        self.pre.close()
        self.pool.close(force=True)


def _append(pool, h, data):
    from ..buf.domain.mbuf import Mbuf
    Mbuf(pool.domain, h).append_bytes(data)


def measure_hop(s: Setup, reps: int = 11, packets: int = 2_000_000) -> dict:
    """ns per packet of each variant (alternating samples) and the hop's added cost."""
    per = max(s.sample(v, 8, 4, NEVER)[0] for v in VARIANTS) * BURST * s.hz / 1e9
    chunk, drop_cyc = chunking(per, s.hz)
    nchunks = max(1, packets // (BURST * chunk))
    samples = {v: [] for v in VARIANTS}
    counts = {v: [0, 0] for v in VARIANTS}
    for rep in range(reps + 1):                 # the first round warms up, discarded
        for v in (VARIANTS if rep % 2 == 0 else VARIANTS[::-1]):
            ns, kp, dr = s.sample(v, nchunks, chunk, drop_cyc)
            if rep:
                samples[v].append(ns)
                counts[v][0] += kp
                counts[v][1] += dr
    out = {"rows": [{"variant": v, "ns_per_packet": R.figure(samples[v], *counts[v])}
                    for v in VARIANTS],
           "chunk": chunk, "nchunks": nchunks, "reps": reps}
    for v in ("hop", "hop_prehashed"):
        d, lo, hi = _diff_ci(samples[v], samples["base"])
        out[f"{v}_added_ns"] = {"value": d, "ci": [lo, hi]}
    return out


def _pin(cpu: int) -> None:
    try:
        os.sched_setaffinity(0, {cpu})          # this thread only
    except (OSError, AttributeError):
        pass


def _timed_threads(targets, seconds: float) -> list:
    """Run each ``f(stop) -> count`` in its own thread for ``seconds``; their counts."""
    stop = np.zeros(1, np.int64)
    res = [None] * len(targets)

    def run(i, f):
        res[i] = f(stop)

    ts = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(targets)]
    for t in ts:
        t.start()
    time.sleep(seconds)
    stop[0] = 1
    for t in ts:
        t.join()
    return res


def measure_pipeline(s: Setup, seconds: float = 2.0, rounds: int = 3) -> dict:
    """Distributor thread on CPU 0 -> worker thread on CPU 1, against the worker stage alone
    on one thread (CPU 1), alternating; Mpps through the worker."""
    pid, dom, d = s.pool.id, s.dom, s.hop.state
    b2, w2 = np.empty(BURST, np.int32), np.empty(BURST, np.int32)

    def producer(stop):
        _pin(0)
        return run_producer(dom, pid, 1, d, b2, stop)

    def consumer(stop):
        _pin(1)
        return run_consumer(dom, 2, d, w2, stop)

    def alone(stop):
        _pin(1)
        return run_selffed(dom, pid, 2, w2, stop)

    pipe, single = [], []
    for r in range(rounds):
        for kind in (("pipe", "alone") if r % 2 == 0 else ("alone", "pipe")):
            t0 = time.perf_counter()
            if kind == "pipe":
                sent, done = _timed_threads([producer, consumer], seconds)
                if sent < 0:
                    raise BenchError("distrib pipeline: the pool ran dry")
                pipe.append(done / (time.perf_counter() - t0) / 1e6)
            else:
                (done,) = _timed_threads([alone], seconds)
                single.append(done / (time.perf_counter() - t0) / 1e6)
    return {"pipeline_mpps": statistics.median(pipe), "alone_mpps": statistics.median(single),
            "samples_pipeline": pipe, "samples_alone": single, "seconds": seconds}


def measure_workers(s: Setup, seconds: float = 2.0, rounds: int = 3) -> dict:
    """One self-fed worker thread (CPU 1) against two (CPUs 0 and 1), alternating; aggregate
    Mpps and the ratio with its 95 % interval."""
    pid, dom = s.pool.id, s.dom
    bufs = [np.empty(BURST, np.int32) for _ in range(2)]

    def worker(i, cpu):
        def f(stop):
            _pin(cpu)
            return run_selffed(dom, pid, 1 + i, bufs[i], stop)
        return f

    one, two = [], []
    for r in range(rounds):
        for kind in ((1, 2) if r % 2 == 0 else (2, 1)):
            t0 = time.perf_counter()
            counts = _timed_threads([worker(i, 1 - i) for i in range(kind)], seconds)
            if min(counts) < 0:
                raise BenchError("distrib workers: the pool ran dry")
            (one if kind == 1 else two).append(sum(counts) / (time.perf_counter() - t0) / 1e6)
    r, lo, hi = ratio_ci(two, one)
    return {"one_mpps": statistics.median(one), "two_mpps": statistics.median(two),
            "ratio": r, "ci": [lo, hi], "samples_one": one, "samples_two": two,
            "seconds": seconds}


def model(res: dict) -> dict:
    """docs/scaleout.md's cost model calibrated on this run: the stage costs (ns/packet), the
    cross-core line cost L, and predicted Mpps for CORES (unvalidated beyond two)."""
    med = {r["variant"]: r["ns_per_packet"]["median"] for r in res["hop"]["rows"]}
    t_allocfree = med["empty"]
    t_work = max(med["base"] - med["empty"], 0.0)
    t_ring = max(med["hop_prehashed"] - med["base"], 0.0)        # enqueue + dequeue
    t_hash = max(med["hop"] - med["hop_prehashed"], 0.0)
    t_d = t_allocfree / 2 + t_hash + t_ring / 2                 # alloc, hash, enqueue
    t_w = t_ring / 2 + t_work + t_allocfree / 2                 # dequeue, work, free
    out = {"t_alloc_free": t_allocfree, "t_work": t_work, "t_ring": t_ring, "t_hash": t_hash,
           "t_distributor": t_d, "t_worker": t_w, "c_d": C_D, "c_w": C_W, "predict": {}}
    pl, wk = res.get("pipeline"), res.get("workers")
    if pl:
        # the slower side of the two-core pipeline sets its rate; the rest is line transfers
        per = 1e3 / pl["pipeline_mpps"]
        out["line_ns"] = L = max((per - max(t_d, t_w)) / C_D, 0.0)
        td, tw = t_d + C_D * L, t_w + C_W * L
        out["predict"]["distributor_mpps"] = {n: min(1e3 / td, n * 1e3 / tw) for n in CORES}
    if wk:
        one = wk["one_mpps"]
        eff = wk["two_mpps"] / (2 * one)
        out["efficiency_2"] = eff
        out["predict"]["selffed_mpps"] = {n: n * one * (eff if n > 1 else 1.0) for n in CORES}
    return out


def print_all(res: dict, out=None) -> None:
    p = lambda x="": print(x, file=out or sys.stdout)   # noqa: E731
    h = res["hop"]
    p(f"\ndistributor hop, 64-byte UDP/IPv4 frames of {FLOWS} flows, bursts of {BURST}, one "
      f"thread (median of {h['reps']} alternating samples)")
    for row in h["rows"]:
        f = row["ns_per_packet"]
        p(f"  {row['variant']:<14} {f['median']:7.2f} ns/packet  ({len(f['samples'])} samples, "
          f"{f.get('dropped', 0)} intervals dropped)")
    for v, label in (("hop", "Toeplitz in the distributor"),
                     ("hop_prehashed", "hash from the mbuf")):
        a = h[f"{v}_added_ns"]
        tgt = "  (target <= 15)" if v == "hop" else ""
        p(f"  added by the hop, {label:<28} {a['value']:6.2f} ns/packet "
          f"[{a['ci'][0]:.2f}, {a['ci'][1]:.2f}]{tgt}")
    pl = res.get("pipeline")
    if pl:
        p(f"\npipeline over two cores ({pl['seconds']:g} s runs): distributor (CPU 0) -> worker "
          f"(CPU 1) {pl['pipeline_mpps']:.2f} Mpps; worker stage alone on one thread "
          f"{pl['alone_mpps']:.2f} Mpps (no target)")
    m = res.get("model")
    if m:
        p(f"\ncost model (docs/scaleout.md), ns/packet: alloc+free {m['t_alloc_free']:.2f}, "
          f"work {m['t_work']:.2f}, ring {m['t_ring']:.2f}, hash {m['t_hash']:.2f}; "
          f"distributor {m['t_distributor']:.2f}, worker {m['t_worker']:.2f}"
          + (f"; a cache line between cores {m['line_ns']:.2f} ns (x{m['c_d']:.2f}/packet)"
             if "line_ns" in m else ""))
        pr = m["predict"]
        if pr:
            p("  predicted Mpps (calibrated on 1-2 cores; UNVALIDATED beyond 2):")
            p("  " + "cores".ljust(28) + "".join(f"{n:>8}" for n in CORES))
            for k, label in (("selffed_mpps", "self-fed workers"),
                             ("distributor_mpps", "distributor -> workers")):
                if k in pr:
                    p("  " + label.ljust(28) + "".join(f"{pr[k][n]:8.1f}" for n in CORES))
    wk = res.get("workers")
    if wk:
        p(f"\nself-fed workers ({wk['seconds']:g} s runs): one {wk['one_mpps']:.2f} Mpps, two "
          f"{wk['two_mpps']:.2f} Mpps: {wk['ratio']:.2f}x [{wk['ci'][0]:.2f}, {wk['ci'][1]:.2f}]"
          f"  (target >= 1.7)")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="pktbuf bench distrib", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=cli_number(int, 1, 10**6), default=11, help="hop samples per variant")
    ap.add_argument("--seconds", type=cli_number(float, 0.001, 86400), default=2.0, help="pipeline / workers run length")
    ap.add_argument("--rounds", type=cli_number(int, 1, 10**6), default=5, help="pipeline / workers alternating rounds")
    ap.add_argument("--quick", action="store_true", help="few, short samples")
    ap.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    a = ap.parse_args(argv)
    if a.reps < 1 or a.rounds < 1 or a.seconds <= 0:
        ap.error("--reps and --rounds must be >= 1, --seconds > 0")
    quick = a.quick or QUICK
    reps, rounds, seconds = (3, 1, 0.3) if quick else (a.reps, a.rounds, a.seconds)
    print("compiling / warming ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    s = Setup()
    try:
        res = {"hop": measure_hop(s, reps, 100_000 if quick else 2_000_000)}
        if (os.cpu_count() or 1) >= 2:
            res["pipeline"] = measure_pipeline(s, seconds, rounds)
            res["workers"] = measure_workers(s, seconds, rounds)
    finally:
        s.close()
    res["model"] = model(res)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["machine"] = R.machine_info(s.hz)
    res["command"] = R.command_line("distrib", argv)
    print_all(res)
    if a.json:
        R.write_json(res, a.json)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
