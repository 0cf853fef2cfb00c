"""The run of ``pktbuf l3fwd``: options, tables, ports, the stage loop per lcore, the stop.

In l3fwd's order (``main.c``, ``main``): parse the command line; read the rule files (or take
the defaults); open the ports (``--vdev``, in order: port ids 0, 1, ...); refuse to go on
without ``--parse-ptype`` when a port cannot classify packets -- every pktbuf port type, as
net_pcap in DPDK (``port N cannot parse packet type, please add --parse-ptype``, status 1;
the Tx capture files exist by then, holding their header only, as DPDK's do); fill the tables,
skipping routes to ports outside ``-p``; then forward on every ``(port, queue, lcore)`` of
``--config``.  Several lcores become processes of their own where every port can be split
across processes (:mod:`.lcores`: AF_XDP queues, AF_PACKET fanout, ``{worker}`` devices);
otherwise -- and with one lcore -- they are threads of this process (one per lcore, each Rx
queue polled by its lcore, Tx on queue ``i`` of every port for the ``i``-th lcore), and the
command says why.  The tables, pools and ports of a process: :mod:`.setup`.

With EAL's ``-l`` / ``-c`` (:mod:`.placement`) lcore N forwards on CPU N only and the ports'
control threads start on the other CPUs, as EAL places its own.

The stage (:func:`pktbuf.apps.l3fwd.kernels.l3fwd_stage`) and its loop are compiled -- or
loaded from the cache -- before any port opens: a failure is reported then.

It stops on SIGINT or SIGTERM (exit status 0, every port closed, so every capture file is
complete), and -- unlike DPDK's l3fwd, which polls on -- once every Rx queue is at the end of
its input (a capture file without ``infinite_rx``), as ``pktbuf fwd`` does; ``--seconds`` of
:func:`run` bounds it too.  A port error stops it with status 1.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np

from ...errors import PktbufError
from ..stage.abi import F_RX, F_STAGE_DROP, F_TX, F_TX_DROP, R_ALL_EOF, R_PORT_ERROR
from ..stage.api import StageRunner
from . import lcores as L
from . import options as O
from . import placement as PL
from . import routes as R
from .setup import (EXIT_FAILURE, EXIT_OK, EXIT_USAGE, SLICE, Board, Failure, Tables, em4_key,
                    em6_key, cycles_text, fill_eth, make_cfg, make_state, pcap_as_dpdk,
                    read_routes, summary_lines)

__all__ = ["main", "run", "make_state", "make_cfg", "Tables", "em4_key", "em6_key",
           "pcap_as_dpdk", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE"]


def run(argv, *, out=None, seconds: float | None = None, stop: threading.Event | None = None,
        report: threading.Event | None = None):
    """Run ``pktbuf l3fwd`` with ``argv`` (the words after ``l3fwd``); returns the exit
    status.  ``stop``: an event that ends the run (the signal handlers set it); ``report``:
    with ``--record-core-cycles``, print the cycle line so far when it is set (SIGUSR1),
    then clear it."""
    out = out or sys.stdout
    err = sys.stderr

    def say(*a):
        print(*a, file=out, flush=True)

    try:
        o = O.parse(argv)
    except O.UsageError as e:
        print(f"pktbuf l3fwd: {e}", file=err)
        return EXIT_USAGE
    if not o.vdevs:
        print("pktbuf l3fwd: no ports: give --vdev DEV", file=err)
        return EXIT_USAGE
    if not o.lookup_given:
        print("Neither ACL, LPM, EM, or FIB selected, defaulting to LPM", file=err)
    if o.parse_ptype:
        say("soft parse-ptype is enabled")
    try:
        v4, v6 = read_routes(o)
    except R.RouteFileError as e:
        print(f"L3FWD: {e}", file=err)
        print("EAL: Error - exit with code: 1\n  Cause: Failed to add rules", file=err)
        return EXIT_FAILURE
    lcores = o.lcores()
    if o.cpus is not None:
        bad = PL.unavailable(o.cpus, os.sched_getaffinity(0))
        if bad:
            print(f"EAL: Error - exit with code: 1\n  Cause: lcore {bad[0]} unavailable: CPU "
                  f"{bad[0]} is not in this process's CPU set", file=err)
            return EXIT_FAILURE
        off = [lc for lc in lcores if lc not in o.cpus]
        if off:
            say(f"error: lcore {off[0]} is not enabled in lcore mask")
            print("EAL: Error - exit with code: 1\n  Cause: check_lcore_params failed",
                  file=err)
            return EXIT_FAILURE
    stop = stop or threading.Event()
    if len(lcores) > 1:
        why = L.why_threads(o)
        if why is None:
            return L.run_processes(o, v4, v6, say, stop, seconds, report)
        say(f"L3FWD: lcores {','.join(map(str, lcores))} as threads of one process: {why}")
    vdevs = [v.replace("{worker}", "0") for v in o.vdevs]
    bd, runners = None, []
    affinity = os.sched_getaffinity(0)
    try:
        if o.cpus is not None:      # the ports' control threads start on the other CPUs
            os.sched_setaffinity(0, PL.control_cpus(o.cpus, affinity))
        bd = Board(o, v4, v6, len(lcores))
        bd.open(vdevs, say)
        ports = bd.ports
        bad = bd.ptype_refusal()
        if bad is not None:
            say(f"port {bad} cannot parse packet type, please add --parse-ptype")
            print("EAL: Error - exit with code: 1\n  Cause: ptype check fails", file=err)
            return EXIT_FAILURE
        ids = set(ports.ids())
        for port, queue, _ in o.config:
            if port not in ids:
                raise Failure(f"port {port} is not present on the board")
            if queue >= ports[port].nb_rx_queues:
                raise Failure(f"Cannot configure device: port {port} has "
                              f"{ports[port].nb_rx_queues} Rx queue(s), --config uses "
                              f"queue {queue}")
        for pid in ids:
            if (o.portmask >> pid) & 1 and ports[pid].nb_tx_queues < len(lcores):
                raise Failure(f"Cannot configure device: port {pid} has "
                              f"{ports[pid].nb_tx_queues} Tx queue(s), {len(lcores)} lcores "
                              "need one each")
        fill_eth(bd.eth, o, ports)
        for i, lc in enumerate(lcores):
            streams = [(p, q, p) for p, q, c in o.config if c == lc]
            runners.append(StageRunner(ports, bd.stages[i], streams, lcore=i, txq=i,
                                       kinds=bd.kinds, burst=o.burst,
                                       idle_backoff=o.idle_backoff,
                                       record_cycles=o.record_cycles))
        hz = None
        if o.record_cycles:
            from ..fwd.forwarder import tsc_hz
            hz = tsc_hz()                   # measured now: a report must not pause the loop

        def tick():
            if report is not None and report.is_set():
                report.clear()
                if hz is not None:
                    say(cycles_line(runners, hz))

        say("L3FWD: entering main loop")
        status = _forward(runners, stop, seconds, tick,
                          cpus=lcores if o.cpus is not None else None)
        _summary(say, runners, ports)
        if hz is not None:
            say(cycles_line(runners, hz))
        return status
    except Failure as e:
        print(f"EAL: Error - exit with code: 1\n  Cause: {e}", file=err)
        return EXIT_FAILURE
    except PktbufError as e:
        print(f"pktbuf l3fwd: {e}", file=err)
        return EXIT_FAILURE
    finally:
        if bd is not None:
            bd.close_ports(say)
            bd.close_pools()
        if o.cpus is not None:
            os.sched_setaffinity(0, affinity)


def _forward(runners, stop, seconds, tick=lambda: None, cpus=None) -> int:
    """Run every runner (one: in this thread; several: a thread each) until ``stop``, the
    deadline, an error or the end of the input.  ``cpus``: runner i's thread runs on
    ``cpus[i]`` only (``-l`` / ``-c``)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    status = [EXIT_OK] * len(runners)

    def one(i, r):
        if cpus is not None:
            PL.pin(cpus[i])
        while not stop.is_set():
            rc = r.run(SLICE)
            if len(runners) == 1:
                tick()
            if rc == R_PORT_ERROR:
                status[i] = EXIT_FAILURE
                stop.set()
                return
            if rc == R_ALL_EOF:
                return
            if deadline is not None and time.monotonic() >= deadline:
                return

    if len(runners) == 1:
        one(0, runners[0])
    else:
        ts = [threading.Thread(target=one, args=(i, r), daemon=True)
              for i, r in enumerate(runners)]
        for t in ts:
            t.start()
        while any(t.is_alive() for t in ts):
            for t in ts:
                t.join(0.1)
            tick()
    return max(status)


