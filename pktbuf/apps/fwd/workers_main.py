"""The command-line side of ``pktbuf fwd --workers N`` (:mod:`.fwd_workers` has the workers):
start them, watch them, print testpmd's tables summed over them, serve telemetry with each
worker as one queue of every port, and report a worker that dies."""
from __future__ import annotations

import signal
import time

from .workers import C_PID, Workers

class WorkerPort:
    """A port as the telemetry socket shows it: the workers' copies summed, one queue each."""

    def __init__(self, workers: Workers, desc: dict):
        self._w = workers
        self.port_id = desc["port_id"]
        self.name = desc["name"]
        self.driver = desc["driver"]

    def stats(self) -> dict:
        return self._w.port_stats(self.port_id)

    def xstats(self) -> dict:
        s = self.stats()
        out = {k: s[k] for k in ("ipackets", "opackets", "ibytes", "obytes", "imissed",
                                 "ierrors", "oerrors", "rx_nombuf")}
        for w in range(self._w.n):
            p = self._w._port(w, self.port_id)
            out[f"rx_q{w}_packets"] = p["ipackets"]
            out[f"rx_q{w}_bytes"] = p["ibytes"]
            out[f"tx_q{w}_packets"] = p["opackets"]
            out[f"tx_q{w}_bytes"] = p["obytes"]
        if self._w.stage is not None:
            out["stage_dropped"] = self._w.stage_dropped(self.port_id)
        return out

    def link(self) -> dict:
        return {"status": "UP", "speed": 0, "duplex": "full-duplex"}

    def info(self) -> dict:
        return {"nb_rx_queues": self._w.n, "nb_tx_queues": self._w.n,
                "rxq_state": [1] * self._w.n, "txq_state": [1] * self._w.n}


def _telemetry(a, wk: Workers):
    if a.no_telemetry:
        return None
    import sys
    from ...telemetry.server import Telemetry
    from ...errors import TelemetryError
    try:
        t = Telemetry(a.file_prefix)
    except (TelemetryError, OSError) as e:
        print(f"pktbuf fwd: no telemetry: {e}", file=sys.stderr)
        return None
    for d in wk.names:
        t.add_port(WorkerPort(wk, d))
    from .forwarder import register_failures, register_stage
    register_failures(t, wk.failures, wk.warnings)
    if wk.stage is not None:
        register_stage(t, wk.stage_stats,
                       lambda: {pid: wk.stage_dropped(pid) for pid in wk.port_ids()})

    def workers_cmd(params):
        rows = wk.worker_rows()
        for r in rows:
            r["exitcode"] = -1 if r["exitcode"] is None else r["exitcode"]
        return rows
    t.register("/pktbuf/workers", workers_cmd,
               "Returns each fwd worker: state, pid, cpu and per-port counters. No parameters")
    return t


