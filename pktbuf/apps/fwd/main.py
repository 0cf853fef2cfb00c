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

``--workers N`` runs N worker processes, each owning its own queues
(:mod:`pktbuf.apps.fwd.workers`); with ``--distributor`` this process receives and transmits
and the workers are fed by the software distributor (:mod:`pktbuf.apps.fwd.distrib`).
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

from .distrib import main_distrib
from .forwarder import SLICE, Forwarder, build_or_report, sigterm_stops, start_telemetry, tsc_hz
from .loop import MODES, R_ALL_EOF
from .stats import emit_json, emit_text, fwd_stats_text, nic_stats_text, rates
from .workers_main import main_workers


def _parse_peer(text: str) -> tuple[int, bytes]:
    port, _, mac = text.partition(",")
    b = bytes(int(x, 16) for x in mac.split(":"))
    if len(b) != 6:
        raise ValueError(mac)
    return int(port), b


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pktbuf fwd", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vdev", action="append", required=True, metavar="DEVICE",
                    help="a port, as a DPDK device string (repeat for more ports)")
    ap.add_argument("--forward-mode", choices=MODES, default="io")
    ap.add_argument("--stats-period", type=float, default=0.0, metavar="N",
                    help="show port statistics every N seconds (0: never)")
    ap.add_argument("--seconds", type=float, default=0.0, metavar="N",
                    help="stop after N seconds (0: on Ctrl-C or when every Rx port has ended)")
    ap.add_argument("--json", action="store_true", help="JSON lines instead of tables")
    ap.add_argument("--burst", type=int, default=32)
    ap.add_argument("--txpkts", type=int, default=64, help="txonly frame size")
    ap.add_argument("--total-num-mbufs", type=int, default=16384)
    ap.add_argument("--mbuf-size", type=int, default=2176, help="data room of each mbuf")
    ap.add_argument("--eth-peer", action="append", default=[], metavar="N,MAC")
    ap.add_argument("--file-prefix", default="rte", help="telemetry socket directory name")
    ap.add_argument("--no-telemetry", action="store_true")
    ap.add_argument("--record-core-cycles", action="store_true",
                    help="count the TSC cycles of busy iterations (testpmd's option)")
    ap.add_argument("--no-idle-backoff", action="store_true",
                    help="poll without ever yielding or sleeping, as testpmd does (the core "
                         "stays 100%% busy); default: back off when idle")
    ap.add_argument("--workers", type=int, default=0, metavar="N",
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
    ap.add_argument("--dist-ring-size", type=int, default=1024, metavar="N",
                    help="--distributor: slots of each worker's ring (a power of two)")
    return ap


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    try:
        peers = dict(_parse_peer(x) for x in a.eth_peer)
    except ValueError:
        print("pktbuf fwd: --eth-peer takes N,XX:XX:XX:XX:XX:XX", file=sys.stderr)
        return 2
    # Ctrl-C (SIGINT) stops the run even when the shell started us with SIGINT ignored (a
    # background job of a non-interactive shell), as testpmd's own handler does
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if a.distributor and not a.workers:
        print("pktbuf fwd: --distributor needs --workers N", file=sys.stderr)
        return 2
    if a.workers:
        if not 1 <= a.workers <= 64:
            print("pktbuf fwd: --workers takes 1 .. 64", file=sys.stderr)
            return 2
        if a.distributor:
            return main_distrib(a, peers)
        return main_workers(a, peers)
    fw = build_or_report(lambda: Forwarder(
        a.vdev, a.forward_mode, burst=a.burst, txpkts=a.txpkts, nb_mbufs=a.total_num_mbufs,
        mbuf_size=a.mbuf_size, peers=peers, record_cycles=a.record_core_cycles,
        idle_backoff=not a.no_idle_backoff))
    if fw is None:
        return 1
    stop, old = sigterm_stops()
    tel = None
    out = emit_json if a.json else None
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
            if fw.run_slice(max(left, 0.0)) == R_ALL_EOF:
                stop["why"] = "eof"
            if next_stats is not None and time.monotonic() >= next_stats:
                now = time.monotonic()
                snap = {p.port_id: p.stats() for p in fw.ports}
                rt = {pid: rates(prev.get(pid), s, now - prev_t) for pid, s in snap.items()}
                if a.json:
                    out({"event": "stats", "t": round(now - t0, 3),
                         "ports": [dict(port_id=pid, **{k: v for k, v in s.items()
                                                         if not k.startswith("q_")}, **rt[pid])
                                   for pid, s in snap.items()]})
                else:
                    clear = "\033[2J\033[1;1H" if sys.stdout.isatty() else ""
                    emit_text(clear + "\n  Port statistics ===================================="
                              + "".join(nic_stats_text(pid, s, rt[pid]) for pid, s in snap.items()))
                prev, prev_t = snap, now
                next_stats += a.stats_period
    except KeyboardInterrupt:
        stop["why"] = "signal"
    finally:
        signal.signal(signal.SIGTERM, old)
        elapsed = time.monotonic() - t0 if "t0" in locals() else 0.0
        rows = fw.rows()
        if tel is not None:
            tel.close()
        in_use = fw.close()
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
                   "core_cycles": cycles, "mbufs_in_use_at_close": in_use})
    else:
        emit_text(f"\nStopping ({stop['why']}) after {elapsed:.1f} s...")
        emit_text(fwd_stats_text(rows))
        if cycles is not None:          # testpmd 22.11's line, word for word
            emit_text(f"\n  CPU cycles/packet={cycles['cycles_per_packet']:.2f} (total cycles="
                      f"{cycles['busy_cycles']} / total {a.forward_mode} packets="
                      f"{cycles['packets']}) at {int(cycles['tsc_hz'] / 1e6)} MHz Clock")
        emit_text("\nDone." + ("" if in_use == 0 else f"  {in_use} mbufs were not returned!"))
    return 0 if in_use == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
