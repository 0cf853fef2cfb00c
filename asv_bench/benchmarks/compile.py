"""Cold compile time: what a first run pays before its first packet moves.

Each case compiles ``pktbuf compile`` units into an empty ``NUMBA_CACHE_DIR`` in a fresh
interpreter (``timeraw_``), in one process, so the figure is the CPU time of the compilation
and does not depend on the number of cores.  ``PKTBUF_BENCH_QUICK=1`` (CI's smoke run) compiles
the smallest unit only.  ``pktbuf compile --report`` breaks a figure down per kernel.
"""
import os

QUICK = os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")

_SETUP = """
import os, tempfile
os.environ['NUMBA_CACHE_DIR'] = tempfile.mkdtemp(prefix='pktbuf-cold-')
"""
_RUN = """
from pktbuf.apps.compile import run_unit, units_for
for u in {units!r}:
    run_unit(u)
"""


class ColdCompile:
    """Seconds to compile a target's units cold, in one process."""
    timeout = 1800
    repeat = 1
    number = 1
    params = [["ring"] if QUICK else ["core", "fwd:pcap", "demo"]]
    param_names = ["target"]

    def timeraw_cold(self, target):
        # quick: the ring port's bursts alone (not the units they build on): a smoke test
        units = _units("ring", deps=False) if QUICK else _units(target)
        return _RUN.format(units=units), _SETUP


def _units(target, deps=True):
    from pktbuf.apps.compile import units_for
    return units_for([target], deps=deps)      # "ring": its Rx and Tx units
