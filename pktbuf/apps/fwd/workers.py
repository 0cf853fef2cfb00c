"""``pktbuf fwd --workers N``: one pinned process per worker, each owning its own queues.

::

    pktbuf fwd --workers 2 --vdev net_af_packet0,iface=veth0 --vdev net_af_packet1,iface=veth1

Each worker is a process of its own (started with ``spawn``, pinned to CPU ``w % ncpu``) that
runs :class:`~pktbuf.apps.fwd.forwarder.Forwarder` over its own copy of the ports, with its own domain and
pool: nothing is shared between workers but a small statistics block, so a worker that dies
takes only its own packets with it and the others keep forwarding.  How a port is split:

* ``net_af_packet``: every worker's sockets join one ``PACKET_FANOUT`` group (an id chosen
  here unless the device string gives ``fanout_id``; ``fanout_mode`` as given, default
  ``hash``): the kernel spreads the interface's traffic over the workers by its flow hash, so
  a flow stays on one worker.
* ``net_af_xdp``: worker ``w`` owns queue ``start_queue + w`` (``queue_count`` other than 1 is
  refused, and so is an interface with fewer than ``start_queue + N`` Rx queues).  Only one XDP
  program can be attached to an interface, so the parent attaches it before anything starts
  (:class:`~pktbuf.drivers.af_xdp.api.port.SharedXdpProgram`, an XSKMAP entry per queue) and each worker's
  port joins it with ``xsk_map=<parent pid>:<map fd>`` (``pidfd_getfd``), putting its socket
  at its queue's key.  The program goes with the parent's BPF link (at the end, or when the
  parent is killed; nothing is pinned); a worker that dies leaves the map with its socket (the
  kernel removes it), and its queue's frames then go on to the kernel's stack.  The NIC's RSS
  decides which queue, so which worker, a flow goes to.
* ``{worker}`` in a device string is replaced by the worker's number, which gives each worker
  its own capture files (``tx_pcap=out-{worker}.pcap``), memif sockets or ids.  A ``net_pcap``
  or ``net_memif`` port without it would have every worker read or write the same file or
  socket, and is refused.  ``net_ring`` ports are in-process, one per worker anyway.

The parent warms the compile cache before any worker starts (it opens the ports once itself,
compiles the loop and closes them), so the workers only load compiled code.  It then watches
them: statistics per worker and summed per port (the telemetry socket shows each worker as one
queue of the port), a worker that dies is reported with its exit status while the rest go on,
and at the end each worker closes its ports and reports how many of its mbufs were not
returned and what its pool's audit counted.  A worker whose parent is gone stops by itself.
The command line's side (tables, JSON events, telemetry) is :mod:`.fwd_workers_main`.
"""
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
    from ...ethdev.api import driver_of
    from ...drivers.common.api.port import arg_int
    from ...errors import InvalidArgument
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
    from ...ethdev.api import driver_of
    from ...errors import InvalidArgument
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
                s += f",fanout_id={fanout_id}"
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


def _publish(sh: Shared, w: int, fw) -> None:
    for p in fw.ports:
        s = p.stats()
        row = sh.ports[w, p.port_id]
        for i, k in enumerate(STATS):
            row[i] = s[k]
        c = fw.cnt[p.port_id]
        for i, (_, f) in enumerate(LOOP):
            row[len(STATS) + i] = c[f]
    r = fw.runner
    if r is not None:
        k, d = len(fw.stage.counters), len(fw.stage.drop_reasons) + 1
        sh.stage[w, 0, :k] = r.scnt[:k]
        sh.stage[w, 1, :d] = r.drops[:d]


