"""Interrupt mode on a vhost Rx queue (the guest's Tx vring): sleep on the kick eventfd.

The back end polls: when a ring starts it asks the front end not to kick (split: used flags
``NO_NOTIFY``; packed: device event area ``DISABLE``).  :func:`vhost_rx_wait` lets a receiver
with nothing to do sleep instead, as DPDK's ``rte_vhost_enable_guest_notification`` with an
interrupt handler does (docs/vhost.md, "Interrupt mode"):

1. anything available already?  Then return at once, without a system call;
2. reset the kick eventfd (a kick the front end sent while we polled is stale), then ask for
   kicks: split without EVENT_IDX clear ``NO_NOTIFY`` in the used flags; split with EVENT_IDX
   publish ``avail_event`` = the next avail index we will read (virtio 1.1 §2.6.7.2: the
   driver kicks when its avail index passes it); packed: device event flags ``ENABLE``
   (§2.7.10, the mode every driver must honour);
3. a full barrier, then look at the ring **again**: a chain made available before the driver
   could see our request would otherwise never be kicked for (the lost wake-up);
4. ``poll()`` on the kick eventfd up to ``timeout_ms`` (-1: forever), read it when it fired;
5. stop the kicks again (we poll while busy).  With EVENT_IDX there is no "off": the stale
   ``avail_event`` stays behind the driver's index, so it kicks again only when its index
   comes round to it (once in 65536 chains), as with DPDK.

The wait holds the queue's burst gate, so the control thread cannot close the kick fd or
unmap the rings under it; before it waits for the gate it writes the kick eventfd itself so
that a sleeper returns (:meth:`~pktbuf.drivers.vhost.device.VhostDevice._down`).
A kernel for your own ``@njit`` loops, as the bursts are.
"""
from __future__ import annotations

import errno

import numpy as np

from ..._jit import kernel
from ...atomics import fence, load_acquire, store_relaxed
from ...idle import usleep
from ...rawmem import addr_view
from ...syscalls import POLLIN, fd_poll
from ..common.eventfd import eventfd_drain
from .layout import (A16_IDX, EVENT_F_DISABLE, EVENT_F_ENABLE, IDX_MASK, Q_EVENT_IDX, Q_KICKFD,
                     Q_N, Q_PACKED, Q_USED, QS_AVAIL_WRAP, QS_LAST_AVAIL, QS_UP, QS_WAITS,
                     U16_FLAGS, USED_F_NO_NOTIFY)
from .packed import packed_avail
from .queue import queue_enter, queue_leave
from .vring import avail_view, desc_view, used_view16

__all__ = ["vhost_rx_wait", "ENETDOWN"]

ENETDOWN = errno.ENETDOWN


@kernel(inline="always")
def rx_pending(q):
    """Whether the guest made a chain available past the next one we read."""
    if q.cfg[Q_PACKED]:
        return packed_avail(desc_view(q), q.st[QS_LAST_AVAIL], q.st[QS_AVAIL_WRAP])
    idx = np.int64(load_acquire(avail_view(q), A16_IDX))
    return ((idx - q.st[QS_LAST_AVAIL]) & IDX_MASK) != 0


@kernel(inline="always")
def kicks_on(q, on):
    """Ask the front end for kicks (``on``) or not."""
    if q.cfg[Q_PACKED]:
        ev = addr_view(q.cfg[Q_USED], 2, np.uint16)
        store_relaxed(ev, 1, np.uint16(EVENT_F_ENABLE if on else EVENT_F_DISABLE))
    elif q.cfg[Q_EVENT_IDX]:
        if on:
            store_relaxed(used_view16(q), 2 + 4 * q.cfg[Q_N],
                          np.uint16(q.st[QS_LAST_AVAIL] & IDX_MASK))
    else:
        store_relaxed(used_view16(q), U16_FLAGS, np.uint16(0 if on else USED_F_NO_NOTIFY))


@kernel
def vhost_rx_wait(q, timeout_ms):
    """Sleep until the guest sends on this Rx queue or ``timeout_ms`` passes (-1: forever).

    Returns 1 when chains are waiting (at once if they already are) or the front end kicked,
    0 on timeout, ``-ENETDOWN`` when the link is down (after a 1 ms sleep, so a loop over a
    down link does not spin) or went down while it slept.  A ring without a kick fd (the
    front end set none) is looked at again after 1 ms instead."""
    if not queue_enter(q):
        usleep(1000)
        return -ENETDOWN
    r = 1
    fd = q.cfg[Q_KICKFD]
    if fd < 0:                       # no kick fd (VRING_NOFD): the front end never kicks
        if not rx_pending(q):
            usleep(1000)
            r = 1 if rx_pending(q) else 0
    elif not rx_pending(q):
        eventfd_drain(fd)
        kicks_on(q, True)
        fence()                      # our request before the second look at the ring
        if rx_pending(q):
            r = 1
        else:
            q.st[QS_WAITS] += 1
            rc = fd_poll(fd, POLLIN, timeout_ms)
            if rc > 0:
                eventfd_drain(fd)
            r = 1 if rc > 0 or rx_pending(q) else 0
            if load_acquire(q.st, QS_UP) == 0:
                r = -ENETDOWN
        kicks_on(q, False)
    queue_leave(q)
    return r
