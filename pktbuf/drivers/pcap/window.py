"""The Rx queue's view of its file: a window mapped read-only, moved along as records are read.

A file is never read whole: at most ``cfg[C_WINDOW]`` bytes of it are mapped at a time
(``mmap(MAP_PRIVATE | MAP_POPULATE)`` at a page-aligned offset, so the pages are read in one
go and no page fault is taken per record).  When the next record or block does not lie inside
the window, the window is moved to start at that record's page -- which needs the window to be
longer than the longest record or block accepted (``MAX_BLOCK``) plus a page, which the facade
guarantees.  A file shorter than the window is mapped once, whole: an ``infinite_rx`` replay
then loops over one mapping.

Memory stays bounded by the window, whatever the file size: the mapping is file-backed and
clean, so the pages behind the cursor are the kernel's to drop.  A file that shrinks while it
is mapped makes the next access to the lost pages raise SIGBUS, as with any mapped file: do not
truncate a capture that a port is replaying.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...rawmem import addr_u8
from ._sys import sys_errno, sys_mmap_ro, sys_munmap
from .layout import (C_FD, C_SIZE, C_WINDOW, S_ERR, S_ERR_OFF, S_ERR_VAL, S_ERRNO, S_IERRORS,
                     S_MAPS, S_WIN_ADDR, S_WIN_LEN, S_WIN_OFF, V_MMAP)

PAGE = 4096

# what reach() says
R_OK = 1             # [off, off + need) is in the window
R_STOP = 0           # it is not, and the window may not move now (packets of this burst use it)
R_SHORT = -1         # the file ends before off + need
R_FAIL = -2          # the window could not be moved (the queue has failed)


@kernel
def queue_fail(q, code, off, val):
    """Record the first format error of an Rx queue; it delivers nothing after it."""
    st = q.st
    if st[S_ERR] == 0:
        st[S_ERR] = code
        st[S_ERR_OFF] = off
        st[S_ERR_VAL] = val
        st[S_IERRORS] += 1


@kernel
def win_unmap(q):
    """Drop the current mapping (at close, or before moving)."""
    st = q.st
    if st[S_WIN_ADDR] != 0:
        sys_munmap(st[S_WIN_ADDR], st[S_WIN_LEN])
    st[S_WIN_ADDR] = 0
    st[S_WIN_OFF] = 0
    st[S_WIN_LEN] = 0


@kernel
def win_map(q, off):
    """Map the window at the page of file offset ``off``; 0, or -1 with the queue failed."""
    cfg = q.cfg
    st = q.st
    win_unmap(q)
    base = off & ~np.int64(PAGE - 1)
    ln = min(cfg[C_WINDOW], cfg[C_SIZE] - base)
    a = sys_mmap_ro(ln, cfg[C_FD], base)
    if a == -1:
        st[S_ERRNO] = sys_errno()
        queue_fail(q, V_MMAP, off, ln)
        return -1
    st[S_WIN_ADDR] = a
    st[S_WIN_OFF] = base
    st[S_WIN_LEN] = ln
    st[S_MAPS] += 1
    return 0


@kernel(inline="always")
def window(q):
    """The window as a ``uint8`` array (index = file offset - ``st[S_WIN_OFF]``)."""
    return addr_u8(q.st[S_WIN_ADDR], q.st[S_WIN_LEN])


@kernel(inline="always")
def reach(q, off, need, may_move):
    """Make file bytes ``[off, off + need)`` readable in the window: ``R_*``.  The window moves
    only when ``may_move`` -- at the start of a burst's parse, when no address into it is held."""
    st = q.st
    if off >= st[S_WIN_OFF] and off + need <= st[S_WIN_OFF] + st[S_WIN_LEN]:
        return R_OK
    if off + need > q.cfg[C_SIZE]:
        return R_SHORT
    if not may_move:
        return R_STOP
    if win_map(q, off) != 0:
        return R_FAIL
    if off + need > st[S_WIN_OFF] + st[S_WIN_LEN]:     # a window shorter than a block
        queue_fail(q, V_MMAP, off, need)
        return R_FAIL
    return R_OK
