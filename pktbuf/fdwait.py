"""Wait until sockets or file descriptors are readable: ``select()``'s read set, through ``poll``.

``select.select`` takes only descriptors below ``FD_SETSIZE`` (1024) and raises ``ValueError``
for any other, however high the process's open-file limit: a long-lived process (a test run, a
forwarder with many pools and ports) that holds a thousand descriptors would lose its control
channels.  ``poll`` has no such limit.  A descriptor with a hang-up, an error or an invalid
number is reported ready, as ``select`` reports a closed peer readable: the read that follows
sees the end or the error.
"""
from __future__ import annotations

import math
import select

_EVENTS = select.POLLIN | select.POLLPRI


def readable(objs, timeout):
    """The members of ``objs`` (sockets, files or integer descriptors) that are readable within
    ``timeout`` seconds (``None``: wait for ever; 0: do not wait), in their order in ``objs``.
    A closed socket (``fileno() == -1``) raises ``ValueError``, as with ``select``."""
    p = select.poll()
    fds = []
    for o in objs:
        fd = o if isinstance(o, int) else o.fileno()
        if fd < 0:
            raise ValueError(f"file descriptor cannot be a negative integer ({fd})")
        p.register(fd, _EVENTS)
        fds.append(fd)
    ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    ready = {fd for fd, _ in p.poll(ms)}
    return [o for o, fd in zip(objs, fds) if fd in ready]
