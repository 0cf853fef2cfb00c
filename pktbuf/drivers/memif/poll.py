"""Waiting on a memif queue: interrupt mode through the ring eventfds, and the link.

* :func:`memif_rx_wait`: interrupt mode.  If the queue's receive ring has ``MASK_INT`` clear
  (the interface was created with ``interrupt=True``), the peer writes the ring's eventfd
  after it publishes; ``memif_rx_wait`` blocks in ``poll()`` on it (up to ``timeout_ms``) and
  drains it.  DPDK's memif never clears ``MASK_INT`` on its own Rx rings, but pktbuf as a
  sender honours a peer that did, and pktbuf as a receiver sleeps when its peer signals (a
  pktbuf peer does; so does a DPDK 22.11 peer from its copy-mode Tx -- docs/memif.md,
  "Interrupts").  Without the flag it takes one step of pktbuf's polling back-off
  (:func:`pktbuf.idle.idle_backoff`) instead, so a loop written with it never spins at full
  speed.
* :func:`memif_link_wait`: sleep until the queue's link is up.

Both are kernels for your own ``@njit`` loops, as the bursts are.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_acquire, load_relaxed
from ...idle import IDLE_SLEEP_MAX_US, idle_backoff, usleep
from ...rawmem import addr_view
from ._sys import eventfd_drain, fd_wait
from .layout import H16_FLAGS, RING_FLAG_MASK_INT, RING_HDR_SIZE
from .queue import Q_EVENTFD, Q_RING, QS_UP, queue_enter, queue_leave

__all__ = ["memif_rx_wait", "memif_link_wait"]


@kernel
def memif_rx_wait(q, empty_polls, timeout_ms):
    """Wait for traffic on an Rx queue: block on its eventfd in interrupt mode, else back off
    (``idle_backoff(empty_polls, IDLE_SLEEP_MAX_US)``; count your empty polls as for it).

    Returns 1 if woken by the eventfd, 0 otherwise (timeout, polling mode, link down -- then
    after a 1 ms sleep, so a loop over a down link does not spin).
    """
    if not queue_enter(q):
        usleep(1000)
        return 0
    fd = q.cfg[Q_EVENTFD]
    r16 = addr_view(q.cfg[Q_RING], RING_HDR_SIZE // 2, np.uint16)
    woken = 0
    if fd >= 0 and (load_relaxed(r16, H16_FLAGS) & RING_FLAG_MASK_INT) == 0:
        if fd_wait(fd, timeout_ms) > 0:
            eventfd_drain(fd)
            woken = 1
    else:
        idle_backoff(empty_polls, IDLE_SLEEP_MAX_US)
    queue_leave(q)
    return woken


@kernel
def memif_link_wait(q, timeout_ms):
    """Sleep until the queue's link is up or ``timeout_ms`` passed; True if up."""
    waited = 0
    while load_acquire(q.st, QS_UP) == 0:
        if waited >= timeout_ms * 1000:
            return False
        usleep(1000)
        waited += 1000
    return True
