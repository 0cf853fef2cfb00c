"""The worker-process machinery ``pktbuf fwd --workers`` and ``pktbuf l3fwd``'s lcore
processes share: how a port is split over N processes (:func:`split_vdevs`, with one XDP
program per ``net_af_xdp`` interface attached by the parent, :func:`attach_shared_xdp`), the
shared statistics block (:class:`Shared`, :func:`publish`), a worker's start
(:func:`worker_enter`: pinned, ``SIGINT`` left to the parent) and the parent's side of the
processes (:class:`WorkerGroup`: spawn, wait until running, report the dead, stop, sum).  See
:mod:`.workers` for how each port type is split."""
from __future__ import annotations

import json
import multiprocessing
import os
import secrets
import signal
import time

import numpy as np

from ...drivers.common.kinds import MAX_PORTS
from ..stage.abi import F_STAGE_DROP
from .loop import F_BUSY_CYCLES, F_RX, F_RX_BYTES, F_TX, F_TX_BYTES, F_TX_DROP

STATS = ("ipackets", "opackets", "ibytes", "obytes", "imissed", "ierrors", "oerrors",
         "rx_nombuf")
LOOP = (("rx", F_RX), ("tx", F_TX), ("tx_dropped", F_TX_DROP), ("rx_bytes", F_RX_BYTES),
        ("tx_bytes", F_TX_BYTES), ("busy_cycles", F_BUSY_CYCLES),
        ("stage_dropped", F_STAGE_DROP))
P_WORDS = len(STATS) + len(LOOP)          # per worker and port

# control words per worker
C_STATE, C_PID, C_CPU, C_IN_USE, C_PORTS, C_HEARTBEAT, C_AUDIT, C_POOL, C_ERROR, C_REPORT = \
    range(10)
C_WORDS = 10
REPORT_BYTES = 8192                       # per worker: its errors and warnings, as JSON
STAGE_WORDS = 64                          # per worker: --stage counters, then as many drops
S_STARTING, S_RUNNING, S_DONE, S_FAILED = 0, 1, 2, 3
STATE_NAMES = {S_STARTING: "starting", S_RUNNING: "running", S_DONE: "done", S_FAILED: "failed"}
G_STOP = 0                                # global word: 1 = every worker stops


def af_xdp_shares(vdevs: list[str], workers: int) -> dict[int, tuple[str, int]]:
    """The ``net_af_xdp`` ports among ``vdevs`` that the workers share (``workers > 1``):
    ``{index: (iface, start_queue)}``; ``InvalidArgument`` for one that cannot be split (a
    ``queue_count`` other than 1, an ``xsk_map`` of its own, no ``iface``)."""
    from ...drivers.common.api.devargs import parse_devargs
    from ...drivers.common.api.port import arg_int
    from ...errors import InvalidArgument
    from ...ethdev.api import driver_of
    out = {}
    if workers < 2:
        return out
    for i, v in enumerate(vdevs):
        if not isinstance(v, str):
            raise InvalidArgument("--workers takes device strings only")
        name, args = parse_devargs(v)
        if driver_of(name) != "net_af_xdp":
            continue
        if "xsk_map" in args:
            raise InvalidArgument(f"{name}: with --workers the parent attaches the XDP program "
                                  "and gives the workers its map; leave xsk_map out")
        if arg_int("net_af_xdp", args, "queue_count", 1, 1, 0xFFFF) != 1:
            raise InvalidArgument(f"{name}: with --workers each worker owns one queue "
                                  f"(worker w: start_queue + w); queue_count="
                                  f"{args['queue_count']} is refused, leave it out or give 1")
        if "iface" not in args:
            raise InvalidArgument(f"{name}: iface=<interface name> is required")
        out[i] = (args["iface"], arg_int("net_af_xdp", args, "start_queue", 0, 0, 0xFFFF))
    return out


def split_vdevs(vdevs: list[str], workers: int, fanout_id: int | None = None,
                xsk_maps: dict[int, str] | None = None) -> list[list[str]]:
    """The device strings of each worker (see the module docstring); ``InvalidArgument`` for
    a port that cannot be split.  ``xsk_maps``: for each shared ``net_af_xdp`` port (by index
    in ``vdevs``, see :func:`af_xdp_shares`), the ``xsk_map`` of the program attached for the
    workers."""
    from ...drivers.common.api.devargs import parse_devargs
    from ...errors import InvalidArgument
    from ...ethdev.api import driver_of
    if fanout_id is None:
        fanout_id = secrets.randbelow(0xFFFF) + 1
    shares = af_xdp_shares(vdevs, workers)
    xsk_maps = xsk_maps or {}
    out = [[] for _ in range(workers)]
    for i, v in enumerate(vdevs):
        if not isinstance(v, str):
            raise InvalidArgument("--workers takes device strings only")
        name, args = parse_devargs(v)
        drv = driver_of(name)
        if i in shares:
            if i not in xsk_maps:
                raise InvalidArgument(f"{name}: no shared XDP program for the workers "
                                      "(xsk_maps)")
            keep = ",".join(f"{k}={x}" for k, x in args.pairs
                            if k not in ("start_queue", "queue_count"))
            for w in range(workers):
                out[w].append(f"{name},{keep},start_queue={shares[i][1] + w},queue_count=1,"
                              f"xsk_map={xsk_maps[i]}")
            continue
        per = "{worker}" in v
        if drv in ("net_pcap", "net_memif") and not per and workers > 1:
            raise InvalidArgument(
                f"{name}: every worker would use the same "
                f"{'files' if drv == 'net_pcap' else 'socket and id'}; put {{worker}} in the "
                f"device string to give each its own (e.g. tx_pcap=out-{{worker}}.pcap)")
        for w in range(workers):
            s = v.replace("{worker}", str(w))
            if drv == "net_af_packet" and "fanout_id" not in args:
                # a fanout group belongs to one interface: each port its own id
                s += f",fanout_id={(fanout_id - 1 + i) % 0xFFFF + 1}"
            out[w].append(s)
    return out


