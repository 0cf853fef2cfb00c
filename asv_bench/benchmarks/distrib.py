"""Scale-out stages (:mod:`pktbuf.bench.distrib`): the distributor hop's added ns per packet,
the two-core distributor pipeline, and one against two self-fed workers."""
from pktbuf.bench.core import QUICK
from pktbuf.bench import distrib as D   # (a module-level name "Setup" is asv's setup hook)


class Distributor:
    timeout = 600

    def setup_cache(self):
        s = D.Setup()
        try:
            seconds, rounds = (0.3, 1) if QUICK else (2.0, 3)
            return {"hop": D.measure_hop(s, 3 if QUICK else 11,
                                         100_000 if QUICK else 2_000_000),
                    "pipeline": D.measure_pipeline(s, seconds, rounds),
                    "workers": D.measure_workers(s, seconds, rounds)}
        finally:
            s.close()

    def track_hop_added_ns(self, r):
        return r["hop"]["hop_added_ns"]["value"]

    track_hop_added_ns.unit = "ns/packet"

    def track_hop_prehashed_added_ns(self, r):
        return r["hop"]["hop_prehashed_added_ns"]["value"]

    track_hop_prehashed_added_ns.unit = "ns/packet"

    def track_pipeline_mpps(self, r):
        return r["pipeline"]["pipeline_mpps"]

    track_pipeline_mpps.unit = "Mpps"

    def track_two_workers_ratio(self, r):
        return r["workers"]["ratio"]

    track_two_workers_ratio.unit = "ratio"
