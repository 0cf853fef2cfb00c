"""What a do-nothing stage costs over ``pktbuf fwd``'s io mode, in the same run.

Two ``net_ring`` loopback ports, each primed with ``--pkts`` mbufs; streams 0 -> 1 and 1 -> 0,
so every packet sent is received again at once and the loops never idle.  Rounds alternate
between ``fwd_loop`` in io mode and the generated loop of
:func:`~pktbuf.apps.stage.abi.noop_stage` (a user stage that leaves every packet on its
default port), ``--slice`` seconds each, in the order io, stage in even rounds and stage, io in
odd ones.  The figure is nanoseconds of the loop thread's own CPU time per forwarded packet
(``time.thread_time_ns``: both loops busy-poll in this thread, so its CPU time is their work,
and a slice that was preempted -- on a 2-core shared machine most are, now and then -- is not
charged the time it waited), the ratio that of the medians; the wall-clock figures are kept
beside them (``*_wall_*``).

``python -m pktbuf.bench.stage [--rounds N] [--slice S] [--pkts N] [--json]``
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from ..drivers.common.kinds import K_RING
from ..ethdev.burst import kinds_mask

from ..apps.fwd.loop import F_RX, F_WORDS, M_IO, fwd_loop, fwd_loop_entry
from ..apps.stage.abi import noop_stage
from ..apps.stage.api import Stage, StageRunner
from ..drivers.common.kinds import MAX_PORTS
from ..idle import BUSY_POLL


def _per_packet(run, cnt) -> tuple[float, float]:
    """``run()``'s thread CPU time and wall time, each in ns per packet received (``cnt``: the
    loop's per-port counters, read after it returns)."""
    c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
    run()
    t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
    n = max(1, int(cnt[:, F_RX].sum()))
    return (c1 - c0) / n, (t1 - t0) / n


def run(rounds: int = 5, slice_s: float = 0.3, pkts: int = 256, burst: int = 32) -> dict:
    import pktbuf
    pool = pktbuf.PktmbufPool(8192, 256)
    ports = pktbuf.Ports(pool)
    try:
        for i in range(2):
            p = ports.open(f"net_ring{i}")
            hs = [pool.alloc() for _ in range(pkts)]
            for h in hs:
                h.append_bytes(bytes(60))
            p.tx_burst(hs)
        eth = ports.state
        streams = np.array([[0, 1], [1, 0]], np.int64)
        macs = np.zeros((MAX_PORTS, 6), np.uint8)
        hdrs = np.zeros((MAX_PORTS, 42), np.uint8)
        pk = np.zeros(512, np.int32)
        stage = Stage(noop_stage)
        runner = StageRunner(ports, stage, [(0, 0, 1), (1, 0, 0)], burst=burst,
                             idle_backoff=False)

        ring = kinds_mask([K_RING])
        _, entry = fwd_loop_entry(eth, 0, 0, streams[:0], M_IO, burst, macs, macs, hdrs, 60, 0,
                                  np.zeros((MAX_PORTS, F_WORDS), np.int64), pk, False,
                                  BUSY_POLL, ring)
        loop = entry or fwd_loop        # the entry point: no literal re-dispatch per call

        def fwd(sec):
            cnt = np.zeros((MAX_PORTS, F_WORDS), np.int64)
            return _per_packet(lambda: loop(eth, 0, 0, streams, M_IO, burst, macs, macs, hdrs,
                                            60, time.monotonic_ns() + int(sec * 1e9), cnt, pk,
                                            False, BUSY_POLL, ring), cnt)

        def stg(sec):
            runner.cnt[:] = 0
            return _per_packet(lambda: runner.run(sec), runner.cnt)

        fwd(0.01)                       # compile / load both before timing
        stg(0.01)
        a, b = [], []
        for r in range(rounds):
            if r % 2 == 0:
                a.append(fwd(slice_s))
                b.append(stg(slice_s))
            else:
                b.append(stg(slice_s))
                a.append(fwd(slice_s))
        fa, fb = statistics.median(x for x, _ in a), statistics.median(x for x, _ in b)
        wa, wb = statistics.median(w for _, w in a), statistics.median(w for _, w in b)
        return {"io_ns_per_pkt": fa, "noop_stage_ns_per_pkt": fb, "ratio": fb / fa,
                "io_samples": [x for x, _ in a], "stage_samples": [x for x, _ in b],
                "io_wall_ns_per_pkt": wa, "noop_stage_wall_ns_per_pkt": wb,
                "wall_ratio": wb / wa, "io_wall_samples": [w for _, w in a],
                "stage_wall_samples": [w for _, w in b], "clock": "thread CPU time",
                "burst": burst, "pkts_per_port": pkts}
    finally:
        ports.close()
        pool.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pktbuf.bench.stage")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slice", type=float, default=0.3)
    ap.add_argument("--pkts", type=int, default=256)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    r = run(a.rounds, a.slice, a.pkts)
    if a.json:
        print(json.dumps(r))
    else:
        print(f"io mode        {r['io_ns_per_pkt']:8.2f} ns/packet of CPU time (median of "
              f"{a.rounds}; wall {r['io_wall_ns_per_pkt']:.2f})")
        print(f"no-op stage    {r['noop_stage_ns_per_pkt']:8.2f} ns/packet of CPU time (wall "
              f"{r['noop_stage_wall_ns_per_pkt']:.2f})")
        print(f"ratio          {r['ratio']:8.3f} (wall {r['wall_ratio']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
