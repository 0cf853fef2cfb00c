"""Software RSS: the Toeplitz hash of IPv4/UDP tuples in bulks of 32 (see
:mod:`pktbuf.bench.rss`; ``pktbuf bench rss`` sets it beside DPDK's rte_softrss).  One nogil
kernel call hashes many bulks; the lookup table is built once per key."""

from pktbuf.bench.core import NEVER, QUICK
from pktbuf.bench.rss import RssBench
from pktbuf.bench.tsc import tsc_hz
from pktbuf.net.rss.thash import DEFAULT_RSS_KEY, key_array, new_table, thash_table_init

BULKS = 200 if QUICK else 20_000


class RssHash:
    timeout = 180

    def setup(self):
        self.b = RssBench()                       # compiles (first time) and warms

    def time_hash_bulks_of_32(self):
        self.b.cycles(1, BULKS, NEVER)

    def track_ns_per_packet(self):
        return min(self.b.cycles(1, BULKS, NEVER)[0] for _ in range(5)) * 1e9 / tsc_hz()

    track_ns_per_packet.unit = "ns"


class RssTable:
    """Building the 36-row lookup table from a key (once per port configuration)."""

    def setup(self):
        self.key = key_array(DEFAULT_RSS_KEY)
        self.table = new_table()
        thash_table_init(self.key, self.table)

    def time_table_init(self):
        thash_table_init(self.key, self.table)


