"""Facade entry points: the page pool kernels with their arrays spread out.

Numba types a namedtuple argument element by element on every call from Python; separate array
arguments take a fast path (see :mod:`pktbuf.api._entry`).  The facade calls these wrappers,
which rebuild the two namedtuples inside compiled code.  ``@njit`` users call the kernels in
:mod:`pktbuf.pagepool.kernels` directly.
"""
from __future__ import annotations

from .._jit import kernel
from .arena import ArenaState
from .kernels import (PagePoolState, page_pool_alloc_pages, page_pool_put_page,
                      page_pool_put_page_bulk, page_pool_release_page)


@kernel
def py_alloc(pc, cache, rh, rs, st, ac, pages, stack):
    return page_pool_alloc_pages(PagePoolState(pc, cache, rh, rs, st), ArenaState(ac, pages, stack))


@kernel
def py_put(pc, cache, rh, rs, st, ac, pages, stack, p, allow_direct):
    return page_pool_put_page(PagePoolState(pc, cache, rh, rs, st), ArenaState(ac, pages, stack),
                              p, allow_direct)


@kernel
def py_put_bulk(pc, cache, rh, rs, st, ac, pages, stack, objs, n, allow_direct):
    return page_pool_put_page_bulk(PagePoolState(pc, cache, rh, rs, st),
                                   ArenaState(ac, pages, stack), objs, n, allow_direct)


@kernel
def py_release(pc, cache, rh, rs, st, ac, pages, stack, p):
    return page_pool_release_page(PagePoolState(pc, cache, rh, rs, st),
                                  ArenaState(ac, pages, stack), p)
