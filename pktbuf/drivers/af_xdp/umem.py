"""UMEM addresses <-> mbufs, arithmetically, with every address the kernel returns checked.

The UMEM is the pool's data region: object ``k`` of the pool is ``stride`` bytes at
``k * stride``, its buffer after a ``priv``-byte private area, so the buffer of handle
``obj_base + k`` is at UMEM address ``k * stride + priv`` (its ``buf_iova``).  Only the first
``chunk`` bytes of a buffer are the kernel's to write.

An address from the Rx or completion ring is untrusted: :func:`umem_frame` accepts it only if
it falls inside a buffer of the pool (and, for Rx, is exactly a buffer start plus an offset
that leaves room for the length) and the ownership byte says the kernel holds that frame.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...buf.mbuf.free import pktmbuf_free_bulk
from .layout import (ADDR_MASK, OFFSET_SHIFT, OWN_USER, U_CHUNK, U_NB_OBJ, U_OBJ_BASE, U_PRIV,
                     U_STRIDE)

__all__ = ["umem_rx_frame", "umem_tx_frame", "umem_buf_addr", "umem_release"]


@kernel(inline="always")
def umem_buf_addr(u, k):
    """UMEM address of buffer ``k`` of the pool."""
    return k * u.cfg[U_STRIDE] + u.cfg[U_PRIV]


@kernel(inline="always")
def umem_rx_frame(u, addr, ln, own):
    """An Rx descriptor ``(addr, ln)`` -> ``(k, data offset in the buffer)``; ``k`` is -1
    when the address names no buffer start, the frame overruns the chunk, or buffer ``k`` is
    not in state ``own``."""
    base = addr & ADDR_MASK
    off = (addr >> OFFSET_SHIFT) & 0xFFFF
    rel = base - u.cfg[U_PRIV]
    stride = u.cfg[U_STRIDE]
    if rel < 0:
        return np.int64(-1), np.int64(0)
    k = rel // stride
    if k * stride != rel or k >= u.cfg[U_NB_OBJ] or ln <= 0 or off + ln > u.cfg[U_CHUNK]:
        return np.int64(-1), np.int64(0)
    if u.own[k] != own:
        return np.int64(-1), np.int64(0)
    return k, off


@kernel(inline="always")
def umem_tx_frame(u, addr, own):
    """A completion address (the Tx descriptor's ``addr``: inside a buffer) -> ``k``, or -1
    when it is outside every buffer's chunk or buffer ``k`` is not in state ``own``."""
    a = (addr & ADDR_MASK) + ((addr >> OFFSET_SHIFT) & 0xFFFF)
    rel = a - u.cfg[U_PRIV]
    if rel < 0:
        return np.int64(-1)
    stride = u.cfg[U_STRIDE]
    k = rel // stride
    if k >= u.cfg[U_NB_OBJ] or rel - k * stride >= u.cfg[U_CHUNK]:
        return np.int64(-1)
    if u.own[k] != own:
        return np.int64(-1)
    return k


@kernel
def umem_release(dom, lcore, u, own, scr):
    """Once the socket is closed: free every mbuf in state ``own`` (the kernel held it), in
    bulks of ``scr.size``.  Returns how many."""
    base = u.cfg[U_OBJ_BASE]
    nb = 0
    cnt = 0
    for k in range(u.own.size):
        if u.own[k] == own:
            u.own[k] = OWN_USER
            scr[nb] = np.int32(base + k)
            nb += 1
            cnt += 1
            if nb == scr.size:
                pktmbuf_free_bulk(dom, lcore, scr, nb)
                nb = 0
    if nb > 0:
        pktmbuf_free_bulk(dom, lcore, scr, nb)
    return cnt
