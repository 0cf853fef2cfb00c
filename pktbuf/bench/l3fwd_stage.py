"""The l3fwd stage kernel alone, timed inside Numba: ns per packet of ``l3fwd_stage`` on one
burst of 32 IPv4/UDP frames to l3fwd's built-in flows (EM: the 16 ``l3fwd_em.c`` flows, LPM:
the built-in routes), port mask 0x7 -- the lookup, the RFC 1812 step and the MAC rewrite with
no ports around it (``pktbuf bench l3fwd`` times the whole forwarder against DPDK's).

``python -m pktbuf.bench.l3fwd_stage [--mode em|lpm] [--bursts N] [--reps N]``
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from .._jit import kernel
from ..apps.l3fwd import kernels as K
from ..apps.l3fwd import routes
from ..apps.l3fwd.app import Tables, make_cfg, make_state
from ..apps.l3fwd.options import Options
from ..drivers.common.kinds import MAX_PORTS
from .l3fwd_gen import PKT_LEN, l3fwd_headers

BURST = 32
MASK = 0x7


@kernel
def stage_loop(state, dom, pkts, dest, cnt, bursts):
    """``bursts`` calls of the stage on the same burst; returns a checksum of the ports."""
    s = 0
    for _ in range(bursts):
        K.l3fwd_stage(state, dom, 0, pkts, BURST, dest, cnt)
        s += dest[0] + dest[BURST - 1]
    return s


class StageBench:
    """A pool, the tables of ``mode`` (``"em"`` or ``"lpm"``) and one burst, warmed."""

    def __init__(self, mode: str = "em"):
        import pktbuf
        if mode == "em":
            v4, v6 = routes.default_em(False), routes.default_em(True)
            flows = [(r.src, r.dst, r.src_port, r.dst_port) for r in v4]
        else:
            v4, v6 = routes.default_lpm(False), routes.default_lpm(True)
            flows = [(bytes((198, 18, 9, 1)), bytes((198, 18, x, 0)), 9, 9) for x in range(16)]
        self.tables = Tables(mode, MASK, v4, v6, ipv6_em=False)
        self.state = make_state(self.tables, make_cfg(Options(portmask=MASK, lookup=mode)),
                                np.zeros((MAX_PORTS, 12), np.uint8))
        self.pool = pktbuf.PktmbufPool(256, 0, name=f"bench-l3fwd-{mode}")
        self.mbufs = []
        for i in range(BURST):
            m = self.pool.alloc()
            src, dst, sport, dport = flows[i % len(flows)]
            hdr = l3fwd_headers(PKT_LEN, src_ip=src, dst_ip=dst, sport=sport, dport=dport)
            m.append_bytes(hdr.tobytes() + bytes(PKT_LEN - hdr.size))
            self.mbufs.append(m)
        self.pkts = np.array([int(m) for m in self.mbufs], np.int32)
        self.dest = np.zeros(BURST, np.int32)
        self.cnt = np.zeros(len(K.COUNTERS), np.int64)
        self.run(10)

    def run(self, bursts: int) -> float:
        """ns per packet of ``bursts`` bursts."""
        t = time.perf_counter_ns()
        stage_loop(self.state, self.pool.domain.state, self.pkts, self.dest, self.cnt, bursts)
        return (time.perf_counter_ns() - t) / (bursts * BURST)

    def close(self):
        for m in self.mbufs:
            m.free()
        self.pool.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pktbuf.bench.l3fwd_stage")
    ap.add_argument("--mode", choices=("em", "lpm"), default="em")
    ap.add_argument("--bursts", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=9)
    a = ap.parse_args(argv)
    b = StageBench(a.mode)
    try:
        res = [b.run(a.bursts) for _ in range(a.reps)]
    finally:
        b.close()
    print(f"l3fwd stage ({a.mode}), burst of {BURST}: {statistics.median(res):.2f} ns/packet "
          f"(median of {a.reps}; min {min(res):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
