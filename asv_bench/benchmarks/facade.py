"""The Python facade: per-call overhead, and import + first burst in a fresh interpreter."""
import numpy as np

import pktbuf

_SETUP = """
import os, tempfile
{cache}
"""
_FIRST_BURST = """
import pktbuf
p = pktbuf.PktmbufPool(8192, 256)
a = p.alloc_bulk(32)
p.free_bulk(a)
"""


class FacadeOverhead:
    """alloc_bulk(32) + free_bulk from plain Python (target: at most 3 us per pair)."""
    timeout = 180    # setup loads the pool's kernels: past asv's 60 s on a loaded machine

    def setup(self):
        self.pool = pktbuf.PktmbufPool(8192, 256)
        self.out = np.empty(32, np.int32)
        self.pool.free_bulk(self.pool.alloc_bulk(32, out=self.out))   # compile / load first
        self.pool.free_bulk(self.pool.alloc_bulk(32))
        self.pool.alloc().free()

    def teardown(self):
        self.pool.close(force=True)

    def time_alloc_bulk_free_bulk_32(self):
        self.pool.free_bulk(self.pool.alloc_bulk(32, out=self.out))

    def time_alloc_bulk_32_new_array(self):
        a = self.pool.alloc_bulk(32)
        self.pool.free_bulk(a)

    def time_single_alloc_free(self):
        self.pool.alloc().free()

    def track_pair_over_floor(self):
        """alloc_bulk(32) + free_bulk over two empty compiled calls made the same way (the
        entry points' floor: CPython's call, Numba's argument unboxing), timed in the same
        process, interleaved.  Both are CPython-bound, so the ratio is much the same on any
        machine; what it measures is the facade's own validation and dispatch.  Lower is
        better."""
        from pktbuf.bench.report import facade_pair_us
        pair, floor = facade_pair_us(2000)
        return pair / floor

    track_pair_over_floor.unit = "ratio"


class FirstBurst:
    """import pktbuf + pool + first alloc_bulk/free_bulk in a fresh interpreter.
    Warm: with the compiled cache present (target <= 1.5 s).  Cold: an empty cache directory."""
    timeout = 600
    repeat = 3
    number = 1

    def timeraw_warm_cache(self):
        # the first repeat may compile; asv reports the median of `repeat`
        return _FIRST_BURST

    def timeraw_cold_cache(self):
        # (statement, setup): the setup points Numba at an empty cache directory
        return _FIRST_BURST, _SETUP.format(
            cache="os.environ['NUMBA_CACHE_DIR'] = tempfile.mkdtemp(prefix='pktbuf-cold-')")