def worker_main(w: int, shm_name: str, workers: int, vdevs: list[str], opts: dict) -> None:
    """One worker process: pin, open its ports, forward until told to stop, close, report."""
    from .forwarder import SLICE, Forwarder
    from .loop import R_ALL_EOF, R_PORT_ERROR
    sh = Shared(workers, shm_name)
    ctl = sh.ctl[w]
    ctl[C_PID] = os.getpid()
    cpu = w % (os.cpu_count() or 1)
    try:
        os.sched_setaffinity(0, {cpu})
        ctl[C_CPU] = cpu
    except OSError:
        ctl[C_CPU] = -1
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the parent decides when to stop
    parent = os.getppid()
    fw = None
    try:
        stage = None
        if opts["stage"] is not None:          # this worker's own state: made here
            from ..stage.api import Stage
            stage = Stage.from_spec(opts["stage"], worker=w)
        fw = Forwarder(vdevs, opts["mode"], burst=opts["burst"], txpkts=opts["txpkts"],
                       nb_mbufs=opts["nb_mbufs"], mbuf_size=opts["mbuf_size"],
                       peers=opts["peers"], record_cycles=opts["record_cycles"],
                       idle_backoff=opts["idle_backoff"], stage=stage)
        ctl[C_PORTS] = len(fw.ports)
        ctl[C_STATE] = S_RUNNING
        eof = False
        while sh.glob[G_STOP] == 0 and not eof and os.getppid() == parent:
            r = fw.run_slice(SLICE)
            eof = r == R_ALL_EOF
            _publish(sh, w, fw)
            if r == R_PORT_ERROR:              # the parent reports it and stops the others
                sh.put_report(w, _tagged(fw.failures(), w), [])
                ctl[C_ERROR] = 1
                break
            ctl[C_HEARTBEAT] += 1
        _publish(sh, w, fw)
    except BaseException as e:                         # reported through the state word
        ctl[C_STATE] = S_FAILED
        import sys
        print(f"pktbuf fwd: worker {w}: {e}", file=sys.stderr, flush=True)
    finally:
        if fw is not None:
            errs, warns = fw.failures(), fw.warnings()
            ctl[C_POOL] = fw.pool.n
            ctl[C_IN_USE] = fw.close()
            ctl[C_AUDIT] = fw.audited
            errs += fw.close_errors
            if errs:
                ctl[C_ERROR] = 1
            sh.put_report(w, _tagged(errs, w), _tagged(warns, w))
        if ctl[C_STATE] != S_FAILED:
            ctl[C_STATE] = S_DONE
        sh.close()


def _tagged(items: list, w: int) -> list:
    """Errors or warnings of worker ``w``'s ports, each saying which worker."""
    return [dict(it, worker=w, line=f"worker {w}: {it['line']}") for it in items]


