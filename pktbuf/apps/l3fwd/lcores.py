"""Several lcores of ``--config`` as processes of their own (``pktbuf fwd --workers``' machinery,
:mod:`pktbuf.apps.fwd.workers_group`).

The ``i``-th lcore of ``--config`` (in ascending lcore id) becomes worker process ``i``, pinned
to CPU ``i % ncpu``, with its own pool, tables and copy of every port, which it opens as a
one-queue port: its share of the port.  Queue ``i`` of every port is the ``i``-th lcore's, so
every ``(port, queue, lcore)`` of the ``i``-th lcore must name queue ``i``: that lcore polls
its share of each port it lists and transmits to every port through its own share, as DPDK's
l3fwd gives lcore ``i`` Tx queue ``i`` of every port.  A share is:

* ``net_af_xdp``: queue ``start_queue + i`` of the interface, under one XDP program the
  parent attaches (an XSKMAP entry per queue; ``queue_count`` left out, or equal to the number
  of lcores).
* ``net_af_packet``: one socket in a ``PACKET_FANOUT`` group (``qpairs`` left out, or equal to
  the number of lcores): the kernel spreads the interface's frames over the lcores by flow, so
  every lcore must poll such a port (a member that never reads would lose its flows).
* ``net_pcap`` and ``net_memif`` whose device string holds ``{worker}``: the lcore's own files
  or socket (``{worker}`` is replaced by ``i``).

Where a port cannot be split -- a ``net_pcap`` port without ``{worker}`` (one capture file
written by several processes), ``net_ring`` (in-process), a config of another shape -- the
lcores stay threads of one process, as DPDK's own lcores are threads sharing every port; the
command says why.

The parent reads the options and routes, attaches the shared XDP programs, and opens lcore 0's
ports once itself (``Initializing port`` lines, the ``--parse-ptype`` refusal, the stage's loop
compiled or loaded), so the processes only load compiled code.  Then it starts them, prints
``L3FWD: entering main loop`` once all forward, and watches: an lcore process that dies is
reported (``L3FWD: lcore C (pid P) died ...``) while the others go on, and the command exits
1.  SIGINT/SIGTERM (or ``--seconds``, or every Rx queue at its end) stops all of them; each
closes its ports and reports the mbufs it did not get back.  Statistics, the stage's counters
and ``--record-core-cycles``' busy cycles are summed over the processes through the shared
block.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from ...errors import PktbufError
from ..fwd.workers_group import (C_AUDIT, C_ERROR, C_HEARTBEAT, C_IN_USE, C_PID, C_POOL,
                                 C_PORTS, C_STATE, G_STOP, S_DONE, S_FAILED, S_RUNNING, Shared,
                                 WorkerGroup, attach_shared_xdp, publish, split_vdevs,
                                 worker_enter)
from ..stage.abi import R_ALL_EOF, R_PORT_ERROR
from . import kernels as K
from . import options as O
from .setup import (EXIT_FAILURE, EXIT_OK, SLICE, Board, Failure, cycles_text, fill_eth,
                    read_routes, summary_lines)

__all__ = ["why_threads", "process_vdevs", "run_processes", "lcore_main"]

QUEUE_ARGS = {"net_af_xdp": "queue_count", "net_af_packet": "qpairs"}
PER_WORKER = ("net_pcap", "net_memif")


def _driver(dev: str):
    from ...drivers.common.api.devargs import parse_devargs
    from ...ethdev.api import driver_of
    name, args = parse_devargs(dev)
    return name, driver_of(name), args


def process_vdevs(o: O.Options) -> list[str]:
    """The device strings the lcore processes split: a ``queue_count`` (AF_XDP) or ``qpairs``
    (AF_PACKET) equal to the number of lcores -- the threads' spelling -- left out (each
    process opens one queue)."""
    n = len(o.lcores())
    out = []
    for v in o.vdevs:
        name, drv, args = _driver(v)
        key = QUEUE_ARGS.get(drv)
        if key is not None and key in args and args[key].strip() == str(n):
            v = ",".join([name] + [f"{k}={x}" for k, x in args.pairs if k != key])
        out.append(v)
    return out


def why_threads(o: O.Options) -> str | None:
    """None when the lcores can be processes; else why they stay threads."""
    lcores = o.lcores()
    n = len(lcores)
    drivers = {}
    try:
        for i, v in enumerate(process_vdevs(o)):
            name, drv, args = _driver(v)
            drivers[i] = drv
            if drv in QUEUE_ARGS:
                key = QUEUE_ARGS[drv]
                if key in args and args[key].strip() != "1":
                    return (f"{name}: {key}={args[key]} (as processes each lcore opens one "
                            f"queue: leave {key} out or give {n})")
            elif drv in PER_WORKER:
                if "{worker}" not in v:
                    what = "set of files" if drv == "net_pcap" else "socket"
                    return (f"{name} ({drv}) is one {what} all lcores would share; put "
                            "{worker} in its device string to give each lcore process its own")
            else:
                return f"{name} ({drv}) cannot be split across processes"
    except PktbufError as e:
        return str(e)
    for port, queue, lc in o.config:
        i = lcores.index(lc)
        if queue != i:
            return (f"lcore {lc} polls queue {queue} of port {port}; as processes the "
                    f"lcore in position {i} owns queue {i} of every port")
    for pid, drv in drivers.items():
        if drv == "net_af_packet":
            polling = {lc for p, _, lc in o.config if p == pid}
            if polling and len(polling) != n:
                return (f"port {pid} (net_af_packet) is polled by lcores "
                        f"{sorted(polling)} only; its fanout group would give the others' "
                        "share of its flows to lcores that never read them")
    return None


def _streams(o: O.Options, i: int) -> list:
    """Lcore ``i``'s streams in its own process: queue 0 of its share of each port."""
    lc = o.lcores()[i]
    return [(p, 0, p) for p, _, c in o.config if c == lc]


