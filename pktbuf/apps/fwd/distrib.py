"""``pktbuf fwd --workers N --distributor``: one Rx/Tx process, N worker processes fed by the
software distributor.

::

    pktbuf fwd --workers 2 --distributor --forward-mode macswap \\
               --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap

For ports that cannot be split per worker (one queue: a capture file, one memif queue, an
AF_PACKET socket outside a fanout group).  This process creates a shared domain
(:class:`~pktbuf.SharedDomain`), the mbuf pool in it, the ports, and a shared
:class:`~pktbuf.Distributor`; it is the Rx/Tx stage (:func:`~.fwd_distrib_loop.dist_io_loop`).
Each worker is a process started with ``spawn`` after this one warmed the compile cache,
attached to the domain with an lcore id of its own, pinned to CPU ``(w + 1) % ncpu`` (CPU 0 is
left to the Rx/Tx stage); it runs :func:`~.fwd_distrib_loop.dist_worker_loop` on the same
mbufs, no copy.  Flows go to workers by the Toeplitz hash of their IPv4/IPv6 + TCP/UDP tuple
(DPDK's common key; ``--symmetric``: both directions of a flow to one worker).

A worker that dies is seen within one slice (0.1 s): its flows are moved to the live workers
(``Distributor.retire``), the packets still queued for it are freed
(``Distributor.reclaim``), its lcore's mempool cache goes back to the pool
(``SharedDomain.reap``), and what it held in its hands is counted as lost (``in_hand``, at
most one burst); the others go on.  A clean stop (Ctrl-C, ``--seconds``, or every Rx port at
its end) stops receiving, takes back everything in flight, stops the workers, and returns
every mbuf to the pool.

``--stage``: the workers run the stage on what the distributor hands them
(:mod:`pktbuf.apps.stage.dist_loop`): each worker makes its own stage from the spec
(``worker=w``), the drops are freed in the worker, and a kept packet goes back with the Tx
port the stage chose in its ``port`` field, which the Rx/Tx stage then sends it on.  The
stage's counters, drops per reason and per Rx port are in a small shared block, one row per
worker, summed here.
"""
from __future__ import annotations

import os
import signal
import time

import numpy as np

from ...drivers.common.kinds import MAX_PORTS
from .distrib_loop import F_UNROUTED, R_PORT_ERROR, R_RX_EOF, dist_io_loop, dist_worker_loop
from .loop import MAX_BURST, MODES

SLICE = 0.1
DIST_MODES = ("io", "mac", "macswap", "rxonly")


def worker_main(sd, w, ppid, fd, nbytes, mode, txmap, macs, peers, burst, idle_max_us,
                stage=None, shm=None):
    """Worker ``w`` (a ``SharedDomain.spawn`` target): slices of the worker loop until the
    distributor says stop or the Rx/Tx process ``ppid`` is gone.  ``stage``: a ``--stage``
    spec, run on the worker's packets; ``shm``: the name of the stage statistics block."""
    from ...net.distrib.api import Distributor
    from ...lcore import facade_lcore
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the Rx/Tx process decides when to stop
    try:
        os.sched_setaffinity(0, {(w + 1) % (os.cpu_count() or 1)})
    except OSError:
        pass
    sd.pool("fwd")
    dist = Distributor.attach(sd.domain, fd, nbytes, pid=ppid)
    lc = facade_lcore()
    pk = np.empty(MAX_BURST, np.int32)
    dom = sd.domain.state
    m = MODES.index(mode)
    if stage is not None:
        from ..stage.api import Stage
        st = Stage.from_spec(stage, worker=w)
        blk = StageBlock(0, shm)
        pdrop, scnt, drops = blk.row(w, st)
        dest = np.empty(MAX_BURST, np.int32)
        loop = st.dist_loop
        try:
            while not dist.stop_requested and os.getppid() == ppid:
                loop(dom, dist.state, w, lc, txmap, MAX_PORTS, st.state, pdrop, scnt, drops,
                     dest, pk, burst, time.monotonic_ns() + int(SLICE * 1e9), idle_max_us)
        finally:
            del pdrop, scnt, drops
            blk.close()
        return
    while not dist.stop_requested and os.getppid() == ppid:   # a dead parent: stop too
        dist_worker_loop(dom, dist.state, w, lc, m, txmap, macs, peers, pk, burst,
                         time.monotonic_ns() + int(SLICE * 1e9), idle_max_us)