def main_workers(a, peers: dict) -> int:
    """``pktbuf fwd --workers N`` (``a``: the parsed arguments).  A ``--stage`` that cannot
    be used raises :class:`~pktbuf.apps.stage.api.StageError` before any port opens."""
    import sys
    from ...errors import PktbufError
    from ..stage.api import StageError
    from .forwarder import (EXIT_FAILURE, EXIT_OK, build_or_report, check_stage, report_failures,
                            report_warnings, sigterm_stops, tsc_hz)
    from .stats import (emit_json, emit_text, end_line, fwd_stats_text, nic_stats_text, rates,
                        stage_text)
    wk = build_or_report(lambda: Workers(
        a.vdev, a.forward_mode, a.workers, burst=a.burst, txpkts=a.txpkts,
        nb_mbufs=a.total_num_mbufs, mbuf_size=a.mbuf_size, peers=peers,
        record_cycles=a.record_core_cycles, idle_backoff=not a.no_idle_backoff,
        stage=a.stage), a.json)
    if wk is None:
        return EXIT_FAILURE
    if wk.stage is not None:
        try:
            check_stage(wk.stage, a.vdev)  # compiled or loaded before any port opens
        except StageError:
            wk.close()
            raise
    stop, old = sigterm_stops()
    tel = None
    died = []
    reported: set = set()
    t0 = time.monotonic()
    try:
        try:
            wk.warm()
        except (PktbufError, OSError) as e:
            print(f"pktbuf fwd: {e}", file=sys.stderr)
            if a.json:
                emit_json({"event": "error", "stage": "open", "reason": str(e),
                           "exception": type(e).__name__})
            wk.close_xdp()
            wk.sh.close()
            return EXIT_FAILURE
        tel = _telemetry(a, wk)
        wk.start()
        if not wk.wait_running():
            stop["why"] = "worker failed to start"
        elif a.json:
            emit_json({"event": "start", "mode": a.forward_mode, "workers": a.workers,
                       "idle_backoff": wk.opts["idle_backoff"], "ports": wk.names,
                       "stage": None if wk.stage is None else wk.stage.name,
                       "streams": wk.streams,
                       "worker_pids": [int(wk.sh.ctl[w, C_PID]) for w in range(wk.n)]})
        else:
            emit_text(f"pktbuf fwd: {len(wk.names)} port(s), {a.forward_mode} mode, "
                      f"{a.workers} workers (pids "
                      + ", ".join(str(int(wk.sh.ctl[w, C_PID])) for w in range(wk.n))
                      + ")" + ("; Ctrl-C to stop" if not a.seconds else ""))
        t0 = time.monotonic()
        next_stats = t0 + a.stats_period if a.stats_period > 0 else None
        prev, prev_t = {}, t0
        while stop["why"] is None:
            now = time.monotonic()
            if a.seconds and now - t0 >= a.seconds:
                stop["why"] = "seconds"
                break
            for w, code in wk.dead():
                died.append(w)
                if a.json:
                    emit_json({"event": "worker_died", "worker": w, "exitcode": code,
                               "t": round(now - t0, 3)})
                else:
                    emit_text(f"pktbuf fwd: worker {w} died (exit code {code}); "
                              f"{wk.n - len(died)} still forwarding")
            if wk.failed_ports():
                stop["why"] = "port error"
                report_failures(wk.failures(), a.json, reported)
                break
            if wk.all_ended():
                stop["why"] = "eof" if not died else "all workers ended"
                break
            if next_stats is not None and now >= next_stats:
                snap = {pid: wk.port_stats(pid) for pid in wk.port_ids()}
                rt = {pid: rates(prev.get(pid), s, now - prev_t) for pid, s in snap.items()}
                if a.json:
                    ev = {"event": "stats", "t": round(now - t0, 3),
                          "ports": [dict(port_id=pid, **{k: v for k, v in s.items()
                                                          if not k.startswith("q_")},
                                         **rt[pid]) for pid, s in snap.items()],
                          "workers": [{"worker": r["worker"], "state": r["state"],
                                       "rx": sum(p["rx"] for p in r["ports"]),
                                       "tx": sum(p["tx"] for p in r["ports"])}
                                      for r in wk.worker_rows()]}
                    if wk.stage is not None:
                        ev["stage"] = wk.stage_stats()
                    emit_json(ev)
                else:
                    clear = "\033[2J\033[1;1H" if sys.stdout.isatty() else ""
                    emit_text(clear + "\n  Port statistics ===================================="
                              + "".join(nic_stats_text(pid, s, rt[pid])
                                        for pid, s in snap.items())
                              + stage_text(wk.stage_stats()))
                prev, prev_t = snap, now
                next_stats += a.stats_period
            time.sleep(0.02)
    except KeyboardInterrupt:
        stop["why"] = "signal"
    finally:
        signal.signal(signal.SIGTERM, old)
        elapsed = time.monotonic() - t0
        wk.stop()
        if tel is not None:
            tel.close()
    rows, wrows, in_use = wk.rows(), wk.worker_rows(), wk.in_use()
    stage_stats = wk.stage_stats()
    if wk.stage is not None:
        for r in wrows:
            r["stage"] = wk.stage_stats(r["worker"])
    errors, warnings = wk.failures(), wk.warnings()
    wk.close()
    report_failures(errors, a.json, reported)
    if errors and stop["why"] != "port error":
        stop["why"] += " (after a port error)"
    report_warnings(warnings)
    failed = [r["worker"] for r in wrows if r["state"] != "done"]
    status = EXIT_FAILURE if in_use or failed or errors else EXIT_OK
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
                   "workers": wrows, "stage": stage_stats, "core_cycles": cycles,
                   "mbufs_in_use_at_close": in_use,
                   "errors": [{k: v for k, v in e.items() if k != "line"} for e in errors],
                   "warnings": [{k: v for k, v in w.items() if k != "line"} for w in warnings],
                   "exit_status": status})
    else:
        emit_text(f"\nStopping ({stop['why']}) after {elapsed:.1f} s...")
        for r in wrows:
            emit_text(f"  worker {r['worker']} (pid {r['pid']}, cpu {r['cpu']}): {r['state']}, "
                      f"RX {sum(p['rx'] for p in r['ports'])} TX "
                      f"{sum(p['tx'] for p in r['ports'])}"
                      + (f", {r['mbufs_in_use_at_close']} mbufs not returned"
                         if r["mbufs_in_use_at_close"] else ""))
        emit_text(fwd_stats_text(rows) + stage_text(stage_stats))
        if cycles is not None:
            emit_text(f"\n  CPU cycles/packet={cycles['cycles_per_packet']:.2f} (total cycles="
                      f"{cycles['busy_cycles']} / total {a.forward_mode} packets="
                      f"{cycles['packets']}) at {int(cycles['tsc_hz'] / 1e6)} MHz Clock")
        emit_text(end_line(errors, warnings, in_use,
                           f"workers that did not finish cleanly: {failed}" if failed else ""))
    return status