def lcore_main(w: int, shm_name: str, n: int, o: O.Options, vdevs: list) -> None:
    """Lcore process ``w``: its tables, pool and ports, the l3fwd stage over its streams until
    told to stop, then its ports closed and its pool accounted for."""
    from ..stage.api import StageRunner
    sh = Shared(n, shm_name)
    ctl = sh.ctl[w]
    parent = worker_enter(sh, w)
    term = []
    signal.signal(signal.SIGTERM, lambda s, f: term.append(s))   # a clean stop, as G_STOP
    bd = None
    try:
        v4, v6 = read_routes(o)
        bd = Board(o, v4, v6, 1)
        bd.open(vdevs, lambda *a: None)
        fill_eth(bd.eth, o, bd.ports)
        r = StageRunner(bd.ports, bd.stages[0], _streams(o, w), lcore=0, txq=0,
                        kinds=bd.kinds, burst=o.burst, idle_backoff=o.idle_backoff,
                        record_cycles=o.record_cycles)
        ports = [bd.ports[pid] for pid in bd.ports.ids()]
        ctl[C_PORTS] = len(ports)
        ctl[C_STATE] = S_RUNNING
        while sh.glob[G_STOP] == 0 and not term and os.getppid() == parent:
            rc = r.run(SLICE)
            publish(sh, w, ports, r.cnt, r)
            if rc == R_PORT_ERROR:
                ctl[C_ERROR] = 1
                break
            if rc == R_ALL_EOF:
                break
            ctl[C_HEARTBEAT] += 1
        publish(sh, w, ports, r.cnt, r)
    except BaseException as e:                      # reported through the state word
        ctl[C_STATE] = S_FAILED
        print(f"pktbuf l3fwd: lcore process {w}: {type(e).__name__}: {e}", file=sys.stderr,
              flush=True)
    finally:
        if bd is not None:
            try:
                bd.close_ports()
                ctl[C_POOL] = bd.pool.n
                ctl[C_IN_USE] = bd.pool.in_use_count
                ctl[C_AUDIT] = bd.pool.audit()
            except PktbufError as e:
                ctl[C_ERROR] = 1
                print(f"pktbuf l3fwd: lcore process {w}: {e}", file=sys.stderr, flush=True)
            bd.close_pools()
        if ctl[C_STATE] != S_FAILED:
            ctl[C_STATE] = S_DONE
        sh.close()


def _warm(o, v4, v6, vdevs, say, sh) -> tuple[int | None, list]:
    """Open lcore 0's ports here as its process will (announcing them, compiling or loading
    everything it runs), check ``--parse-ptype``, close them.  Returns (the port that cannot
    classify packets or None, the port ids)."""
    bd = Board(o, v4, v6, 1)
    try:
        bd.open(vdevs, say)
        bad = bd.ptype_refusal()
        ids = sorted(bd.ports.ids())
        if bad is None:
            for port, _, _ in o.config:
                if port not in ids:
                    raise Failure(f"port {port} is not present on the board")
            from ..stage.api import StageRunner
            r = StageRunner(bd.ports, bd.stages[0], [], kinds=bd.kinds,
                            record_cycles=o.record_cycles)
            bd.stages[0].compiled(lambda: r.run(0.0))
            publish(sh, 0, [bd.ports[p] for p in ids], r.cnt, r)
            sh.ports[:] = 0
            sh.stage[:] = 0
        return bad, ids
    finally:
        bd.close_ports()
        bd.close_pools()


