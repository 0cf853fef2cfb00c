"""The forwarder of ``pktbuf fwd``: its ports, pool and compiled loop (:class:`Forwarder`, usable
from Python), and what the command's three forms (plain, ``--workers``, ``--distributor``) share
when they run one: building it or reporting why not, SIGTERM as a stop, the telemetry server."""
from __future__ import annotations

import signal
import sys
import time

import numpy as np

from ...drivers.common.kinds import MAX_PORTS
from ...idle import BUSY_POLL, IDLE_SLEEP_MAX_US
from .loop import (F_BUSY_CYCLES, F_RX, F_RX_BYTES, F_TX, F_TX_BYTES, F_TX_DROP, F_WORDS,
                   MAX_BURST, MODES, fwd_loop, tsc_now)
from ..txonly import MIN_PKT_LEN, udp_headers

SLICE = 0.1          # seconds per call into the loop (Ctrl-C and the stats run between calls)


class Forwarder:
    """The ports, the pool and the loop of one ``pktbuf fwd`` run (also usable from Python).

    ``vdevs``: device strings, or callables ``f(pool, port_id) -> port`` for port objects
    built in Python (``lambda pool, pid: RingPort(rx, tx, pool=pool, port_id=pid)``).
    ``pool``: the mbuf pool to use (default: one of ``nb_mbufs`` made here, and closed with
    the forwarder).  ``idle_backoff``: when polls find nothing, pause, yield, then sleep up to
    1 ms (default); False: pause only, keeping the core busy as testpmd does.
    """

    def __init__(self, vdevs, mode="io", *, burst=32, txpkts=64, nb_mbufs=16384,
                 mbuf_size=2176, peers=None, record_cycles=False, pool=None,
                 idle_backoff=True):
        from ...ethdev.api import Ports
        from ...buf.domain.pools import PktmbufPool
        from ...errors import InvalidArgument
        if mode not in MODES:
            raise InvalidArgument(f"forward mode must be one of {', '.join(MODES)}")
        if not 1 <= burst <= MAX_BURST:
            raise InvalidArgument(f"burst must be in 1..{MAX_BURST}")
        if not MIN_PKT_LEN <= txpkts <= mbuf_size - 128:
            raise InvalidArgument(f"txpkts must be in {MIN_PKT_LEN}..{mbuf_size - 128}")
        self.mode = mode
        self.burst = burst
        self.record_cycles = bool(record_cycles)
        self.idle_max_us = IDLE_SLEEP_MAX_US if idle_backoff else BUSY_POLL
        self._own_pool = pool is None
        self.pool = PktmbufPool(nb_mbufs, 250, data_room=mbuf_size, name="fwd") \
            if pool is None else pool
        self.ports = Ports(self.pool)
        try:
            for v in vdevs:
                if callable(v):
                    self.ports.add(v(self.pool, self.ports._free_id()))
                else:
                    self.ports.open(v)
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

    @property
    def idle_backoff(self) -> bool:
        """Whether the loop backs off when idle (False: it polls without pause)."""
        return self.idle_max_us != BUSY_POLL

    def warm(self) -> None:
        """Compile (or load) the loop: one call over no streams."""
        fwd_loop(self.ports.state, 0, self.pool.id, self.streams[:0], MODES.index(self.mode),
                 self.burst, self.macs, self.peers, self.hdrs, self.txpkts, 0, self.cnt,
                 self.scratch, self.record_cycles, self.idle_max_us)

    def run_slice(self, seconds: float) -> int:
        """Forward for up to ``seconds``; R_ALL_EOF once every Rx port has ended."""
        return int(fwd_loop(self.ports.state, 0, self.pool.id, self.streams,
                            MODES.index(self.mode), self.burst, self.macs, self.peers,
                            self.hdrs, self.txpkts, time.monotonic_ns() + int(seconds * 1e9),
                            self.cnt, self.scratch, self.record_cycles, self.idle_max_us))

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
        return out

    def close(self) -> int:
        """Close the ports and the pool (unless it was given: its owner closes it); returns the
        mbufs that were still in use before the pool closed (0 when every mbuf came back)."""
        self.ports.close()
        in_use = int(self.pool.in_use_count)
        from ...errors import PktbufError
        try:
            self.audited = self.pool.audit()     # free mbufs, each once (== pool size: whole)
        except PktbufError:
            self.audited = -1
        if self._own_pool:
            self.pool.close(force=True)
        return in_use


def tsc_hz() -> float:
    """TSC ticks per second, measured against the monotonic clock over 50 ms."""
    c0, t0 = tsc(), time.perf_counter()
    time.sleep(0.05)
    return (tsc() - c0) / (time.perf_counter() - t0)


def tsc() -> int:
    """The time-stamp counter now."""
    return int(tsc_now())


def build_or_report(make):
    """``make()``, or None after printing why it failed as ``pktbuf fwd`` reports errors."""
    from ...errors import PktbufError
    try:
        return make()
    except (PktbufError, OSError) as e:
        print(f"pktbuf fwd: {e}", file=sys.stderr)
        return None


def sigterm_stops() -> tuple[dict, object]:
    """A SIGTERM handler that ends the run as Ctrl-C does: returns ``stop`` (its ``"why"``
    becomes ``"signal"``) and the handler it replaced (put it back when done)."""
    stop = {"why": None}

    def on_term(signum, frame):
        stop["why"] = "signal"
    return stop, signal.signal(signal.SIGTERM, on_term)


def start_telemetry(a, fw):
    """Start the telemetry server if available (``--no-telemetry`` turns it off)."""
    if a.no_telemetry:
        return None
    from ...telemetry.server import Telemetry
    from ...errors import TelemetryError
    try:
        t = Telemetry(a.file_prefix)
    except (TelemetryError, OSError) as e:       # forwarding does not depend on it
        print(f"pktbuf fwd: no telemetry: {e}", file=sys.stderr)
        return None
    for p in fw.ports:
        t.add_port(p)
    t.add_mempool(fw.pool)
    return t
