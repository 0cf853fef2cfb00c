"""memif: copy-path costs (loopback, one thread), fast vs general and zero-copy vs copy ratios,
and pps between two pktbuf processes (one way, round trip) next to testpmd <-> testpmd.

The loopback loop runs inside jitted code (generate a burst of 32 as testpmd's txonly does,
memif_tx_burst on the client queue, memif_rx_burst on the server queue, free) and is compiled in
``setup``.  Ratios are measured interleaved in one run (``track_``, medians).  Two-process
figures spawn processes and take a few seconds each, on the schedule of
:class:`pktbuf.bench.memif_runs.Schedule`.  ``pktbuf bench memif`` prints all of them as one
table.
"""
import os

from pktbuf.bench.memif import (RELATIONS, Loopback, Schedule, compare, loopback_ratio,
                                loopback_zc_ratio, pktbuf_pair, warm)

# PKTBUF_BENCH_QUICK=1 (CI: "does every benchmark still run?"): one short repetition each, at
# one frame size (1500 B where the copy-loop shape depends on it: it splits over the smaller
# buffers), a few hundred bursts per timing, two-process runs of about a second
QUICK = os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")
REP = 1 if QUICK else 5
ITERS = 200 if QUICK else 2000
SCHED = Schedule(0.3, 2, 0.3) if QUICK else Schedule(1.0, 6, 0.5)
SIZES = [1500] if QUICK else [64, 1500]
SIZES_64 = [64] if QUICK else [64, 1500]


class MemifLoopback:
    """ns per packet through client Tx -> server Rx in one thread, per path and size."""
    params = (SIZES, ["eq", "lt", "gt", "general"])
    param_names = ["size", "path"]
    timeout = 120

    def setup(self, size, path):
        bs = RELATIONS.get(path, 2048)
        self.lo = Loopback(bs, force_general=(path == "general"))
        self.lo.run(size, 10)

    def teardown(self, size, path):
        self.lo.close()

    def time_1000_bursts(self, size, path):
        self.lo.run(size, ITERS // 2)

    def track_ns_per_packet(self, size, path):
        return self.lo.ns_per_packet(size, ITERS, repeat=REP)

    track_ns_per_packet.unit = "ns"


class MemifFastOverGeneral:
    """general / fast ns per packet, same run (target: >= 1.2 for equal sizes, 'eq')."""
    params = (SIZES, ["eq", "lt", "gt"])
    param_names = ["size", "relation"]
    timeout = 180

    def setup(self, size, relation):
        Loopback().close()     # compile before timing

    def track_ratio(self, size, relation):
        return loopback_ratio(size, relation, repeat=REP, iters=ITERS)["ratio"]

    track_ratio.unit = "ratio"


class MemifZeroCopy:
    """copy / zero-copy ns per packet for the client's Tx (> 1: zero-copy is cheaper)."""
    params = SIZES_64
    param_names = ["size"]
    timeout = 180

    def setup(self, size):
        Loopback(zero_copy=True).close()

    def track_copy_over_zc(self, size):
        return loopback_zc_ratio(size, repeat=REP, iters=ITERS)["ratio"]

    track_copy_over_zc.unit = "ratio"


class MemifTwoProcess:
    """Mpps received between two pktbuf processes (client CPU 0, server CPU 1)."""
    params = (["oneway", "roundtrip"], SIZES_64, ["fast", "general", "zero-copy"])
    param_names = ["case", "size", "mode"]
    timeout = 300
    number = 1
    repeat = 1

    def setup(self, case, size, mode):
        if mode != "fast" and (case != "oneway" or size != 64):
            raise NotImplementedError("general / zero-copy are measured one way at 64 B")
        warm()

    def track_mpps(self, case, size, mode):
        r = pktbuf_pair(case, size, SCHED, general=(mode == "general"), zc=(mode == "zero-copy"))
        if not r.ok:
            raise RuntimeError(r.reason)
        return r.mpps

    track_mpps.unit = "Mpps"


class MemifVsTestpmd:
    """pktbuf -> pktbuf one way / testpmd -> testpmd one way, interleaved rounds in one run
    (target: >= 1.3 at 64 B).  Skipped only when dpdk-testpmd is not installed; a testpmd that
    fails to run fails the benchmark."""
    params = SIZES_64
    param_names = ["size"]
    timeout = 300
    number = 1
    repeat = 1

    def setup(self, size):
        warm()

    def track_pktbuf_over_testpmd(self, size):
        c = compare(size, rounds=1 if QUICK else 3, sched=SCHED)
        if c["testpmd_status"] == "not available":
            raise NotImplementedError("dpdk-testpmd is not installed")
        if c["ratio"] is None:
            raise RuntimeError(f"testpmd {c['testpmd_status']}")
        return c["ratio"]

    track_pktbuf_over_testpmd.unit = "ratio"
