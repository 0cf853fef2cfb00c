"""Interrupt mode on a virtio-user Rx queue (vring 2k, device to driver): sleep on the call
eventfd.

The front end polls: at setup it asks the back end not to call (split: avail flags
``NO_INTERRUPT``; packed: driver event area ``DISABLE``).  :func:`virtio_user_rx_wait` lets a
receiver with nothing to do sleep instead, as a virtio driver does when it re-enables
interrupts on an idle queue (virtio 1.1 §2.6.7, §2.7.10; docs/vhost.md, "Interrupt mode"):

1. a used buffer waiting already?  Then return at once, without a system call;
2. reset the call eventfd (a call the back end made while we polled is stale), then ask for
   calls: split: clear ``NO_INTERRUPT`` in the avail flags, or with EVENT_IDX publish
   ``used_event`` = the next used index we will read (the device calls once its index passes
   it); packed: driver event flags ``ENABLE`` (with or without EVENT_IDX);
3. a full barrier, then look at the used ring **again** (no lost wake-up: a buffer used
   before the back end could see our request would never be called for);
4. ``poll()`` on the call eventfd up to ``timeout_ms`` (-1: forever), read it when it fired;
5. stop the calls again (we poll while busy; with EVENT_IDX the stale ``used_event`` stays
   behind the device's index, which comes round to it once in 65536 buffers).

The wait holds the queue's burst gate; the control thread writes the call eventfd itself
after it took the link flag down, so a sleeper returns before the rings go
(:meth:`~pktbuf.drivers.virtio_user.device.VirtioUserDevice._disconnect`).  The call fds are
this side's own eventfds.  A kernel for your own ``@njit`` loops, as the bursts are.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import fence, load_acquire, store_relaxed
from ...idle import usleep
from ...rawmem import addr_view
from ...syscalls import POLLIN, fd_poll
from ..common.gate import queue_enter, queue_leave
from ..common.eventfd import eventfd_drain
from ..vhost.layout import (A16_FLAGS, A16_RING, AVAIL_F_NO_INTERRUPT, EVENT_F_DISABLE,
                            EVENT_F_ENABLE,
                            IDX_MASK, U16_IDX)
from ..vhost.wait import ENETDOWN
from .layout import (Q_AVAIL, Q_CALLFD, Q_EVENT_IDX, Q_N, Q_PACKED, QS_UP, QS_USED_SEEN,
                     QS_USED_WRAP,
                     QS_WAITS)
from .packed import PK_USED, pk_state
from .vring import avail_view, desc_view, used_view16

__all__ = ["virtio_user_rx_wait"]


@kernel(inline="always")
def used_ready(q):
    """Whether the back end published a used buffer past the next one we read."""
    if q.cfg[Q_PACKED]:
        return pk_state(desc_view(q), q.st[QS_USED_SEEN], q.st[QS_USED_WRAP])[0] == PK_USED
    idx = np.int64(load_acquire(used_view16(q), U16_IDX))
    return ((idx - q.st[QS_USED_SEEN]) & IDX_MASK) != 0


@kernel(inline="always")
def calls_on(q, on):
    """Ask the back end for calls (``on``) or not."""
    if q.cfg[Q_PACKED]:
        ev = addr_view(q.cfg[Q_AVAIL], 2, np.uint16)
        store_relaxed(ev, 1, np.uint16(EVENT_F_ENABLE if on else EVENT_F_DISABLE))
    elif q.cfg[Q_EVENT_IDX]:
        if on:
            store_relaxed(avail_view(q), A16_RING + q.cfg[Q_N],
                          np.uint16(q.st[QS_USED_SEEN] & IDX_MASK))
    else:
        store_relaxed(avail_view(q), A16_FLAGS, np.uint16(0 if on else AVAIL_F_NO_INTERRUPT))


@kernel
def virtio_user_rx_wait(q, timeout_ms):
    """Sleep until the back end delivers on this Rx queue or ``timeout_ms`` passes (-1:
    forever).

    Returns 1 when used buffers are waiting (at once if they already are) or the back end
    called, 0 on timeout, ``-ENETDOWN`` when the link is down (after a 1 ms sleep, so a loop
    over a down link does not spin) or went down while it slept."""
    if not queue_enter(q):
        usleep(1000)
        return -ENETDOWN
    r = 1
    fd = q.cfg[Q_CALLFD]
    if fd < 0:                       # a queue configured without a call fd (tests)
        if not used_ready(q):
            usleep(1000)
            r = 1 if used_ready(q) else 0
    elif not used_ready(q):
        eventfd_drain(fd)
        calls_on(q, True)
        fence()                      # our request before the second look at the ring
        if not used_ready(q):
            q.st[QS_WAITS] += 1
            rc = fd_poll(fd, POLLIN, timeout_ms)
            if rc > 0:
                eventfd_drain(fd)
            r = 1 if rc > 0 or used_ready(q) else 0
            if load_acquire(q.st, QS_UP) == 0:
                r = -ENETDOWN
        calls_on(q, False)
    queue_leave(q)
    return r
