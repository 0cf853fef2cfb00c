"""The forwarder of ``pktbuf fwd``: its ports, pool and compiled loop (:class:`Forwarder`, usable
from Python), and what the command's three forms (plain, ``--workers``, ``--distributor``) share
when they run one: building it or reporting why not, SIGTERM as a stop, the telemetry server,
and how a run that lost data ends (:func:`report_failures`, the exit statuses; docs/failures.md).
"""
from __future__ import annotations

import signal
import sys
import time

import numpy as np

from ...drivers.common.api.port import port_error, port_warnings
from ...errors import InvalidArgument, PktbufError
from ...drivers.common.kinds import MAX_PORTS
from ...ethdev.api import kinds_of_devices
from ...ethdev.burst import kinds_mask
from ...ethdev.layout import P_KIND
from ...idle import BUSY_POLL, IDLE_SLEEP_MAX_US
from ..stage.abi import F_STAGE_DROP
from .loop import (F_BUSY_CYCLES, F_RX, F_RX_BYTES, F_TX, F_TX_BYTES, F_TX_DROP, F_WORDS,
                   MAX_BURST, MODES, fwd_loop_entry, tsc_now)
from ..txonly import MIN_PKT_LEN, udp_headers

SLICE = 0.1          # seconds per call into the loop (Ctrl-C and the stats run between calls)

# exit statuses of every pktbuf command (docs/failures.md)
EXIT_OK = 0          # the run ended as asked and lost nothing it did not report as a warning
EXIT_FAILURE = 1     # a port error stopped it, a port could not be opened, a worker failed,
                     # or mbufs were not returned
EXIT_USAGE = 2       # the command line is wrong (argparse's status): nothing was started
EXIT_EPILOG = """exit status:
  0  the run ended as asked (Ctrl-C, --seconds, or every input at its end) and every mbuf
     came back; losses that did not stop it (frames skipped or cut) are warnings
  1  a runtime failure: a port error stopped the run (a damaged capture file, a failed
     write), a port could not be opened, a worker failed, or mbufs were not returned
  2  a usage error: an option out of its range, unknown, or missing, or a --stage that
     cannot be used (not found, not jitted, wrong signature, does not compile); nothing
     was started
docs/failures.md says what each command does on each kind of failure."""


