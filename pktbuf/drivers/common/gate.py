"""The burst gate of a queue shared with a peer: a link flag and a count of bursts inside.

A driver whose queue can be taken away while a burst runs (memif, vhost-user: the peer
disconnects, the control thread unmaps its memory) keeps two words at the start of the
queue's status array ``st``: ``QS_UP`` (the control plane's flag) and ``QS_BUSY`` (bursts
inside).  A burst enters by counting itself in, then re-reading the flag with an acquire load;
the control plane takes the flag down, then waits for the count to reach zero before it
touches the queue's memory -- so a burst either sees the link down and touches nothing, or is
counted and finishes before the memory goes.  A burst that finds the peer's ring invalid
records the first failure (``QS_ERR``, ``QS_ERR_VAL``) and takes the flag down itself; the
control thread sees it and takes the link down with the reason.
"""
from __future__ import annotations

from ..._jit import kernel
from ...atomics import exchange, fetch_add, load_acquire
from ...idle import usleep

__all__ = ["QS_UP", "QS_BUSY", "QS_ERR", "QS_ERR_VAL", "queue_enter", "queue_leave",
           "queue_down", "queue_up", "queue_fail"]

QS_UP = 0            # the link flag, written by the control plane (and by queue_fail)
QS_BUSY = 1          # bursts inside the queue
QS_ERR = 10          # first validation failure (the driver's V_* code), 0 = none
QS_ERR_VAL = 11      # the offending value


@kernel(inline="always")
def queue_enter(q):
    """Start a burst: False if the link is down (then nothing may be touched)."""
    fetch_add(q.st, QS_BUSY, 1)
    if load_acquire(q.st, QS_UP) == 0:
        fetch_add(q.st, QS_BUSY, -1)
        return False
    return True


@kernel(inline="always")
def queue_leave(q):
    fetch_add(q.st, QS_BUSY, -1)


@kernel
def queue_down(st, timeout_us):
    """Mark a queue down and wait until no burst is inside it.  True if it drained in time."""
    exchange(st, QS_UP, 0)
    waited = 0
    while load_acquire(st, QS_BUSY) != 0:
        if waited >= timeout_us:
            return False
        usleep(50)
        waited += 50
    return True


@kernel
def queue_up(st):
    exchange(st, QS_UP, 1)


@kernel(inline="always")
def queue_fail(q, code, val):
    """Record the first validation failure and take the queue down; returns 0 (nothing
    moved)."""
    if q.st[QS_ERR] == 0:
        q.st[QS_ERR] = code
        q.st[QS_ERR_VAL] = val
    exchange(q.st, QS_UP, 0)
    return 0
