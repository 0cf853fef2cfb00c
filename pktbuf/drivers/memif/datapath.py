"""memif data path: ``memif_rx_burst`` / ``memif_tx_burst``, the kernels a data plane calls.

Call them from your own ``@njit`` code with DPDK's semantics::

    n = memif_rx_burst(dom, q, lcore, out, 32)   # n packets (mbuf handles) in out[:n]
    k = memif_tx_burst(dom, q, lcore, pkts, n)   # pkts[:k] sent and now owned by the queue;
                                                 # pkts[k:n] are still yours

``dom`` is the domain state (``pool.domain.state``), ``q`` the queue's
:data:`~pktbuf.drivers.memif.queue.MEMIF_QUEUE` block (``memif.rx_queue(0)``), ``lcore`` the lcore whose
mempool cache the burst uses.  Both return 0 while the link is down.  Neither ever raises; a
peer that breaks the protocol takes the queue down (the control thread then disconnects with
a reason).

Each burst enters the queue (a busy count the control plane waits on before it unmaps
anything, :mod:`.queue`) and dispatches on the queue's kind and copy path:

* copy mode, :mod:`.rx_copy` / :mod:`.tx_copy`: three copy loops each, chosen once per queue
  from the memif buffer size and the mbuf data room (``Q_PATH``); a fast loop that meets a
  descriptor or segment it cannot take returns ``FALLBACK`` before touching anything, and the
  burst runs the general loop instead (counted in ``st[QS_FALLBACK]``).  ``Q_PATH = P_GENERAL``
  (``force_general=True``) forces the general loop -- DPDK 22.11's loop shape -- for A/B runs;
* zero-copy (client), :mod:`.zerocopy`.

The fast copy loops are called by name; the general and zero-copy loops through addresses
in the queue's ``cfg``, compiled when a device needs them (:mod:`.variants`), so that they
are not compiled into every burst and every loop that calls one.

The pieces all bursts share are in :mod:`.burst`; the checks of what the peer wrote in
:mod:`.validate`.
"""
from __future__ import annotations

from ..._jit import kernel
from ...atomics import load_acquire
from .burst import FALLBACK, L_ONE, L_SPLIT
from .queue import (K_CLIENT_RX, K_CLIENT_RX_ZC, K_CLIENT_TX, K_CLIENT_TX_ZC, K_SERVER_RX,
                    K_SERVER_TX, P_EQ, P_GT, P_LT, Q_FN_GENERAL, Q_FN_PATH, Q_KIND, Q_PATH,
                    QS_FALLBACK, QS_UP, queue_enter, queue_leave)
from .rx_copy import rx_copy
from .tx_copy import tx_copy
from .variants import via_address

__all__ = ["memif_rx_burst", "memif_tx_burst", "memif_link_up"]


@kernel
def memif_link_up(q):
    """True while the queue's link is up (bursts move packets)."""
    return load_acquire(q.st, QS_UP) != 0


@kernel(inline="always")
def _rx_copy_path(dom, q, lcore, out, n):
    """Copy Rx: the path's fast loop (``B <= C``: one-to-one, ``B > C``: split), else the
    general loop (through its address, :mod:`.variants`)."""
    path = q.cfg[Q_PATH]
    if path == P_EQ or path == P_LT:
        r = rx_copy(dom, q, lcore, out, n, L_ONE)
        if r != FALLBACK:
            return r
        q.st[QS_FALLBACK] += 1
    elif path == P_GT:
        return rx_copy(dom, q, lcore, out, n, L_SPLIT)
    return via_address(q.cfg[Q_FN_GENERAL], dom, q, lcore, out, n)


@kernel(inline="always")
def _tx_copy_path(dom, q, lcore, mbufs, n):
    """Copy Tx: the path's fast loop (``B >= C``: one-to-one, ``B < C``: split), else the
    general loop (through its address, :mod:`.variants`)."""
    path = q.cfg[Q_PATH]
    if path == P_EQ or path == P_GT:
        r = tx_copy(dom, q, lcore, mbufs, n, L_ONE)
    elif path == P_LT:
        r = tx_copy(dom, q, lcore, mbufs, n, L_SPLIT)
    else:
        return via_address(q.cfg[Q_FN_GENERAL], dom, q, lcore, mbufs, n)
    if r != FALLBACK:
        return r
    q.st[QS_FALLBACK] += 1
    return via_address(q.cfg[Q_FN_GENERAL], dom, q, lcore, mbufs, n)


@kernel
def memif_rx_burst(dom, q, lcore, out, n):
    """Receive up to ``n`` packets into ``out[:n]``; returns how many (DPDK ``rte_eth_rx_burst``).

    The packets are mbufs of the queue's Rx pool (chained when a packet spans several
    buffers); they are the caller's to free.  0 when the link is down, nothing arrived, the
    pool is empty (``st[QS_NOMBUF]`` counts those bursts; the packets stay in the ring) or the
    peer broke the protocol (the queue then goes down).
    """
    if n > out.size:
        n = out.size
    if n <= 0 or not queue_enter(q):
        return 0
    kind = q.cfg[Q_KIND]
    r = 0
    if kind == K_CLIENT_RX or kind == K_SERVER_RX:
        r = _rx_copy_path(dom, q, lcore, out, n)
    elif kind == K_CLIENT_RX_ZC:
        r = via_address(q.cfg[Q_FN_PATH], dom, q, lcore, out, n)      # zero-copy
    queue_leave(q)
    return r


@kernel
def memif_tx_burst(dom, q, lcore, mbufs, n):
    """Send up to ``n`` packets from ``mbufs[:n]``; returns how many (DPDK ``rte_eth_tx_burst``).

    The first ``k`` (the return value) now belong to the queue (copy mode: already freed with
    one run-grouped bulk free; zero-copy: freed once the peer has consumed them); the rest are
    still the caller's.  Sending stops at the first packet that does not fit in the ring.
    """
    if n > mbufs.size:
        n = mbufs.size
    if n <= 0 or not queue_enter(q):
        return 0
    kind = q.cfg[Q_KIND]
    r = 0
    if kind == K_CLIENT_TX or kind == K_SERVER_TX:
        r = _tx_copy_path(dom, q, lcore, mbufs, n)
    elif kind == K_CLIENT_TX_ZC:
        r = via_address(q.cfg[Q_FN_PATH], dom, q, lcore, mbufs, n)    # zero-copy
    queue_leave(q)
    return r
