"""The l3fwd stage kernel on one burst of 32 frames, EM and LPM (see
:mod:`pktbuf.bench.l3fwd_stage`; ``pktbuf bench l3fwd`` runs the whole forwarder against DPDK's
l3fwd)."""

from pktbuf.bench.core import QUICK
from pktbuf.bench.l3fwd_stage import StageBench

BURSTS = 200 if QUICK else 20_000


class L3fwdStage:
    params = ["em", "lpm"]
    param_names = ["mode"]
    timeout = 300

    def setup(self, mode):
        self.b = StageBench(mode)                 # compiles (first time) and warms

    def teardown(self, mode):
        self.b.close()

    def time_stage_bursts_of_32(self, mode):
        self.b.run(BURSTS)

    def track_ns_per_packet(self, mode):
        return min(self.b.run(BURSTS) for _ in range(5))

    track_ns_per_packet.unit = "ns"