class StageBlock:
    """The stage statistics of distributor-fed workers, in POSIX shared memory: per worker,
    what the stage dropped per Rx port (``MAX_PORTS`` words), its counters and its drops per
    reason (``STAGE_WORDS`` each)."""

    def __init__(self, workers: int, name: str | None = None):
        from multiprocessing import shared_memory
        from .workers import STAGE_WORDS
        self.k = STAGE_WORDS
        row = MAX_PORTS + 2 * STAGE_WORDS
        if name is None:
            self.shm = shared_memory.SharedMemory(create=True, size=8 * workers * row)
            self.owner = True
        else:
            self.shm = shared_memory.SharedMemory(name=name)
            self.owner = False
        n = self.shm.size // (8 * row)
        self.a = np.ndarray((n, row), np.int64, self.shm.buf)
        if self.owner:
            self.a[:] = 0
        self.name = self.shm.name

    def row(self, w: int, stage):
        """Worker ``w``'s views: (per-port drops, counters, drops per reason)."""
        r = self.a[w]
        k, d = max(1, len(stage.counters)), len(stage.drop_reasons) + 1
        return (r[:MAX_PORTS], r[MAX_PORTS:MAX_PORTS + k],
                r[MAX_PORTS + self.k:MAX_PORTS + self.k + d])

    def close(self) -> None:
        del self.a
        self.shm.close()
        if self.owner:
            self.shm.unlink()


