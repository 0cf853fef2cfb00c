"""pcap: pktbuf's burst kernels reading and writing capture files, next to dpkt in the same
run (:func:`pktbuf.bench.pcap.compare`).  The compiled loops are compiled in ``setup``."""
import os
import tempfile

import pktbuf
from pktbuf.bench.pcap import compare, pktbuf_read, pktbuf_write

QUICK = os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")
N = 20_000 if QUICK else 200_000
REP = 1 if QUICK else 5


class PcapBurst:
    """Seconds to write / read N frames through a PcapPort (compiled loops, bursts of 32)."""
    params = [64] if QUICK else [64, 1500]
    param_names = ["size"]
    timeout = 180

    def setup(self, size):
        self.dir = tempfile.mkdtemp(prefix="pktbuf-asv-pcap-")
        self.path = os.path.join(self.dir, "f.pcap")
        self.pool = pktbuf.PktmbufPool(8192, cache_size=256, name="asv-pcap")
        pktbuf_write(self.pool, self.path, N, size)
        pktbuf_read(self.pool, self.path)

    def teardown(self, size):
        self.pool.close(force=True)
        os.unlink(self.path)
        os.rmdir(self.dir)

    def time_write(self, size):
        pktbuf_write(self.pool, self.path, N, size)

    def time_read(self, size):
        pktbuf_read(self.pool, self.path)


class PcapOverDpkt:
    """pktbuf Mpps / dpkt Mpps, same run, 64-byte frames (targets: >= 50 both ways)."""
    timeout = 300

    def setup(self):
        self.res = compare(n=N, size=64, repeat=REP)

    def track_write_ratio(self):
        return self.res["write_ratio"]

    track_write_ratio.unit = "ratio"

    def track_write_null_ratio(self):
        return self.res["write_null_ratio"]

    track_write_null_ratio.unit = "ratio"

    def track_read_ratio(self):
        return self.res["read_ratio"]

    track_read_ratio.unit = "ratio"
