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
The command line's side (tables, JSON events, telemetry) is :mod:`.workers_main`; the
machinery ``pktbuf l3fwd``'s lcore processes share with these workers (the split, the
statistics block, the processes' start and watch) is :mod:`.workers_group`.
"""
from __future__ import annotations

import os

from .workers_group import (C_AUDIT, C_CPU, C_ERROR, C_HEARTBEAT, C_IN_USE, C_PID, C_POOL,
                            C_PORTS, C_STATE, G_STOP, STAGE_WORDS, STATS, S_DONE, S_FAILED,
                            S_RUNNING, Shared, WorkerGroup, af_xdp_shares, attach_shared_xdp,
                            publish, split_vdevs, tagged, worker_enter)

__all__ = ["C_PID", "STAGE_WORDS", "Shared", "Workers", "af_xdp_shares", "split_vdevs",
           "worker_main"]


def _publish(sh: Shared, w: int, fw) -> None:
    publish(sh, w, fw.ports, fw.cnt, fw.runner)


def worker_main(w: int, shm_name: str, workers: int, vdevs: list[str], opts: dict) -> None:
    """One worker process: pin, open its ports, forward until told to stop, close, report."""
    from .forwarder import SLICE, Forwarder
    from .loop import R_ALL_EOF, R_PORT_ERROR
    sh = Shared(workers, shm_name)
    ctl = sh.ctl[w]
    parent = worker_enter(sh, w)
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
                sh.put_report(w, tagged(fw.failures(), w), [])
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
            sh.put_report(w, tagged(errs, w), tagged(warns, w))
        if ctl[C_STATE] != S_FAILED:
            ctl[C_STATE] = S_DONE
        sh.close()


class Workers(WorkerGroup):
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
            self.xdp, maps = attach_shared_xdp(vdevs, workers)
            self.split = split_vdevs(vdevs, workers, xsk_maps=maps)
        except BaseException:
            self.close_xdp()
            raise
        self.opts = {"mode": mode, "burst": burst, "txpkts": txpkts, "nb_mbufs": nb_mbufs,
                     "mbuf_size": mbuf_size, "peers": dict(peers or {}),
                     "record_cycles": record_cycles, "idle_backoff": idle_backoff,
                     "stage": stage}
        WorkerGroup.__init__(self, workers, Shared(workers))
        self.names: list = []

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
        self.start_workers(worker_main, lambda w: (w, self.sh.name, self.n, self.split[w],
                                                   self.opts), "pktbuf-fwd-worker")

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
            row = {"worker": w, "state": self.state(w),
                   "pid": int(c[C_PID]), "cpu": int(c[C_CPU]),
                   "exitcode": None if p is None else p.exitcode,
                   "mbufs_in_use_at_close": int(c[C_IN_USE]),
                   "pool_size": int(c[C_POOL]), "pool_audit": int(c[C_AUDIT]), "ports": []}
            for pid in self.port_ids():
                row["ports"].append(dict(port_id=pid, **self._port(w, pid)))
            out.append(row)
        return out

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

    def close_xdp(self) -> None:
        """Detach the shared XDP programs (after the workers stopped)."""
        for x in self.xdp:
            x.close()
        self.xdp = []

    def close(self) -> None:
        self.sh.close()
        self.close_xdp()