def run_processes(o: O.Options, v4, v6, say, stop, seconds, report) -> int:
    """The lcores of ``o`` as processes (:func:`why_threads` said they can be); the exit
    status."""
    err = sys.stderr
    lcores = o.lcores()
    n = len(lcores)
    progs, sh, grp = [], None, None
    status = EXIT_OK
    ids: list = []
    try:
        vd = process_vdevs(o)
        progs, maps = attach_shared_xdp(vd, n)
        split = split_vdevs(vd, n, xsk_maps=maps)
        sh = Shared(n)
        bad, ids = _warm(o, v4, v6, split[0], say, sh)
        if bad is not None:
            say(f"port {bad} cannot parse packet type, please add --parse-ptype")
            print("EAL: Error - exit with code: 1\n  Cause: ptype check fails", file=err)
            return EXIT_FAILURE
        hz = None
        if o.record_cycles:
            from ..fwd.forwarder import tsc_hz
            hz = tsc_hz()
        grp = WorkerGroup(n, sh)
        grp.start_workers(lcore_main, lambda w: (w, sh.name, n, o, split[w]),
                          "pktbuf-l3fwd-lcore")
        if not grp.wait_running():
            for w in range(n):
                say(f"L3FWD: lcore {lcores[w]} process: {grp.state(w)}")
            print("EAL: Error - exit with code: 1\n  Cause: an lcore process did not start",
                  file=err)
            return EXIT_FAILURE
        say("L3FWD: lcores " + ", ".join(f"{lc} (pid {int(sh.ctl[w, C_PID])})"
                                         for w, lc in enumerate(lcores)) + " as processes")
        say("L3FWD: entering main loop")
        deadline = None if seconds is None else time.monotonic() + seconds
        while not stop.is_set():
            for w, code in grp.dead():
                say(f"L3FWD: lcore {lcores[w]} (pid {int(sh.ctl[w, C_PID])}) died "
                    f"(exit code {code}); {n - len(grp._reported)} still forwarding")
                status = EXIT_FAILURE
            if grp.failed_ports():
                print("pktbuf l3fwd: a port stopped with an error", file=err)
                status = EXIT_FAILURE
                break
            if grp.all_ended():
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            if report is not None and report.is_set():
                report.clear()
                if hz is not None:
                    say(_cycles(grp, ids, hz))
            time.sleep(0.02)
        grp.stop()
        for w in range(n):
            st = grp.state(w)
            if st != "done":
                say(f"L3FWD: lcore {lcores[w]} process: {st} (exit code "
                    f"{grp.procs[w].exitcode})")
                status = EXIT_FAILURE
            lost = int(sh.ctl[w, C_IN_USE])
            if lost:
                print(f"pktbuf l3fwd: lcore {lcores[w]}: {lost} mbufs not returned to its "
                      "pool", file=err)
                status = EXIT_FAILURE
        if grp.failed_ports():
            status = EXIT_FAILURE
        _summary(say, grp, ids)
        if hz is not None:
            say(_cycles(grp, ids, hz))
        return status
    except Failure as e:
        print(f"EAL: Error - exit with code: 1\n  Cause: {e}", file=err)
        return EXIT_FAILURE
    except PktbufError as e:
        print(f"pktbuf l3fwd: {e}", file=err)
        return EXIT_FAILURE
    finally:
        if grp is not None:
            grp.stop()
        for x in progs:
            x.close()
        for pid in ids:
            say(f"Closing port {pid}... Done")
        if sh is not None:
            sh.close()


def _summary(say, grp: WorkerGroup, ids) -> None:
    rows = {}
    for pid in ids:
        s = grp.port_sum(pid)
        rows[pid] = (s["rx"], s["tx"], s["tx_dropped"], s["stage_dropped"])
    c, d = grp.stage_sums(len(K.COUNTERS), len(K.DROP_REASONS))
    drops = dict(zip(K.DROP_REASONS, d))
    drops["invalid"] = d[-1]
    for line in summary_lines(rows, dict(zip(K.COUNTERS, c)), drops):
        say(line)


def _cycles(grp: WorkerGroup, ids, hz: float) -> str:
    cyc = sum(grp.port_sum(pid)["busy_cycles"] for pid in ids)
    pkts = sum(grp.port_sum(pid)["rx"] for pid in ids)
    return cycles_text(cyc, pkts, hz)
