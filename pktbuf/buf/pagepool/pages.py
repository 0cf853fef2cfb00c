"""A page entering and leaving a page pool, and the pool's references to a page.

A page the pool takes from the arena is marked as the pool's (``pp``) and, with
``PP_FLAG_DMA_MAP``, mapped; a page leaving the pool is unmapped and counted in
``pages_state_release_cnt`` (``page_pool_return_page`` also drops the pool's page reference,
sending it back to the arena once every holder has dropped theirs).  ``pp_ref`` counts the
pool references of a handed-out page: 0 while the page sits in the pool, so putting a page
twice is caught (see :mod:`pktbuf.buf.pagepool.kernels`).  Used by the alloc side
(:mod:`.alloc`), the put side (:mod:`.recycle`) and shutdown (:mod:`.kernels`).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import fetch_add, field_cas, field_load_acquire
from ...errors import E_ALREADY, E_BADF
from .arena import A_NPAGES, A_PAGE_SHIFT, PG_DMA_MAPPED, put_page
from .layout import P_FLAGS, P_ID, P_RELEASE, PP_FLAG_DMA_MAP


@kernel(inline="always")
def _enter_pool(pool, arena, p):
    """A fresh page from the arena becomes the pool's (``page_pool_set_pp_info`` + DMA map)."""
    pg = arena.pages[p]
    pg.pp = pool.ctl[P_ID]
    if (pool.ctl[P_FLAGS] & PP_FLAG_DMA_MAP) != 0:
        pg.dma_addr = np.int64(p) << arena.ctl[A_PAGE_SHIFT]
        pg.flags |= PG_DMA_MAPPED


@kernel(inline="always")
def _leave_pool(pool, arena, p):
    """The pool forgets ``p``: unmap it and count the release (its page reference stays)."""
    pg = arena.pages[p]
    pg.flags &= ~PG_DMA_MAPPED
    pg.dma_addr = 0
    pg.pp = -1
    pg.pp_ref = 0
    fetch_add(pool.ctl, P_RELEASE, 1)


@kernel
def page_pool_return_page(pool, arena, p):
    """The page leaves the pool for good: unmap, count the release, drop the pool's reference.

    The release count is bumped before the page reference is dropped: after that the page (and,
    for the last page of a destroyed pool, the pool) must not be touched.
    """
    _leave_pool(pool, arena, p)
    put_page(arena, p)


@kernel(inline="always")
def _owned(pool, arena, p):
    """0 if ``p`` is a page of this pool, else -9 (EBADF)."""
    if p < 0 or p >= arena.ctl[A_NPAGES]:
        return E_BADF
    if arena.pages[p].pp != pool.ctl[P_ID]:
        return E_BADF
    return 0


@kernel(inline="always")
def _pp_unref(pages, p):
    """Drop one pool reference; returns what is left (0 = we were the last) or -114."""
    while True:
        r = np.int64(field_load_acquire(pages, p, "pp_ref"))
        if r <= 0:
            return np.int64(E_ALREADY)
        if r == 1:
            # sole user: nobody else may touch it, but a racing double put must lose
            if np.int64(field_cas(pages, p, "pp_ref", 1, 0)) == 1:
                return np.int64(0)
        elif np.int64(field_cas(pages, p, "pp_ref", r, r - 1)) == r:
            return r - 1
