"""Per-packet kernels that inline into your code, for loops compiled without Numba's runtime.

A call from compiled code to a kernel that LLVM does not inline passes the whole
``DomainState`` by value -- Numba flattens the namedtuple's eight arrays into ~56 machine
words -- which costs a few nanoseconds.  Per burst that is nothing; per packet it is most of the
work (``pktmbuf_alloc`` + ``pktmbuf_free`` one at a time: ~24 ns per mbuf through
:mod:`pktbuf.kernels`).  These versions are inlined at the Numba-IR level instead, and cost what
the work costs (~4 ns per mbuf for the same pair, measured in ``pktbuf bench core``).

They may only be called from functions compiled **without** Numba's runtime -- decorate your
loop with :func:`pktbuf.kernel` (or ``@njit(_nrt=False)``, which then must not allocate
arrays: use :func:`pktbuf.rawmem.stack_i32` or pass scratch in).  Inlined into an ordinary
``@njit`` function every access to a DomainState array would be reference counted (measured
80x slower), so that is refused at compile time with an explanation.

    from pktbuf import kernel
    from pktbuf.inline import pktmbuf_alloc, pktmbuf_free

    @kernel
    def one_at_a_time(dom, pid, lcore, out, n):
        for i in range(n):
            out[i] = pktmbuf_alloc(dom, pid, lcore)
        for i in range(n):
            pktmbuf_free(dom, lcore, out[i])

Semantics and return values are those of the same names in :mod:`pktbuf.kernels`.
"""
from __future__ import annotations

import numpy as np

from ._jit import kernel
from .mbuf.free import _free_pkt, _free_seg, _prefree_seg
from .mbuf.raw import _raw_alloc, _raw_free, _reset
from .mempool.kernels import mempool_generic_get, mempool_generic_put

__all__ = ["pktmbuf_alloc", "pktmbuf_free", "pktmbuf_free_seg", "pktmbuf_prefree_seg",
           "mbuf_raw_alloc", "mbuf_raw_free", "pktmbuf_reset", "mempool_get_bulk",
           "mempool_put_bulk"]


@kernel(inline="always")
def pktmbuf_alloc(dom, pid, lcore):
    h = _raw_alloc(dom, pid, lcore)
    if h >= 0:
        _reset(dom, h)
    return h


@kernel(inline="always")
def pktmbuf_free(dom, lcore, h):
    return _free_pkt(dom, lcore, h)


@kernel(inline="always")
def pktmbuf_free_seg(dom, lcore, h):
    _free_seg(dom, lcore, h)


@kernel(inline="always")
def pktmbuf_prefree_seg(dom, lcore, h):
    return _prefree_seg(dom, lcore, h)


@kernel(inline="always")
def mbuf_raw_alloc(dom, pid, lcore):
    return _raw_alloc(dom, pid, lcore)


@kernel(inline="always")
def mbuf_raw_free(dom, lcore, h):
    _raw_free(dom, lcore, h)


@kernel(inline="always")
def pktmbuf_reset(dom, h):
    _reset(dom, h)


@kernel(inline="always")
def mempool_get_bulk(dom, pid, lcore, objs, n):
    return mempool_generic_get(dom, np.int64(pid), np.int64(lcore), objs, np.int64(0),
                               np.int64(n))


@kernel(inline="always")
def mempool_put_bulk(dom, pid, lcore, objs, n):
    return mempool_generic_put(dom, np.int64(pid), np.int64(lcore), objs, np.int64(0),
                               np.int64(n))
