"""What a do-nothing stage costs over ``pktbuf fwd``'s io mode, in the same run.

Two ``net_ring`` loopback ports, each primed with ``--pkts`` mbufs; streams 0 -> 1 and 1 -> 0,
so every packet sent is received again at once and the loops never idle.  Rounds alternate
between ``fwd_loop`` in io mode and the generated loop of
:func:`~pktbuf.apps.stage.abi.noop_stage` (a user stage that leaves every packet on its
default port), ``--slice`` seconds each; the figure is nanoseconds per forwarded packet (on one
core, cycles per packet scale with it), and the ratio of the medians.

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
            t0 = time.perf_counter_ns()
            loop(eth, 0, 0, streams, M_IO, burst, macs, macs, hdrs, 60,
                 time.monotonic_ns() + int(sec * 1e9), cnt, pk, False, BUSY_POLL, ring)
            return (time.perf_counter_ns() - t0) / max(1, int(cnt[:, F_RX].sum()))

        def stg(sec):
            runner.cnt[:] = 0
            t0 = time.perf_counter_ns()
            runner.run(sec)
            return (time.perf_counter_ns() - t0) / max(1, int(runner.cnt[:, F_RX].sum()))

        fwd(0.01)                       # compile / load both before timing
        stg(0.01)
        a, b = [], []
        for _ in range(rounds):
            a.append(fwd(slice_s))
            b.append(stg(slice_s))
        fa, fb = statistics.median(a), statistics.median(b)
        return {"io_ns_per_pkt": fa, "noop_stage_ns_per_pkt": fb, "ratio": fb / fa,
                "io_samples": a, "stage_samples": b, "burst": burst, "pkts_per_port": pkts}
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
        print(f"io mode        {r['io_ns_per_pkt']:8.2f} ns/packet (median of {a.rounds})")
        print(f"no-op stage    {r['noop_stage_ns_per_pkt']:8.2f} ns/packet")
        print(f"ratio          {r['ratio']:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