class DistribForwarder:
    """The Rx/Tx side of a distributor-fed ``pktbuf fwd`` (usable from Python too)."""

    def __init__(self, vdevs, mode, workers: int, *, burst=32, nb_mbufs=16384, mbuf_size=2176,
                 peers=None, ring_size=1024, symmetric=False, name=None, idle_backoff=True,
                 stage: str | None = None):
        from ...net.distrib.api import Distributor
        from ...net.rss.api import Rss
        from ...buf.domain.shared import SharedDomain
        from ...errors import InvalidArgument
        from .forwarder import Forwarder
        if mode not in DIST_MODES:
            raise InvalidArgument(f"--distributor forwards in {', '.join(DIST_MODES)} mode")
        if not isinstance(workers, int) or not 1 <= workers <= 64:
            raise InvalidArgument("workers must be 1 .. 64")
        self.stage = self.sblk = None
        if stage is not None:
            from ..stage.api import Stage, StageError
            from .workers import STAGE_WORDS
            if mode != "io":
                raise InvalidArgument(f"a stage forwards in io mode, not {mode}")
            self.stage = Stage.from_spec(stage)
            if len(self.stage.counters) > STAGE_WORDS or \
                    len(self.stage.drop_reasons) + 1 > STAGE_WORDS:
                raise StageError(f"the stage {self.stage.name}: with --workers at most "
                                 f"{STAGE_WORDS} counters and {STAGE_WORDS - 1} drop reasons")
        self.spec = stage
        self.n = workers
        self.mode = mode
        self.burst = burst
        self.sd = SharedDomain.create(name or f"pktbuf-fwd-{os.getpid()}",
                                      max_objects=max(1 << 16, 2 * nb_mbufs),
                                      max_ring_slots=max(1 << 16, 4 * nb_mbufs),
                                      max_data_bytes=nb_mbufs * (mbuf_size + 256) + (1 << 24))
        self.fw = self.dist = None
        try:
            self.pool = self.sd.pktmbuf_pool("fwd", nb_mbufs, 250, data_room=mbuf_size)
            rss = Rss(queues=workers, symmetric=bool(symmetric))
            self.dist = Distributor(self.pool, workers, rss=rss, ring_size=ring_size,
                                    shared=True)
            if self.stage is not None:          # compiled or loaded before any port opens
                self.sblk = StageBlock(workers)
                self._stage_slice(self.stage, 0, 0.0)
            self.fw = Forwarder(vdevs, mode, burst=burst, nb_mbufs=nb_mbufs,
                                mbuf_size=mbuf_size, peers=peers, pool=self.pool,
                                idle_backoff=idle_backoff)
        except BaseException:
            self._teardown()
            raise
        self.txmap = np.full(MAX_PORTS, -1, np.int64)
        for r, t in self.fw.streams:
            self.txmap[r] = t
        self.txports = np.array(sorted({int(t) for _, t in self.fw.streams}), np.int64)
        # what the Rx/Tx stage sends a returned packet on: its Rx port's stream, or, with a
        # stage, the Tx port the worker wrote into its port field
        self.sendmap = self.txmap
        if self.stage is not None:
            self.sendmap = np.full(MAX_PORTS, -1, np.int64)
            for p in self.fw.ports.ids():
                self.sendmap[p] = p
            self.txports = np.array(sorted(self.fw.ports.ids()), np.int64)
        self.rk = np.empty(MAX_BURST, np.int32)
        self.held = np.empty(MAX_BURST, np.int32)
        self.nheld = np.zeros(1, np.int64)
        self.procs: list = []
        self.dead: dict[int, dict] = {}        # worker -> what its death cost
        self.rx_on = 1

    @property
    def ports(self):
        return self.fw.ports

    def _lcore(self) -> int:
        from ...lcore import facade_lcore
        return facade_lcore()

    def _worker_args(self, w):
        fw = self.fw
        return (w, os.getpid(), self.dist.fd, self.dist.nbytes, self.mode, self.txmap, fw.macs,
                fw.peers, self.burst, fw.idle_max_us, self.spec,
                None if self.sblk is None else self.sblk.name)

    def _stage_slice(self, st, w: int, seconds: float) -> int:
        """One slice of the stage's worker loop here (the warm-up: worker ``w``'s ring is
        empty), its compile errors as StageError."""
        pdrop, scnt, drops = self.sblk.row(w, st)
        dest, pk = np.empty(MAX_BURST, np.int32), np.empty(MAX_BURST, np.int32)
        txmap = np.full(MAX_PORTS, -1, np.int64)
        return st.compiled(lambda: st.dist_loop(
            self.sd.domain.state, self.dist.state, w, self._lcore(), txmap, MAX_PORTS,
            st.state, pdrop, scnt, drops, dest, pk, self.burst,
            time.monotonic_ns() + int(seconds * 1e9), 0))

    def warm(self) -> None:
        """Compile (or load) both loops here, before any worker starts (nothing received)."""
        rx_on, self.rx_on = self.rx_on, 0
        try:
            self.run_slice(0.0)
        finally:
            self.rx_on = rx_on
        if self.stage is not None:
            self._stage_slice(self.stage, 0, 0.0)
            return
        dist_worker_loop(self.sd.domain.state, self.dist.state, 0, self._lcore(),
                         MODES.index(self.mode), self.txmap, self.fw.macs, self.fw.peers,
                         self.fw.scratch, self.burst, 0, self.fw.idle_max_us)

    def start(self) -> None:
        """Start the workers (call :meth:`warm` first)."""
        for w in range(self.n):
            self.procs.append(self.sd.spawn(worker_main, args=self._worker_args(w)))

    def run_slice(self, seconds: float) -> int:
        return int(dist_io_loop(self.fw.ports.state, self._lcore(), self.fw.streams,
                                self.sendmap, self.txports, self.dist.state, self.burst,
                                time.monotonic_ns() + int(seconds * 1e9), self.rx_on,
                                self.fw.cnt, self.fw.scratch, self.rk, self.held, self.nheld,
                                self.fw.idle_max_us))

    # -- workers that die ------------------------------------------------------------------------
    def check_workers(self) -> list[int]:
        """Workers newly found dead: each retired, its ring freed, its lcore reaped; what it
        held counted (``self.dead[w]``)."""
        from ...errors import InvalidArgument
        out = []
        for w, p in enumerate(self.procs):
            if w in self.dead or p.is_alive():
                continue
            p.join()
            if p.exitcode == 0 and self.dist.stop_requested:
                continue                          # finished as told
            if len(self.dead) + 1 < self.n:
                self.dist.retire(w)
            freed = self.dist.reclaim(w)
            try:
                reps = self.sd.reap(p.pid)
            except InvalidArgument:               # it died before it attached
                reps = []
            s = self.dist.stats()[w]
            self.dead[w] = {"worker": w, "pid": p.pid, "exitcode": p.exitcode,
                            "ring_freed": freed, "lost_in_hand": s["in_hand"],
                            "cache_reclaimed": sum(sum(r.cache_reclaimed.values()) for r in reps),
                            "cache_dropped": sum(sum(r.cache_dropped.values()) for r in reps),
                            "broken_rings": [b for r in reps for b in r.broken_rings]}
            out.append(w)
        return out

    def live(self) -> int:
        return self.n - len(self.dead)

    def in_flight(self) -> int:
        """Packets received and not yet transmitted or freed: held back by the distributor,
        or handed to live workers and not yet back."""
        n = int(self.nheld[0])
        for w, s in enumerate(self.dist.stats()):
            if w not in self.dead:
                n += s["pending"] + s["in_hand"] + s["returned"] - s["collected"]
        return n

    def stop(self, timeout: float = 10.0) -> None:
        """Stop receiving, take back and transmit what is in flight, then stop the workers."""
        self.rx_on = 0
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.check_workers()
            if self.in_flight() == 0:
                break
            self.run_slice(0.01)
        self.dist.request_stop()
        for p in self.procs:
            p.join(timeout)
        for p in self.procs:
            if p.is_alive():                      # pragma: no cover - stuck in a kernel
                p.kill()
                p.join()
        self.check_workers()
        for _ in range(100):              # what the workers returned just before they stopped
            if self.in_flight() == 0:
                break
            self.run_slice(0.0)

    # -- statistics ------------------------------------------------------------------------------
    def worker_rows(self) -> list[dict]:
        out = []
        for w, s in enumerate(self.dist.stats()):
            p = self.procs[w] if w < len(self.procs) else None
            state = "died" if w in self.dead else "running" if p is not None and \
                p.is_alive() else "done"
            out.append({"worker": w, "pid": None if p is None else p.pid, "state": state,
                        "exitcode": None if p is None else p.exitcode,
                        "rx": s["dequeued"], "tx": s["returned"],
                        "dropped": s["done"] - s["returned"],
                        "enqueued": s["enqueued"], "ring_full": s["ring_full"],
                        "in_hand": s["in_hand"], "pending": s["pending"]})
        return out

    def rows(self) -> list[dict]:
        out = self.fw.rows()
        if self.stage is not None:
            for r in out:
                r["stage_dropped"] = self.stage_dropped(r["port_id"])
        return out

    def stage_dropped(self, pid: int) -> int:
        return int(self.sblk.a[:self.n, pid].sum())

    def stage_stats(self, w: int | None = None) -> dict | None:
        """The stage's counters and drops, summed over the workers (``w``: one worker's)."""
        if self.stage is None:
            return None
        from .forwarder import stage_report
        a = self.sblk.a[:self.n] if w is None else self.sblk.a[w:w + 1]
        k, d, o = len(self.stage.counters), len(self.stage.drop_reasons), MAX_PORTS
        c = [int(a[:, o + i].sum()) for i in range(k)]
        dr = [int(a[:, o + self.sblk.k + i].sum()) for i in range(d + 1)]
        drops = dict(zip(self.stage.drop_reasons, dr))
        drops["invalid"] = dr[-1]
        return stage_report(self.stage.name, dict(zip(self.stage.counters, c)), drops)

    def unrouted(self) -> int:
        return int(self.fw.cnt[0, F_UNROUTED])

    def lost(self) -> int:
        return sum(d["lost_in_hand"] for d in self.dead.values())

    def close(self) -> int:
        """Free what is left, close the ports; returns the mbufs still in use (the lost ones
        of dead workers included)."""
        self.dist.drain()
        in_use = self.fw.close()
        self.close_errors = self.fw.close_errors
        self.fw = None
        self._teardown()
        return in_use

    def _teardown(self) -> None:
        if self.fw is not None:
            self.fw.close()
            self.fw = None
        if self.dist is not None:
            self.dist.close()
            self.dist = None
        if self.sblk is not None:
            self.sblk.close()
            self.sblk = None
        self.sd.close(force=True)