class Forwarder:
    """The ports, the pool and the loop of one ``pktbuf fwd`` run (also usable from Python).

    ``vdevs``: device strings, or callables ``f(pool, port_id) -> port`` for port objects
    built in Python (``lambda pool, pid: RingPort(rx, tx, pool=pool, port_id=pid)``).
    ``pool``: the mbuf pool to use (default: one of ``nb_mbufs`` made here, and closed with
    the forwarder).  ``idle_backoff``: when polls find nothing, pause, yield, then sleep up to
    1 ms (default); False: pause only, keeping the core busy as testpmd does.

    ``stage``: a user's stage (docs/stages.md) -- a jitted function of the stage calling
    convention (then ``state`` is its state) or a :class:`~pktbuf.apps.stage.api.Stage`
    (which carries its own state: ``state`` must then be None).  The streams then run through
    the stage's compiled loop instead of the forwarding mode's: each stream's Tx port is the
    default the stage may change per packet or turn into a drop.  A stage forwards in ``io``
    mode only (it decides what happens to each packet; ``mac``/``macswap`` rewrites belong in
    the stage), and ``record_cycles`` counts its busy cycles.  It is checked -- compiled or
    loaded -- before any port opens (:class:`~pktbuf.apps.stage.api.StageError`).
    """

    def __init__(self, vdevs, mode="io", *, burst=32, txpkts=64, nb_mbufs=16384,
                 mbuf_size=2176, peers=None, record_cycles=False, pool=None,
                 idle_backoff=True, stage=None, state=None):
        from ...ethdev.api import Ports
        from ...buf.domain.pools import PktmbufPool
        if mode not in MODES:
            raise InvalidArgument(f"forward mode must be one of {', '.join(MODES)}")
        if not 1 <= burst <= MAX_BURST:
            raise InvalidArgument(f"burst must be in 1..{MAX_BURST}")
        if not MIN_PKT_LEN <= txpkts <= mbuf_size - 128:
            raise InvalidArgument(f"txpkts must be in {MIN_PKT_LEN}..{mbuf_size - 128}")
        self.stage = as_stage(stage, state)
        if self.stage is not None and mode != "io":
            raise InvalidArgument(f"a stage forwards in io mode (it decides each packet's "
                                  f"port itself), not {mode}")
        self.mode = mode
        self.burst = burst
        self.record_cycles = bool(record_cycles)
        self.idle_max_us = IDLE_SLEEP_MAX_US if idle_backoff else BUSY_POLL
        self._own_pool = pool is None
        self.pool = PktmbufPool(nb_mbufs, 250, data_room=mbuf_size, name="fwd") \
            if pool is None else pool
        self.ports = Ports(self.pool)
        self.devices: dict[int, str] = {}       # port id -> the device string it was opened by
        self.stage_kinds = kinds_of_devices(vdevs)  # the port kinds the stage loop serves
        self.runner = None
        try:
            if self.stage is not None:           # compiled or loaded before any port opens,
                self.stage.check(self.ports, self.stage_kinds)    # for these ports' kinds
            for v in vdevs:
                if callable(v):
                    p = self.ports.add(v(self.pool, self.ports._free_id()))
                    self.devices[p.port_id] = getattr(p, "name", repr(p))
                else:
                    p = self.ports.open(v)
                    self.devices[p.port_id] = v
        except BaseException:
            self.close()
            raise
        ids = self.ports.ids()
        self.streams = np.array([(p, ids[i ^ 1] if (i ^ 1) < len(ids) else p)
                                 for i, p in enumerate(ids)], np.int64).reshape(-1, 2)
        self.macs = np.zeros((MAX_PORTS, 6), np.uint8)
        self.peers = np.zeros((MAX_PORTS, 6), np.uint8)
        self.hdrs = np.zeros((MAX_PORTS, 42), np.uint8)
        for p in self.ports:
            self.macs[p.port_id] = np.frombuffer(bytes(p.mac_addr), np.uint8)
            self.peers[p.port_id] = [2, 0, 0, 0, 0, p.port_id]
        for pid, mac in (peers or {}).items():
            self.peers[pid] = np.frombuffer(mac, np.uint8)
        for p in self.ports:
            self.hdrs[p.port_id] = udp_headers(txpkts, bytes(self.macs[p.port_id]),
                                               bytes(self.peers[p.port_id]))
        self.txpkts = txpkts
        self.cnt = np.zeros((MAX_PORTS, F_WORDS), np.int64)
        self.scratch = np.empty(MAX_BURST, np.int32)
        self._kinds = self.kinds
        self._entry = None
        if self.stage is not None:
            from ..stage.api import StageRunner
            self.runner = StageRunner(self.ports, self.stage,
                                      [(int(r), 0, int(t)) for r, t in self.streams],
                                      burst=burst, idle_backoff=idle_backoff,
                                      record_cycles=record_cycles, kinds=self.stage_kinds)
            self.runner.idle_max_us = self.idle_max_us
            self.runner.cnt = self.cnt           # one set of per-port counters (same words)

    @property
    def idle_backoff(self) -> bool:
        """Whether the loop backs off when idle (False: it polls without pause)."""
        return self.idle_max_us != BUSY_POLL

    @property
    def kinds(self) -> int:
        """The mask of the kinds of this forwarder's ports: the loop compiled for them
        serves these port types only (``pktbuf.ethdev.burst.kinds_mask``)."""
        st = self.ports.state
        return kinds_mask(int(st.port[p, P_KIND]) for p in self.ports.ids())

    def warm(self, kinds: int | None = None) -> None:
        """Compile (or load) the loop: one call over no streams (``kinds``: for ports of
        other kinds than this forwarder's, to warm the cache for them).  With a stage: its
        loop (checked, so compiled or loaded, when the forwarder was made)."""
        if self.stage is not None:
            self.stage.check(self.ports, self.stage_kinds)
            return
        args = (self.ports.state, 0, self.pool.id, self.streams[:0], MODES.index(self.mode),
                self.burst, self.macs, self.peers, self.hdrs, self.txpkts, 0, self.cnt,
                self.scratch, self.record_cycles, self.idle_max_us)
        if kinds is None or kinds == self._kinds:
            self._loop(*args, self._kinds)         # and keep its entry point
        else:
            fwd_loop_entry(*args, kinds)

    def run_slice(self, seconds: float) -> int:
        """Forward for up to ``seconds``; R_ALL_EOF once every Rx port has ended, R_PORT_ERROR
        once a queue was stopped by an error (:meth:`failures` says which)."""
        if self.runner is not None:
            return self.runner.run(seconds)
        return int(self._loop(self.ports.state, 0, self.pool.id, self.streams,
                              MODES.index(self.mode), self.burst, self.macs, self.peers,
                              self.hdrs, self.txpkts, time.monotonic_ns() + int(seconds * 1e9),
                              self.cnt, self.scratch, self.record_cycles, self.idle_max_us,
                              self._kinds))

    def _loop(self, *args):
        """``fwd_loop(*args)`` through the entry point compiled for these ports' kinds.  The
        mask is a compile-time constant (``numba.literally``): a plain dispatcher call would
        type the arguments, fail on the mask and retry with it as a literal on every call --
        tens of milliseconds a slice -- so the entry point is resolved once and called
        directly (its argument types never change here)."""
        ep = self._entry
        if ep is not None:
            return ep(*args)
        out, self._entry = fwd_loop_entry(*args)   # compiles or loads from the cache
        return out

    def failures(self) -> list[dict]:
        """The errors that stopped a queue of one of the ports (``error`` events)."""
        return port_failures(self.ports, self.devices)

    def warnings(self) -> list[dict]:
        """What the ports lost without stopping (``warning`` records)."""
        return port_loss_warnings(self.ports, self.devices)

    def rows(self) -> list[dict]:
        out = []
        for p in self.ports:
            s = p.stats()
            c = self.cnt[p.port_id]
            out.append({"port_id": p.port_id, "name": p.name, "driver": p.driver,
                        "rx": int(c[F_RX]), "rx_dropped": int(s["imissed"]),
                        "rx_bytes": int(c[F_RX_BYTES]), "tx": int(c[F_TX]),
                        "tx_dropped": int(c[F_TX_DROP]), "tx_bytes": int(c[F_TX_BYTES]),
                        "busy_cycles": int(c[F_BUSY_CYCLES]), "stats": s})
            if self.stage is not None:
                out[-1]["stage_dropped"] = int(c[F_STAGE_DROP])
        return out

    def stage_stats(self) -> dict | None:
        """The stage's name, its counters and its drops per reason (None without a stage)."""
        if self.runner is None:
            return None
        return stage_report(self.stage.name, self.runner.counters(),
                            self.runner.drop_counts())

    def close(self) -> int:
        """Close the ports and the pool (unless it was given: its owner closes it); returns the
        mbufs that were still in use before the pool closed (0 when every mbuf came back).
        A port that fails to close (a capture file whose last write fails) is still taken out
        and closed; what went wrong is kept in :attr:`close_errors` (``error`` events)."""
        self.close_errors = []
        for pid in list(self.ports.ids()):
            p = self.ports[pid]
            try:
                self.ports.close_port(pid)
            except (PktbufError, OSError) as e:
                dev = self.devices.get(pid, p.name)
                self.close_errors.append(
                    {"event": "error", "stage": "close", "port_id": pid, "name": p.name,
                     "device": dev, "driver": p.driver, "direction": "tx",
                     "queue": getattr(e, "queue", None), "reason": str(e), "offset": None,
                     "path": getattr(e, "path", None), "exception": type(e).__name__,
                     "line": f"port {pid} ({dev}): closing it: {e}"})
        in_use = int(self.pool.in_use_count)
        try:
            self.audited = self.pool.audit()     # free mbufs, each once (== pool size: whole)
        except PktbufError:
            self.audited = -1
        if self._own_pool:
            self.pool.close(force=True)
        return in_use


