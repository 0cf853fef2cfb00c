"""``pktbuf fwd``: a testpmd-like forwarder over any ports.

::

    pktbuf fwd --vdev net_af_packet0,iface=veth0 --vdev net_af_packet1,iface=veth1 \\
               --forward-mode io --stats-period 1
    pktbuf fwd --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap     # until the file ends

Options follow testpmd's: repeatable ``--vdev`` (DPDK device strings; ports are numbered in
order), ``--forward-mode io|mac|macswap|rxonly|txonly``, ``--stats-period N`` (a live table every
N seconds, 0 = off), ``--burst``, ``--txpkts`` (txonly frame size), ``--total-num-mbufs``,
``--mbuf-size``, ``--eth-peer N,XX:XX:XX:XX:XX:XX`` (mac mode's destination per port, default
02:00:00:00:00:<port>), ``--file-prefix`` (where the telemetry socket goes, as EAL's).  Ports
pair as testpmd's default ``paired`` topology: 0<->1, 2<->3, and an odd last port (or a single
port) forwards to itself.  It stops on Ctrl-C (or SIGTERM), after ``--seconds N``, or once
every Rx port has reached its end (a capture file without looping), then prints testpmd's
forward statistics (``--json``: one JSON object per line instead: ``stats`` events and a final
``summary``) and closes every port: every mbuf goes back to the pool.

``--stage module:function`` (or ``path/to/file.py:function``) runs a user's ``@njit`` stage
on every received burst inside the compiled loop, deciding each packet's Tx port or its drop
(docs/stages.md); it is checked and compiled (or loaded) before any port opens, and a stage
that cannot be used ends the command with status 2 and one line saying why.

``--workers N`` runs N worker processes, each owning its own queues
(:mod:`pktbuf.apps.fwd.workers`); with ``--distributor`` this process receives and transmits
and the workers are fed by the software distributor (:mod:`pktbuf.apps.fwd.distrib`).

A port error -- a capture file that breaks its format, a write that fails -- stops the run after
every packet before it was forwarded, and is reported (one ``error:`` line on stderr naming
the port, its device string, the queue and the reason; an ``error`` event with ``--json``);
losses that do not stop it (frames skipped or cut) are ``warning:`` lines at the end.  Every
numeric option is range-checked.  docs/failures.md has the details.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

from ...drivers.common.kinds import MAX_PORTS
from ...errors import cli_number
from ..stage.api import Stage, StageError
from ..txonly import MIN_PKT_LEN
from .distrib import main_distrib
from .forwarder import (EXIT_EPILOG, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, SLICE, Forwarder,
                        build_or_report, report_failures, report_warnings, sigterm_stops,
                        start_telemetry, tsc_hz)
from .loop import MAX_BURST, MODES, R_ALL_EOF, R_PORT_ERROR
from .stats import (emit_json, emit_text, end_line, fwd_stats_text, nic_stats_text, rates,
                    stage_text)
from .workers_main import main_workers


MAX_MBUFS = 1 << 22          # --total-num-mbufs (the domain's object table holds 2**22 and more)
MIN_MBUF_SIZE = 256          # --mbuf-size: headroom (128) + a 128-byte frame
MAX_MBUF_SIZE = 65535        # data_room is 16-bit in an mbuf


def _parse_peer(text: str) -> tuple[int, bytes]:
    """``N,XX:XX:XX:XX:XX:XX`` (argparse type of --eth-peer)."""
    port, _, mac = text.partition(",")
    try:
        b = bytes(int(x, 16) for x in mac.split(":"))
        pid = int(port)
    except ValueError:
        b, pid = b"", -1
    if len(b) != 6 or not all(len(x) in (1, 2) for x in mac.split(":")) \
            or not 0 <= pid < MAX_PORTS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: takes N,XX:XX:XX:XX:XX:XX with N a port id 0..{MAX_PORTS - 1}")
    return pid, b


def _prefix(text: str) -> str:
    """--file-prefix: what EAL accepts as one directory name (the telemetry's own check)."""
    from ...errors import InvalidArgument
    from ...telemetry.runtime import check_prefix
    try:
        return check_prefix(text)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pktbuf fwd", description=__doc__, epilog=EXIT_EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vdev", action="append", required=True, metavar="DEVICE",
                    help="a port, as a DPDK device string (repeat for more ports)")
    ap.add_argument("--forward-mode", choices=MODES, default="io")
    ap.add_argument("--stats-period", type=cli_number(float, 0, 86400), default=0.0,
                    metavar="N", help="show port statistics every N seconds (0: never)")
    ap.add_argument("--seconds", type=cli_number(float, 0, 1e9), default=0.0, metavar="N",
                    help="stop after N seconds (0: on Ctrl-C or when every Rx port has ended)")
    ap.add_argument("--json", action="store_true", help="JSON lines instead of tables")
    ap.add_argument("--burst", type=cli_number(int, 1, MAX_BURST), default=32,
                    help=f"packets per burst, 1..{MAX_BURST}")
    ap.add_argument("--txpkts", type=cli_number(int, MIN_PKT_LEN, MAX_MBUF_SIZE - 128),
                    default=64, help="txonly frame size (at most --mbuf-size - 128)")
    ap.add_argument("--total-num-mbufs", type=cli_number(int, 64, MAX_MBUFS), default=16384,
                    help=f"mbufs in the pool, 64..{MAX_MBUFS}")
    ap.add_argument("--mbuf-size", type=cli_number(int, MIN_MBUF_SIZE, MAX_MBUF_SIZE),
                    default=2176, help="data room of each mbuf (headroom included)")
    ap.add_argument("--eth-peer", action="append", default=[], metavar="N,MAC",
                    type=_parse_peer)
    ap.add_argument("--file-prefix", default="rte", type=_prefix,
                    help="telemetry socket directory name")
    ap.add_argument("--no-telemetry", action="store_true")
    ap.add_argument("--record-core-cycles", action="store_true",
                    help="count the TSC cycles of busy iterations (testpmd's option)")
    ap.add_argument("--no-idle-backoff", action="store_true",
                    help="poll without ever yielding or sleeping, as testpmd does (the core "
                         "stays 100%% busy); default: back off when idle")
    ap.add_argument("--stage", metavar="MODULE:FUNCTION",
                    help="call this @njit stage on every received burst (a module on sys.path "
                         "or path/to/file.py; a jitted function, a Stage, or a function "
                         "returning one; docs/stages.md); io mode only")
    ap.add_argument("--workers", type=cli_number(int, 0, 64), default=0, metavar="N",
                    help="N worker processes, each pinned and owning its own queues (AF_PACKET: "
                         "one fanout group; '{worker}' in a device string: the worker's "
                         "number); 0: forward in this process")
    ap.add_argument("--distributor", action="store_true",
                    help="with --workers: this process receives and transmits, the workers "
                         "are fed by the software distributor (flows by RSS hash; for ports "
                         "with one queue)")
    ap.add_argument("--symmetric", action="store_true",
                    help="--distributor: the symmetric RSS key (both directions of a flow "
                         "to one worker)")
    # the range here (a usage error); that it is a power of two is the distributor's check
    ap.add_argument("--dist-ring-size", type=cli_number(int, 2, 1 << 20), default=1024,
                    metavar="N",
                    help="--distributor: slots of each worker's ring (a power of two, "
                         "2 .. 1048576)")
    return ap