def _summary_counts(rows):
    return {"rx": sum(r["rx"] for r in rows), "tx": sum(r["tx"] for r in rows),
            "tx_dropped": sum(r["tx_dropped"] for r in rows)}


def main_distrib(a, peers: dict) -> int:
    """``pktbuf fwd --workers N --distributor`` (``a``: the parsed arguments)."""
    from .forwarder import (EXIT_FAILURE, EXIT_OK, build_or_report, report_failures,
                            report_warnings, sigterm_stops, start_telemetry as _telemetry)
    from .stats import emit_json, emit_text, end_line, fwd_stats_text, stage_text
    df = build_or_report(lambda: DistribForwarder(
        a.vdev, a.forward_mode, a.workers, burst=a.burst, nb_mbufs=a.total_num_mbufs,
        mbuf_size=a.mbuf_size, peers=peers, ring_size=a.dist_ring_size,
        symmetric=a.symmetric, idle_backoff=not a.no_idle_backoff, stage=a.stage), a.json)
    if df is None:
        return EXIT_FAILURE
    reported: set = set()
    stop, old = sigterm_stops()
    tel = None
    t0 = time.monotonic()
    try:
        df.warm()
        tel = _telemetry(a, df.fw, df.stage_stats if df.stage is not None else None,
                         df.stage_dropped)
        if tel is not None:
            tel.register("/pktbuf/workers", lambda params: [
                {k: (-1 if v is None else v) for k, v in r.items()} for r in df.worker_rows()],
                "Returns each distributor-fed fwd worker: state, pid, rx, tx. No parameters")
        df.start()
        start = {"event": "start", "mode": a.forward_mode, "workers": a.workers,
                 "distributor": True, "worker_pids": [p.pid for p in df.procs],
                 "stage": None if df.stage is None else df.stage.name,
                 "idle_backoff": df.fw.idle_backoff,
                 "ports": [{"port_id": p.port_id, "name": p.name, "driver": p.driver}
                           for p in df.ports], "streams": df.fw.streams.tolist()}
        if a.json:
            emit_json(start)
        else:
            emit_text(f"pktbuf fwd: {len(start['ports'])} port(s), {a.forward_mode} mode, "
                      f"{a.workers} workers fed by the distributor (pids "
                      + ", ".join(map(str, start["worker_pids"])) + ")"
                      + ("; Ctrl-C to stop" if not a.seconds else ""))
        t0 = time.monotonic()
        next_stats = t0 + a.stats_period if a.stats_period > 0 else None
        while stop["why"] is None:
            now = time.monotonic()
            if a.seconds and now - t0 >= a.seconds:
                stop["why"] = "seconds"
                break
            r = df.run_slice(SLICE)
            eof = r == R_RX_EOF
            if r == R_PORT_ERROR:
                # stop receiving; stop() takes back and sends what is in flight first
                stop["why"] = "port error"
                report_failures(df.fw.failures(), a.json, reported)
                break
            if next_stats is not None and now >= next_stats:
                ev = {"event": "stats", "t": round(now - t0, 3), "workers": df.worker_rows(),
                      "ports": [{k: r[k] for k in ("port_id", "rx", "tx", "tx_dropped")}
                                for r in df.rows()]}
                if df.stage is not None:
                    ev["stage"] = df.stage_stats()
                if a.json:
                    emit_json(ev)
                else:
                    emit_text("  " + "  ".join(f"worker {r['worker']}: {r['state']} RX "
                                               f"{r['rx']} TX {r['tx']}" for r in ev["workers"])
                              + stage_text(ev.get("stage")))
                next_stats += a.stats_period
            for w in df.check_workers():
                d = df.dead[w]
                if a.json:
                    emit_json({"event": "worker_died", **d, "t": round(now - t0, 3)})
                else:
                    emit_text(f"pktbuf fwd: worker {w} died (exit code {d['exitcode']}); "
                              f"{d['lost_in_hand']} mbufs lost with it, {d['ring_freed']} "
                              f"queued for it freed; {df.live()} still forwarding")
            if df.live() == 0:
                stop["why"] = "all workers ended"
            elif eof and df.in_flight() == 0:
                stop["why"] = "eof"
    except KeyboardInterrupt:
        stop["why"] = "signal"
    finally:
        signal.signal(signal.SIGTERM, old)
        elapsed = time.monotonic() - t0
        df.stop()
        if tel is not None:
            tel.close()
        rows, wrows, lost, unrouted = df.rows(), df.worker_rows(), df.lost(), df.unrouted()
        stage_stats = df.stage_stats()
        if df.stage is not None:
            for r in wrows:
                r["stage"] = df.stage_stats(r["worker"])
        errors, warnings = df.fw.failures(), df.fw.warnings()
        in_use = df.close()
        errors = errors + df.close_errors
    report_failures(errors, a.json, reported)
    if errors and stop["why"] != "port error":
        stop["why"] += " (after a port error)"
    report_warnings(warnings)
    failed = [r["worker"] for r in wrows if r["state"] != "done"]
    status = EXIT_FAILURE if in_use or failed or errors else EXIT_OK
    if a.json:
        emit_json({"event": "summary", "mode": a.forward_mode, "stopped_by": stop["why"],
                   "seconds": round(elapsed, 3), "ports": rows,
                   "accumulated": _summary_counts(rows), "workers": wrows,
                   "lost_with_dead_workers": lost, "unrouted": unrouted, "stage": stage_stats,
                   "mbufs_in_use_at_close": in_use,
                   "errors": [{k: v for k, v in e.items() if k != "line"} for e in errors],
                   "warnings": [{k: v for k, v in w.items() if k != "line"} for w in warnings],
                   "exit_status": status})
    else:
        emit_text(f"\nStopping ({stop['why']}) after {elapsed:.1f} s...")
        for r in wrows:
            emit_text(f"  worker {r['worker']} (pid {r['pid']}): {r['state']}, RX {r['rx']} "
                      f"TX {r['tx']}" + (f", {r['in_hand']} mbufs lost with it"
                                         if r["state"] == "died" else ""))
        emit_text(fwd_stats_text(rows) + stage_text(stage_stats))
        more = [f"{lost} mbufs lost with dead workers"] if lost else []
        if failed:
            more.append(f"workers that did not finish cleanly: {failed}")
        emit_text(end_line(errors, warnings, in_use, "; ".join(more)))
    return status