def as_stage(stage, state=None):
    """``stage`` as a :class:`~pktbuf.apps.stage.api.Stage` (None stays None): a jitted
    function with ``state``, or a Stage (``state`` None)."""
    if stage is None:
        if state is not None:
            raise InvalidArgument("state= is the state of a stage: give stage= too")
        return None
    from ..stage.api import Stage
    if isinstance(stage, Stage):
        if state is not None:
            raise InvalidArgument("a Stage carries its own state: give state= to Stage(), "
                                  "not here")
        return stage
    return Stage(stage, state=state)


def check_stage(stage, vdevs=()) -> None:
    """Compile (or load) ``stage``'s loop for the port kinds of the device strings ``vdevs``
    over a port table with no port in it (a small pool of its own, closed here):
    :class:`~pktbuf.apps.stage.api.StageError` if it cannot run."""
    from ...ethdev.api import Ports
    from ...buf.domain.pools import PktmbufPool
    pool = PktmbufPool(64, 0, name=f"stage-check-{id(stage):x}")
    try:
        stage.check(Ports(pool), kinds_of_devices(vdevs))
    finally:
        pool.close(force=True)


def stage_report(name: str, counters: dict, drops: dict) -> dict:
    """What ``--json``, the tables and ``/pktbuf/stage`` show of a stage: its name, its
    counters, its drops per reason (``invalid`` last) and their total."""
    return {"name": name, "counters": dict(counters), "drops": dict(drops),
            "dropped": sum(drops.values())}