def _summary(say, runners, ports):
    tot = np.zeros_like(runners[0].cnt)
    for r in runners:
        tot += r.cnt
    drops, counters = {}, {}
    for r in runners:
        for k, v in r.drop_counts().items():
            drops[k] = drops.get(k, 0) + v
        for k, v in r.counters().items():
            counters[k] = counters.get(k, 0) + v
    rows = {pid: (int(tot[pid, F_RX]), int(tot[pid, F_TX]), int(tot[pid, F_TX_DROP]),
                  int(tot[pid, F_STAGE_DROP])) for pid in ports.ids()}
    for line in summary_lines(rows, counters, drops):
        say(line)


def cycles_line(runners, hz: float) -> str:
    """``--record-core-cycles``' line -- the one the reference's ``cycles.patch`` prints
    (:mod:`pktbuf.bench.l3fwd_ref.build`): busy TSC cycles and the packets received in those
    iterations so far, over every lcore, and the TSC's rate."""
    cyc = sum(r.busy_cycles() for r in runners)
    pkts = sum(int(r.cnt[:, F_RX].sum()) for r in runners)
    return cycles_text(cyc, pkts, hz)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stop = threading.Event()

    def on_signal(signum, frame):
        print(f"\n\nSignal {signum} received, preparing to exit...", flush=True)
        stop.set()

    report = threading.Event()
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    old[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lambda signum, frame: report.set())
    try:
        return run(argv, stop=stop, report=report)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