class Shared:
    """The statistics block: ``ctl[w]``, ``ports[w, port]`` (``P_WORDS`` int64 each), the
    global stop word, ``stage[w]`` (a ``--stage``'s counters, then its drops per reason,
    ``STAGE_WORDS`` each) and each worker's report (its port errors and warnings, JSON of
    ``ctl[w, C_REPORT]`` bytes), in POSIX shared memory the workers open by name."""

    def __init__(self, workers: int, name: str | None = None):
        from multiprocessing import shared_memory
        nports = workers * MAX_PORTS * P_WORDS
        nwords = 8 + workers * C_WORDS + nports + workers * 2 * STAGE_WORDS
        size = 8 * nwords + workers * REPORT_BYTES
        if name is None:
            self.shm = shared_memory.SharedMemory(create=True, size=size)
            self.owner = True
        else:
            self.shm = shared_memory.SharedMemory(name=name)
            self.owner = False
        a = np.ndarray(nwords, np.int64, self.shm.buf)
        self.glob = a[:8]
        self.ctl = a[8:8 + workers * C_WORDS].reshape(workers, C_WORDS)
        o = 8 + workers * C_WORDS
        self.ports = a[o:o + nports].reshape(workers, MAX_PORTS, P_WORDS)
        self.stage = a[o + nports:].reshape(workers, 2, STAGE_WORDS)
        self.reports = np.ndarray((workers, REPORT_BYTES), np.uint8, self.shm.buf, 8 * nwords)
        if self.owner:
            a[:] = 0
            self.reports[:] = 0
        self.name = self.shm.name

    def put_report(self, w: int, errors: list, warnings: list) -> None:
        """Worker ``w``'s errors and warnings (dicts), for the parent to report."""
        b = json.dumps({"errors": errors, "warnings": warnings}).encode()
        if len(b) > REPORT_BYTES:                      # keep the errors, drop the details
            b = json.dumps({"errors": [{k: e[k] for k in ("port_id", "line")}
                                       for e in errors][:20],
                            "warnings": []}).encode()[:REPORT_BYTES]
        self.reports[w, :len(b)] = np.frombuffer(b, np.uint8)
        self.ctl[w, C_REPORT] = len(b)

    def report(self, w: int) -> dict:
        n = int(self.ctl[w, C_REPORT])
        if n <= 0:
            return {"errors": [], "warnings": []}
        try:
            return json.loads(bytes(self.reports[w, :n]))
        except ValueError:
            return {"errors": [], "warnings": []}

    def close(self) -> None:
        del self.glob, self.ctl, self.ports, self.stage, self.reports
        self.shm.close()
        if self.owner:
            self.shm.unlink()


def publish(sh: Shared, w: int, ports, cnt: np.ndarray, runner=None) -> None:
    """Worker ``w``'s figures into the block: each port's stats and loop counters ``cnt``
    (``F_*`` words per port id), and a stage runner's counters and drops."""
    for p in ports:
        s = p.stats()
        row = sh.ports[w, p.port_id]
        for i, k in enumerate(STATS):
            row[i] = s[k]
        c = cnt[p.port_id]
        for i, (_, f) in enumerate(LOOP):
            row[len(STATS) + i] = c[f]
    if runner is not None:
        k, d = len(runner.stage.counters), len(runner.stage.drop_reasons) + 1
        sh.stage[w, 0, :k] = runner.scnt[:k]
        sh.stage[w, 1, :d] = runner.drops[:d]


def attach_shared_xdp(vdevs: list[str], workers: int) -> tuple[list, dict[int, str]]:
    """For each ``net_af_xdp`` port the workers share (:func:`af_xdp_shares`), attach one XDP
    program with an XSKMAP entry per worker's queue: ``(programs, {index: xsk_map})``.  The
    programs go with their BPF links (close them after the workers stopped)."""
    progs, maps = [], {}
    try:
        for i, (iface, sq) in af_xdp_shares(vdevs, workers).items():
            from ...drivers.af_xdp.api.port import SharedXdpProgram
            progs.append(SharedXdpProgram(iface, workers, start_queue=sq))
            maps[i] = progs[-1].xsk_map
    except BaseException:
        for x in progs:
            x.close()
        raise
    return progs, maps