class Workers:
    """The parent's side: start, watch, stop and account for the worker processes."""

    def __init__(self, vdevs, mode, workers: int, *, burst=32, txpkts=64, nb_mbufs=16384,
                 mbuf_size=2176, peers=None, record_cycles=False, idle_backoff=True,
                 stage: str | None = None):
        """``stage``: a ``--stage`` spec (``module:function`` or ``file.py:function``): made
        here (``worker=None``) to check and compile it, and by each worker for itself
        (``worker=w``): the workers' states are their own unless the spec's factory shares
        one (docs/stages.md)."""
        from ...errors import InvalidArgument
        if not isinstance(workers, int) or not 1 <= workers <= 64:
            raise InvalidArgument("workers must be 1 .. 64")
        self.stage = None
        if stage is not None:
            from ..stage.api import Stage, StageError
            self.stage = Stage.from_spec(stage)
            if len(self.stage.counters) > STAGE_WORDS or \
                    len(self.stage.drop_reasons) + 1 > STAGE_WORDS:
                raise StageError(f"the stage {self.stage.name}: with --workers at most "
                                 f"{STAGE_WORDS} counters and {STAGE_WORDS - 1} drop reasons")
        self.n = workers
        self.mode = mode
        self.xdp: list = []                  # the XDP programs the workers share
        vdevs = list(vdevs)
        try:
            maps = {}
            for i, (iface, sq) in af_xdp_shares(vdevs, workers).items():
                from ...drivers.af_xdp.api.port import SharedXdpProgram
                self.xdp.append(SharedXdpProgram(iface, workers, start_queue=sq))
                maps[i] = self.xdp[-1].xsk_map
            self.split = split_vdevs(vdevs, workers, xsk_maps=maps)
        except BaseException:
            self.close_xdp()
            raise
        self.opts = {"mode": mode, "burst": burst, "txpkts": txpkts, "nb_mbufs": nb_mbufs,
                     "mbuf_size": mbuf_size, "peers": dict(peers or {}),
                     "record_cycles": record_cycles, "idle_backoff": idle_backoff,
                     "stage": stage}
        self.sh = Shared(workers)
        self.procs: list = []
        self.names: list = []
        self._reported: set = set()

    def warm(self) -> list[dict]:
        """Open worker 0's ports here, compile the loop, close them: the compile cache is then
        warm before any worker starts (processes compiling the same cached function at once
        can corrupt it).  Returns the ports' descriptions (id, name, driver)."""
        from .forwarder import Forwarder
        o = self.opts
        fw = Forwarder(self.split[0], o["mode"], burst=o["burst"], txpkts=o["txpkts"],
                       nb_mbufs=o["nb_mbufs"], mbuf_size=o["mbuf_size"], peers=o["peers"],
                       record_cycles=o["record_cycles"], idle_backoff=o["idle_backoff"],
                       stage=self.stage)
        try:
            fw.warm()
            fw.run_slice(0.0)
            self.names = [{"port_id": p.port_id, "name": p.name, "driver": p.driver}
                          for p in fw.ports]
            self.streams = fw.streams.tolist()
            _publish(self.sh, 0, fw)          # compiles the stats path too; zeroed below
        finally:
            fw.close()
        self.sh.ports[:] = 0
        self.sh.stage[:] = 0
        return self.names

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        for w in range(self.n):
            p = ctx.Process(target=worker_main, name=f"pktbuf-fwd-worker-{w}",
                            args=(w, self.sh.name, self.n, self.split[w], self.opts))
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

    # -- statistics --------------------------------------------------------------------------
    def port_ids(self) -> list[int]:
        return [d["port_id"] for d in self.names]

    def worker_rows(self) -> list[dict]:
        """Per worker: state, pid, cpu, exit code, mbufs in use at close, its pool's size and
        the free mbufs its audit counted after the ports closed (equal: the pool is whole; -1:
        the audit failed), and per port the loop's counters and the port's stats."""
        out = []
        for w in range(self.n):
            c = self.sh.ctl[w]
            p = self.procs[w] if w < len(self.procs) else None
            row = {"worker": w, "state": STATE_NAMES.get(int(c[C_STATE]), "?"),
                   "pid": int(c[C_PID]), "cpu": int(c[C_CPU]),
                   "exitcode": None if p is None else p.exitcode,
                   "mbufs_in_use_at_close": int(c[C_IN_USE]),
                   "pool_size": int(c[C_POOL]), "pool_audit": int(c[C_AUDIT]), "ports": []}
            if p is not None and p.exitcode not in (None, 0) and row["state"] != "failed":
                row["state"] = "died"
            for pid in self.port_ids():
                row["ports"].append(dict(port_id=pid, **self._port(w, pid)))
            out.append(row)
        return out

    def _port(self, w: int, pid: int) -> dict:
        r = self.sh.ports[w, pid]
        d = {k: int(r[i]) for i, k in enumerate(STATS)}
        d.update({k: int(r[len(STATS) + i]) for i, (k, _) in enumerate(LOOP)})
        return d

    def port_stats(self, pid: int) -> dict:
        """``rte_eth_stats`` of port ``pid`` summed over the workers, each worker one queue."""
        per = [self._port(w, pid) for w in range(self.n)]
        s = {k: sum(p[k] for p in per) for k in STATS}
        s.update(q_ipackets=[p["ipackets"] for p in per], q_opackets=[p["opackets"] for p in per],
                 q_ibytes=[p["ibytes"] for p in per], q_obytes=[p["obytes"] for p in per],
                 q_errors=[p["ierrors"] for p in per])
        return s

    def rows(self) -> list[dict]:
        """``Forwarder.rows()``'s shape, summed over the workers (for the end tables)."""
        out = []
        for d in self.names:
            per = [self._port(w, d["port_id"]) for w in range(self.n)]
            r = dict(d)
            for k in ("rx", "rx_bytes", "tx", "tx_dropped", "tx_bytes", "busy_cycles"):
                r[k] = sum(p[k] for p in per)
            if self.stage is not None:
                r["stage_dropped"] = sum(p["stage_dropped"] for p in per)
            r["rx_dropped"] = sum(p["imissed"] for p in per)
            r["stats"] = self.port_stats(d["port_id"])
            out.append(r)
        return out

    def stage_stats(self, w: int | None = None) -> dict | None:
        """The stage's counters and drops, summed over the workers (``w``: one worker's)."""
        if self.stage is None:
            return None
        from .forwarder import stage_report
        ws = range(self.n) if w is None else [w]
        k, d = len(self.stage.counters), len(self.stage.drop_reasons)
        c = [sum(int(self.sh.stage[x, 0, i]) for x in ws) for i in range(k)]
        dr = [sum(int(self.sh.stage[x, 1, i]) for x in ws) for i in range(d + 1)]
        drops = dict(zip(self.stage.drop_reasons, dr))
        drops["invalid"] = dr[-1]
        return stage_report(self.stage.name, dict(zip(self.stage.counters, c)), drops)

    def stage_dropped(self, pid: int) -> int:
        return sum(self._port(w, pid)["stage_dropped"] for w in range(self.n))

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

    def close_xdp(self) -> None:
        """Detach the shared XDP programs (after the workers stopped)."""
        for x in self.xdp:
            x.close()
        self.xdp = []

    def close(self) -> None:
        self.sh.close()
        self.close_xdp()
