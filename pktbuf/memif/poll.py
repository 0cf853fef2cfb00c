"""Polling discipline: back-off when idle, and interrupt waits on the ring eventfds.

On a 2-core machine three busy-polling processes collapse throughput (about 100x measured):
a poller that finds nothing must give the CPU away.  Two tools, both usable from ``@njit``:

* :func:`backoff_idle` / :func:`backoff_reset` over a small ``int64`` state array
  (:func:`backoff_new`) that counts consecutive empty polls; the policy is the core's
  :func:`pktbuf.idle.idle_backoff` (``pause`` spins, then ``sched_yield``, then sleeps growing
  to ``SLEEP_MAX_US`` = 1 ms).  A poll that finds work resets it.  An idle interface then costs
  about a thousand short wake-ups per second instead of a core.
* :func:`memif_rx_wait`: interrupt mode.  If the queue's receive ring has ``MASK_INT`` clear (the
  interface was created with ``interrupt=True``), the peer writes the ring's eventfd after it
  publishes; ``memif_rx_wait`` blocks in ``poll()`` on it (up to ``timeout_ms``) and resets the
  counter.  DPDK's memif never clears ``MASK_INT`` on its own Rx rings, but pktbuf as a sender
  honours a peer that did, and pktbuf as a receiver sleeps when its peer signals (a pktbuf peer
  does; a DPDK 22.11 peer signals from its copy-mode Tx, ``shared/specs/memif.md`` 5.5).
  Without the flag ``memif_rx_wait`` falls back to one back-off step, so a loop written with it never
  spins at full speed.
"""
from __future__ import annotations

import numpy as np

from .._jit import kernel
from ..atomics import load_acquire, load_relaxed
from ..idle import idle_backoff, usleep
from ._sys import eventfd_drain, fd_wait
from .layout import H16_FLAGS, RING_FLAG_MASK_INT, RING_HDR_SIZE
from .queue import Q_EVENTFD, Q_RING, QS_UP, queue_enter, queue_leave
from ..rawmem import addr_u8

SLEEP_MAX_US = 1000

B_IDLE = 0        # consecutive empty polls
B_WORDS = 4


def backoff_new() -> np.ndarray:
    """A fresh back-off state for one polling loop."""
    return np.zeros(B_WORDS, np.int64)


@kernel
def backoff_reset(b):
    """Call after a poll that found work."""
    b[B_IDLE] = 0


@kernel
def backoff_idle(b):
    """Call after an empty poll: spin, then yield, then sleep (``pktbuf.idle.idle_backoff``)."""
    idle_backoff(b[B_IDLE], SLEEP_MAX_US)
    b[B_IDLE] += 1


@kernel
def memif_rx_wait(q, b, timeout_ms):
    """Wait for traffic on an Rx queue: block on its eventfd in interrupt mode, else back off.

    Returns 1 if woken by the eventfd, 0 otherwise (timeout, polling mode, link down).
    """
    if not queue_enter(q):
        usleep(1000)
        return 0
    fd = q.cfg[Q_EVENTFD]
    r16 = addr_u8(q.cfg[Q_RING], RING_HDR_SIZE).view(np.uint16)
    woken = 0
    if fd >= 0 and (load_relaxed(r16, H16_FLAGS) & RING_FLAG_MASK_INT) == 0:
        if fd_wait(fd, timeout_ms) > 0:
            eventfd_drain(fd)
            woken = 1
    else:
        backoff_idle(b)
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