def worker_enter(sh: Shared, w: int) -> int:
    """The start of worker process ``w``: its pid and CPU (``w % ncpu``, pinned) in the block,
    ``SIGINT`` ignored (the parent decides when to stop).  Returns the parent's pid (a worker
    whose parent is gone stops by itself)."""
    ctl = sh.ctl[w]
    ctl[C_PID] = os.getpid()
    cpu = w % (os.cpu_count() or 1)
    try:
        os.sched_setaffinity(0, {cpu})
        ctl[C_CPU] = cpu
    except OSError:
        ctl[C_CPU] = -1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return os.getppid()


def tagged(items: list, w: int) -> list:
    """Errors or warnings of worker ``w``'s ports, each saying which worker."""
    return [dict(it, worker=w, line=f"worker {w}: {it['line']}") for it in items]


class WorkerGroup:
    """The parent's side of ``n`` worker processes over the block ``sh``: start them, see
    them running, report the ones that die, stop them, sum what they published."""

    def __init__(self, n: int, sh: Shared):
        self.n, self.sh = n, sh
        self.procs: list = []
        self._reported: set = set()

    def start_workers(self, target, args_of, name: str) -> None:
        """Spawn worker ``w`` as ``target(*args_of(w))``, process name ``name-w``."""
        ctx = multiprocessing.get_context("spawn")
        for w in range(self.n):
            p = ctx.Process(target=target, name=f"{name}-{w}", args=args_of(w))
            p.start()
            self.procs.append(p)

    def wait_running(self, timeout: float = 120.0) -> bool:
        """True once every worker is forwarding or has already finished cleanly (a short
        capture can end before the last worker starts); False if one failed, died, or the
        time ran out."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = [int(self.sh.ctl[w, C_STATE]) for w in range(self.n)]
            if all(s in (S_RUNNING, S_DONE) for s in st) and not any(
                    p.exitcode not in (None, 0) for p in self.procs):
                return True
            if any(s == S_FAILED for s in st) or any(
                    not p.is_alive() and st[w] != S_DONE for w, p in enumerate(self.procs)):
                return False
            time.sleep(0.02)
        return False

    def dead(self) -> list[tuple[int, int]]:
        """Workers that ended before being told to stop, newly seen: (worker, exit code).  A
        worker that finished cleanly at the end of its input (exit code 0, state done) did
        not die."""
        out = []
        for w, p in enumerate(self.procs):
            if w not in self._reported and not p.is_alive() and self.sh.glob[G_STOP] == 0:
                if p.exitcode == 0 and int(self.sh.ctl[w, C_STATE]) == S_DONE:
                    continue
                self._reported.add(w)
                out.append((w, p.exitcode))
        return out

    def all_ended(self) -> bool:
        return all(not p.is_alive() for p in self.procs)

    def stop(self, timeout: float = 30.0) -> None:
        self.sh.glob[G_STOP] = 1
        for p in self.procs:
            p.join(timeout)
        for p in self.procs:
            if p.is_alive():               # pragma: no cover - a worker stuck in a kernel
                p.kill()
                p.join()

    def state(self, w: int) -> str:
        """``starting``, ``running``, ``done``, ``failed`` or ``died`` (ended by a signal or
        a non-zero exit without saying it failed)."""
        s = STATE_NAMES.get(int(self.sh.ctl[w, C_STATE]), "?")
        p = self.procs[w] if w < len(self.procs) else None
        if p is not None and p.exitcode not in (None, 0) and s != "failed":
            s = "died"
        return s

    def _port(self, w: int, pid: int) -> dict:
        r = self.sh.ports[w, pid]
        d = {k: int(r[i]) for i, k in enumerate(STATS)}
        d.update({k: int(r[len(STATS) + i]) for i, (k, _) in enumerate(LOOP)})
        return d

    def port_sum(self, pid: int) -> dict:
        """Port ``pid``'s stats and loop counters summed over the workers."""
        per = [self._port(w, pid) for w in range(self.n)]
        return {k: sum(p[k] for p in per) for k in per[0]}

    def stage_sums(self, ncounters: int, ndrops: int) -> tuple[list, list]:
        """A stage's counters and drops (``ndrops`` reasons, then ``invalid``), summed."""
        c = [int(self.sh.stage[:, 0, i].sum()) for i in range(ncounters)]
        d = [int(self.sh.stage[:, 1, i].sum()) for i in range(ndrops + 1)]
        return c, d

    def in_use(self) -> int:
        return sum(int(self.sh.ctl[w, C_IN_USE]) for w in range(self.n))

    def failed_ports(self) -> bool:
        """True once a worker found one of its ports stopped by an error."""
        return any(int(self.sh.ctl[w, C_ERROR]) for w in range(self.n))

    def failures(self) -> list[dict]:
        """Every worker's port errors (``error`` events, ``worker`` added)."""
        return [e for w in range(self.n) for e in self.sh.report(w)["errors"]]

    def warnings(self) -> list[dict]:
        """Every worker's warnings (reported when it closed its ports)."""
        return [x for w in range(self.n) for x in self.sh.report(w)["warnings"]]
