"""The stage loop of a distributor-fed worker (``pktbuf fwd --workers N --distributor
--stage``): take the worker's packets from the distributor, let the stage decide each one,
free the drops, hand the rest back with the decided Tx port.

Like :mod:`pktbuf.apps.stage.loop`, this file is the **template** of a generated loop per
stage (:mod:`pktbuf.apps.stage.gen`: the ``STAGE-HOOK`` line becomes the stage's import), so
its imports are absolute.

The worker owns no port: the Rx/Tx process received the packets and sends what comes back.
So the decision travels in the mbuf: a kept packet's ``port`` field (its Rx port until then)
becomes the Tx port the stage chose, and the Rx/Tx process sends every returned packet on the
port its ``port`` field names (``DistribForwarder``'s identity map under ``--stage``).  The
stage is called once per run of consecutive packets from the same Rx port (one call per burst
when the input is one port), with ``dest`` prefilled with that port's default Tx port
(``txmap``; a port without a stream gets a port id past the table: counted as ``invalid``).
Drops are freed here, counted per reason (``drops``) and per Rx port (``pdrop``), and told to
the distributor as done (``distributor_worker_done``) so its accounting of what the worker
holds stays exact.  A return ring that stays full for ``HOLD_NS`` (nobody collects) makes the
worker free what it holds, as :func:`pktbuf.apps.fwd.distrib_loop.dist_worker_loop` does.
"""
from __future__ import annotations

import numpy as np

from pktbuf._jit import kernel
from pktbuf.apps.stage.abi import noop_stage as run_stage  # STAGE-HOOK
from pktbuf.buf.mbuf.free import pktmbuf_free_bulk
from pktbuf.idle import idle_backoff, now_ns
from pktbuf.net.distrib.kernels import (
    distributor_return_or_free,
    distributor_worker_burst,
    distributor_worker_done,
)

HOLD_NS = 100_000_000


@kernel
def stage_dist_loop(dom, d, w, lcore, txmap, maxp, state, pdrop, scnt, drops, dest, pk, burst,
                    deadline_ns, idle_max_us):
    """Worker ``w`` until ``deadline_ns``: see the module docstring.  ``txmap``: int64[ports],
    each Rx port's default Tx port (-1: none); ``maxp``: port ids at or past it are invalid;
    ``pdrop``: int64[ports], what the stage dropped per Rx port; ``scnt``: the stage's
    counters; ``drops``: int64[reasons + 1]; ``dest``, ``pk``: int32 scratch of at least
    ``burst``.  Returns the packets handled."""
    mb = dom.mb
    nr = drops.shape[0]
    burst = min(burst, pk.size, dest.size)
    idle = 0
    handled = 0
    while True:
        n = distributor_worker_burst(d, w, pk, burst)
        if n > 0:
            idle = 0
            handled += n
            s = 0
            while s < n:                    # one stage call per run of one Rx port
                rxp = np.int64(mb[pk[s]].port)
                e = s + 1
                while e < n and np.int64(mb[pk[e]].port) == rxp:
                    e += 1
                dflt = maxp
                if rxp < txmap.size and txmap[rxp] >= 0:
                    dflt = txmap[rxp]
                for i in range(s, e):
                    dest[i] = dflt
                run_stage(state, dom, rxp, pk[s:e], e - s, dest[s:e], scnt)
                s = e
            kept = 0
            nd = 0
            for i in range(n):
                dd = dest[i]
                h = pk[i]
                if dd >= 0 and dd < maxp:
                    mb[h].port = dd
                    pk[kept] = h
                    kept += 1
                else:
                    r = -1 - dd
                    if dd >= 0 or r >= nr - 1:
                        r = nr - 1
                    drops[r] += 1
                    p = np.int64(mb[h].port)
                    if p < pdrop.size:
                        pdrop[p] += 1
                    dest[nd] = h            # nd <= i: dest[i] is read already
                    nd += 1
            if nd > 0:
                pktmbuf_free_bulk(dom, lcore, dest, nd)
                distributor_worker_done(d, w, nd)
            distributor_return_or_free(dom, d, w, lcore, pk, kept, HOLD_NS, idle_max_us)
        else:
            idle_backoff(idle, idle_max_us)
            idle += 1
        if now_ns() >= deadline_ns:
            return handled