def tsc_hz() -> float:
    """TSC ticks per second, measured against the monotonic clock over 50 ms."""
    c0, t0 = tsc(), time.perf_counter()
    time.sleep(0.05)
    return (tsc() - c0) / (time.perf_counter() - t0)


def tsc() -> int:
    """The time-stamp counter now."""
    return int(tsc_now())


def build_or_report(make, json_lines: bool = False):
    """``make()``, or None after printing why it failed as ``pktbuf fwd`` reports errors
    (one line on stderr; with ``json_lines`` also an ``error`` event on stdout)."""
    from ...errors import PktbufError
    from ..stage.api import StageError
    try:
        return make()
    except StageError:
        raise                       # the caller's: a usage error (status 2), not an open failure
    except (PktbufError, OSError) as e:
        print(f"pktbuf fwd: {e}", file=sys.stderr)
        if json_lines:
            from .stats import emit_json
            emit_json({"event": "error", "stage": "open", "reason": str(e),
                       "exception": type(e).__name__})
        return None


def port_failures(ports, devices: dict) -> list[dict]:
    """One ``error`` event per port whose ``error()`` is set: the port, the device string,
    the queue, the reason, the offset (capture files) and the line ``pktbuf fwd`` prints."""
    out = []
    for p in ports:
        e = port_error(p)
        if e is None:
            continue
        dev = devices.get(p.port_id, p.name)
        d, q = getattr(e, "direction", "rx"), getattr(e, "queue", 0)
        out.append({"event": "error", "port_id": p.port_id, "name": p.name, "device": dev,
                    "driver": p.driver, "direction": d, "queue": q,
                    "reason": getattr(e, "reason", str(e)),
                    "offset": getattr(e, "offset", None), "path": getattr(e, "path", None),
                    "exception": type(e).__name__,
                    "line": f"port {p.port_id} ({dev}): {d} queue {q}: {e}"})
    return out


def port_loss_warnings(ports, devices: dict) -> list[dict]:
    """One ``warning`` record per loss counter of a port that is not zero."""
    out = []
    for p in ports:
        dev = devices.get(p.port_id, p.name)
        for w in port_warnings(p):
            out.append(dict(port_id=p.port_id, device=dev, **w,
                            line=f"port {p.port_id} ({dev}): {w['count']} {w['what']} "
                                 f"(xstat {w['xstat']})"))
    return out


