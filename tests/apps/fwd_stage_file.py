"""A stage the tests load by its file path (``--stage tests/apps/fwd_stage_file.py:swap``):
packets received on port 0 go out of port 0 again, those of port 1 are dropped (reason
``from1``); ``count`` counts the bursts."""
from numba import njit

from pktbuf.apps.stage.abi import stage_drop
from pktbuf.apps.stage.api import Stage


@njit(nogil=True, cache=True)
def back(state, dom, rx_port, pkts, n, dest, cnt):
    for i in range(n):
        dest[i] = 0 if rx_port == 0 else stage_drop(0)
    cnt[0] += 1


STAGE = Stage(back, counters=("bursts",), drop_reasons=("from1",))