def main(argv=None, *, before_start=None) -> int:
    """``pktbuf fwd``.  ``before_start(args)``: called with the parsed options once they are
    checked and before any port opens (the command line passes the cache warm-up of
    ``pktbuf compile`` for the ports' kinds)."""
    ap = build_parser()
    a = ap.parse_args(argv)
    peers = dict(a.eth_peer)
    # options that depend on each other: argparse's one-line error and status 2, as above
    if a.txpkts > a.mbuf_size - 128:
        ap.error(f"argument --txpkts: {a.txpkts} does not fit an mbuf of --mbuf-size "
                 f"{a.mbuf_size} (at most {a.mbuf_size - 128})")
    if a.distributor and not a.workers:
        ap.error("argument --distributor: needs --workers N (N >= 1)")
    for flag, on in (("--symmetric", a.symmetric), ("--dist-ring-size", a.dist_ring_size != 1024)):
        if on and not a.distributor:
            ap.error(f"argument {flag}: only with --distributor")
    if a.stage is not None:
        if a.forward_mode != "io":
            ap.error(f"argument --stage: the stage decides each packet's port; it runs in io "
                     f"mode, not --forward-mode {a.forward_mode}")
    # Ctrl-C (SIGINT) stops the run even when the shell started us with SIGINT ignored (a
    # background job of a non-interactive shell), as testpmd's own handler does
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if before_start is not None:
        try:
            before_start(a)
        except Exception as e:      # noqa: BLE001 -- reported, and the run does not start
            print(f"pktbuf fwd: {e}", file=sys.stderr)
            return EXIT_FAILURE
    stage = None
    try:
        if a.workers:           # the spec goes to every process, each makes its stage
            if a.distributor:
                return main_distrib(a, peers)
            return main_workers(a, peers)
        if a.stage is not None:
            stage = Stage.from_spec(a.stage)
        fw = build_or_report(lambda: Forwarder(
            a.vdev, a.forward_mode, burst=a.burst, txpkts=a.txpkts, nb_mbufs=a.total_num_mbufs,
            mbuf_size=a.mbuf_size, peers=peers, record_cycles=a.record_core_cycles,
            idle_backoff=not a.no_idle_backoff, stage=stage), a.json)
    except StageError as e:
        return stage_failed(e, a.json)
    if fw is None:
        return EXIT_FAILURE
    stop, old = sigterm_stops()
    tel = None
    out = emit_json if a.json else None
    reported: set = set()
    try:
        fw.warm()
        tel = start_telemetry(a, fw)
        if not a.json:
            emit_text(f"pktbuf fwd: {len(fw.ports)} port(s), {a.forward_mode} mode; "
                      f"streams: " + ", ".join(f"{r}->{t}" for r, t in fw.streams)
                      + ("; Ctrl-C to stop" if not a.seconds else ""))
        else:
            out({"event": "start", "mode": a.forward_mode,
                 "idle_backoff": fw.idle_backoff,
                 "stage": None if stage is None else stage.name,
                 "ports": [{"port_id": p.port_id, "name": p.name, "driver": p.driver}
                           for p in fw.ports],
                 "streams": fw.streams.tolist()})
        t0 = time.monotonic()
        next_stats = t0 + a.stats_period if a.stats_period > 0 else None
        prev, prev_t = {}, t0
        while stop["why"] is None:
            now = time.monotonic()
            if a.seconds and now - t0 >= a.seconds:
                stop["why"] = "seconds"
                break
            left = SLICE if not a.seconds else min(SLICE, t0 + a.seconds - now)
            if next_stats is not None:
                left = min(left, max(0.0, next_stats - now))
            r = fw.run_slice(max(left, 0.0))
            if r == R_PORT_ERROR:
                stop["why"] = "port error"
                report_failures(fw.failures(), a.json, reported)
            elif r == R_ALL_EOF:
                stop["why"] = "eof"
            if next_stats is not None and time.monotonic() >= next_stats:
                now = time.monotonic()
                snap = {p.port_id: p.stats() for p in fw.ports}
                rt = {pid: rates(prev.get(pid), s, now - prev_t) for pid, s in snap.items()}
                if a.json:
                    ev = {"event": "stats", "t": round(now - t0, 3),
                          "ports": [dict(port_id=pid, **{k: v for k, v in s.items()
                                                          if not k.startswith("q_")}, **rt[pid])
                                    for pid, s in snap.items()]}
                    if stage is not None:
                        ev["stage"] = fw.stage_stats()
                    out(ev)
                else:
                    clear = "\033[2J\033[1;1H" if sys.stdout.isatty() else ""
                    emit_text(clear + "\n  Port statistics ===================================="
                              + "".join(nic_stats_text(pid, s, rt[pid]) for pid, s in snap.items())
                              + stage_text(fw.stage_stats()))
                prev, prev_t = snap, now
                next_stats += a.stats_period
    except KeyboardInterrupt:
        stop["why"] = "signal"
    finally:
        signal.signal(signal.SIGTERM, old)
        elapsed = time.monotonic() - t0 if "t0" in locals() else 0.0
        rows = fw.rows()
        stage_stats = fw.stage_stats()
        # whatever stopped the run, a port that failed is reported (a signal can come first)
        errors, warnings = fw.failures(), fw.warnings()
        report_failures(errors, a.json, reported)
        if tel is not None:
            tel.close()
        in_use = fw.close()
    report_failures(fw.close_errors, a.json, reported)     # a last write that failed
    errors = errors + fw.close_errors
    if errors and stop["why"] != "port error":
        stop["why"] += " (after a port error)"
    status = EXIT_FAILURE if errors or in_use else EXIT_OK
    report_warnings(warnings)
    cycles = None
    if a.record_core_cycles:
        busy = sum(r["busy_cycles"] for r in rows)
        pkts = sum(r["tx" if a.forward_mode == "txonly" else "rx"] for r in rows)
        cycles = {"busy_cycles": busy, "packets": pkts, "tsc_hz": tsc_hz(),
                  "cycles_per_packet": busy / pkts if pkts else 0.0}
    if a.json:
        acc = {k: sum(r[k] for r in rows) for k in ("rx", "rx_dropped", "tx", "tx_dropped")}
        emit_json({"event": "summary", "mode": a.forward_mode, "stopped_by": stop["why"],
                   "seconds": round(elapsed, 3), "ports": rows, "accumulated": acc,
                   "stage": stage_stats,
                   "core_cycles": cycles, "mbufs_in_use_at_close": in_use,
                   "errors": [{k: v for k, v in e.items() if k != "line"} for e in errors],
                   "warnings": [{k: v for k, v in w.items() if k != "line"} for w in warnings],
                   "exit_status": status})
    else:
        emit_text(f"\nStopping ({stop['why']}) after {elapsed:.1f} s...")
        emit_text(fwd_stats_text(rows) + stage_text(stage_stats))
        if cycles is not None:          # testpmd 22.11's line, word for word
            emit_text(f"\n  CPU cycles/packet={cycles['cycles_per_packet']:.2f} (total cycles="
                      f"{cycles['busy_cycles']} / total {a.forward_mode} packets="
                      f"{cycles['packets']}) at {int(cycles['tsc_hz'] / 1e6)} MHz Clock")
        emit_text(end_line(errors, warnings, in_use))
    return status


def stage_failed(e: StageError, json_lines: bool) -> int:
    """A stage that cannot be used (``--stage``): one line saying why, an ``error`` event
    with ``"stage": "stage"`` under ``--json``, status 2 -- no port was opened."""
    print(f"pktbuf fwd: {e}", file=sys.stderr, flush=True)
    if json_lines:
        emit_json({"event": "error", "stage": "stage", "reason": str(e),
                   "exception": type(e).__name__})
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