def report_failures(errors: list[dict], json_lines: bool, emitted: set | None = None) -> None:
    """Print each port error once: its line on stderr, and an ``error`` event with
    ``json_lines`` (``emitted``: the lines already reported)."""
    from .stats import emit_json
    for e in errors:
        if emitted is not None:
            if e["line"] in emitted:
                continue
            emitted.add(e["line"])
        print(f"pktbuf fwd: error: {e['line']}", file=sys.stderr, flush=True)
        if json_lines:
            emit_json({k: v for k, v in e.items() if k != "line"})


def report_warnings(warnings: list[dict]) -> None:
    """One ``warning:`` line on stderr per loss that did not stop the run."""
    for w in warnings:
        print(f"pktbuf fwd: warning: {w['line']}", file=sys.stderr, flush=True)


def sigterm_stops() -> tuple[dict, object]:
    """A SIGTERM handler that ends the run as Ctrl-C does: returns ``stop`` (its ``"why"``
    becomes ``"signal"``) and the handler it replaced (put it back when done)."""
    stop = {"why": None}

    def on_term(signum, frame):
        stop["why"] = "signal"
    return stop, signal.signal(signal.SIGTERM, on_term)


def start_telemetry(a, fw, stage_stats=None, stage_dropped=None):
    """Start the telemetry server if available (``--no-telemetry`` turns it off).  With a
    stage (``fw``'s own, or ``stage_stats()``/``stage_dropped(port id)`` of a distributor's
    workers), each port's xstats end with ``stage_dropped`` and ``/pktbuf/stage`` is
    served."""
    if a.no_telemetry:
        return None
    from ...telemetry.server import Telemetry
    from ...errors import TelemetryError
    try:
        t = Telemetry(a.file_prefix)
    except (TelemetryError, OSError) as e:       # forwarding does not depend on it
        print(f"pktbuf fwd: no telemetry: {e}", file=sys.stderr)
        return None
    if fw.stage is not None:
        stage_stats = fw.stage_stats
        stage_dropped = (lambda pid: int(fw.cnt[pid, F_STAGE_DROP]))
    for p in fw.ports:
        t.add_port(p if stage_stats is None else StagePort(p, stage_dropped))
    t.add_mempool(fw.pool)
    register_failures(t, fw.failures, fw.warnings)
    if stage_stats is not None:
        register_stage(t, stage_stats, lambda: {p.port_id: stage_dropped(p.port_id)
                                                for p in fw.ports})
    return t


class StagePort:
    """A port as telemetry shows it under ``--stage``: the port itself, its xstats followed
    by ``stage_dropped`` (packets received on it that the stage dropped)."""

    def __init__(self, port, dropped):
        self._p = port
        self._dropped = dropped
        self.port_id = port.port_id
        self.name = port.name

    def __getattr__(self, name):
        return getattr(self._p, name)

    def stats(self) -> dict:
        return self._p.stats()

    def xstats(self) -> dict:
        out = dict(self._p.xstats())
        out["stage_dropped"] = self._dropped(self.port_id)
        return out

    def link(self) -> dict:
        return self._p.link()

    def info(self) -> dict:
        return self._p.info()


def register_stage(t, stage_stats, dropped_per_port) -> None:
    """``/pktbuf/stage`` on telemetry server ``t``: the stage's name, counters, drops per
    reason, their total, and per port (by id) what it dropped of the port's Rx."""
    def cmd(params):
        st = stage_stats()
        if st is None:
            return None
        out = dict(st)
        out["stage_dropped"] = {str(k): v for k, v in dropped_per_port().items()}
        return out
    t.register("/pktbuf/stage", cmd,
               "Returns the fwd stage: name, counters, drops per reason and per port. "
               "No parameters")


def register_failures(t, failures, warnings) -> None:
    """``/pktbuf/errors`` on telemetry server ``t``: the run's port errors and warnings now
    (``failures()``/``warnings()`` lists of dicts), ``{"errors": [...], "warnings": [...]}``."""
    def cmd(params):
        strip = (lambda d: {k: ("" if v is None else v) for k, v in d.items() if k != "line"})
        return {"errors": [strip(e) for e in failures()],
                "warnings": [strip(w) for w in warnings()]}
    t.register("/pktbuf/errors", cmd,
               "Returns the port errors that stopped the run and the losses so far. No parameters")
