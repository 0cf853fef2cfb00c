"""Linux's page pool over a page arena: :class:`PageArena` and :class:`PagePool`.

The kernels (``page_pool_alloc_pages``, ``page_pool_put_page``, ``alloc_pages_bulk``...) are in
:mod:`pktbuf.buf.pagepool.kernels` and :mod:`pktbuf.buf.pagepool.arena`; they take ``pool.state``
(a :data:`~pktbuf.buf.pagepool.layout.PAGE_POOL` block) and ``arena.state``
(a :data:`~pktbuf.buf.pagepool.arena.ARENA` block) and can be called from a user's ``@njit`` code.

Typical use, as a driver's RX queue would::

    arena = PageArena(4096)                  # 16 MiB of 4 KiB pages
    pool = PagePool(arena, flags=PP_FLAG_DMA_MAP)
    p = pool.alloc_page()                    # page id; arena.page_view(p) is its bytes
    q = pool.alloc_page()
    pool.recycle_direct(p)                   # from the pool's own thread: into the cache
    pool.put_page(q)                         # from any thread: into the recycle ring
    pool.destroy()                           # -> pages still in flight (retry pool.release())
"""
from __future__ import annotations

import numpy as np

from ...errors import (E_ALREADY, E_BADF, E_BUSY, E_INVAL, E_NOMEM, DoubleFree, InvalidArgument,
                       InvalidHandle, OutOfMemory, PktbufError, check_count, check_flag,
                       check_handles, error_for)
from ..ring.kernels import RING_F_EXACT_SZ, RING_F_SC_DEQ, ring_count, ring_init
from ...shm import Region
from . import arena as A
from . import layout as L
from .alloc import page_pool_alloc_pages
from .arena import ARENA
from .kernels import (page_pool_destroy, page_pool_get_dma_addr, page_pool_get_stats,
                      page_pool_inflight, page_pool_release)
from .layout import (PAGE_POOL, PP_ALLOC_CACHE_REFILL, PP_ALLOC_CACHE_SIZE, PP_FLAG_DMA_MAP,
                      PP_STAT_NAMES)
from .recycle import (page_pool_put_page, page_pool_put_page_bulk,
                      page_pool_ref_page, page_pool_release_page)

__all__ = ["PageArena", "PagePool", "ARENA", "PAGE_POOL", "PP_FLAG_DMA_MAP",
           "PP_ALLOC_CACHE_SIZE", "PP_ALLOC_CACHE_REFILL", "PP_STAT_NAMES"]

_REFILL = {"bulk": L.PP_REFILL_BULK, "single": L.PP_REFILL_SINGLE}


def _raise(rc: int, what: str) -> None:
    msg = {E_BADF: f"{what}: not a page of this pool",
           E_ALREADY: f"{what}: the page is not handed out (put twice?)",
           E_BUSY: f"{what}: other pool references to the page are still out",
           E_NOMEM: f"{what}: the page arena is empty",
           E_INVAL: f"{what}: the pool has been destroyed"}.get(rc, f"{what}: error {rc}")
    raise error_for(rc, msg)


class PageArena:
    """``n_pages`` order-0 pages of ``page_size`` bytes in one memfd region (the page allocator).

    Pages are ``int32`` ids.  ``alloc_page``/``alloc_pages_bulk``/``get_page``/``put_page``
    follow Linux; :meth:`page_view` is a page's bytes.  Thread safe (one spin lock).
    Every call validates its arguments before a kernel runs; after :meth:`close` every call
    raises ``InvalidArgument``.
    """

    def __init__(self, n_pages: int, page_size: int = 4096, *, name: str = "pktbuf-pages"):
        self.region = None
        n_pages = check_count(n_pages, "n_pages", lo=1, hi=(1 << 31) - 1)
        page_size = check_count(page_size, "page_size", lo=64, hi=1 << 30)
        if page_size & (page_size - 1):
            raise InvalidArgument(f"page_size must be a power of two, got {page_size}")
        if not isinstance(name, str):
            raise InvalidArgument(f"name must be a str, got {type(name).__name__}")
        self.n_pages = n_pages
        self.page_size = page_size
        self.page_shift = page_size.bit_length() - 1
        try:
            self.region = Region(n_pages * page_size, name)
        except (OSError, ValueError) as e:
            raise OutOfMemory(f"cannot map {n_pages} pages of {page_size} bytes ({e})",
                              E_NOMEM) from None
        self.state = A.ARENA.create({"pages": n_pages, "free_stack": n_pages})
        rc = A.arena_init(self.state, n_pages, self.page_shift, self.region.address)
        if rc != 0:  # pragma: no cover - arguments validated above
            raise InvalidArgument(f"arena_init failed ({rc})")

    def _open(self) -> None:
        if self.region is None or self.region.closed:
            raise InvalidArgument("the page arena is closed")

    @property
    def closed(self) -> bool:
        return self.region is None or self.region.closed

    def _page(self, p) -> int:
        self._open()
        try:
            p = check_count(p, "page", lo=-(1 << 31), hi=(1 << 31) - 1)
        except InvalidArgument as e:
            raise InvalidHandle(str(e)) from None
        if not 0 <= p < self.n_pages:
            raise InvalidHandle(f"{p} is not a page of this arena (0..{self.n_pages - 1})")
        return p

    def alloc_page(self) -> int:
        """One page (reference count 1); ``OutOfMemory`` if the arena is empty."""
        self._open()
        p = int(A.alloc_page(self.state))
        if p < 0:
            raise OutOfMemory("the page arena is empty", p)
        return p

    def alloc_pages_bulk(self, pages) -> int:
        """Fill the -1 slots of the int32 array ``pages`` (in place); returns how many were filled
        (fewer than the empty slots when the arena runs low; 0 is not an error)."""
        self._open()
        if not (isinstance(pages, np.ndarray) and pages.dtype == np.int32 and pages.ndim == 1
                and pages.flags.c_contiguous and pages.flags.writeable):
            raise InvalidArgument("pages must be a writeable contiguous 1-d int32 array")
        bad = (pages != -1) & ((pages < 0) | (pages >= self.n_pages))
        if bad.any():
            raise InvalidHandle("pages holds values that are neither -1 nor a page id")
        return int(A.alloc_pages_bulk(self.state, pages, pages.size))

    def get_page(self, p) -> int:
        """Take another reference on page ``p``; returns the new count."""
        rc = int(A.get_page(self.state, self._page(p)))
        if rc < 0:
            raise DoubleFree(f"page {p} is free", rc)
        return rc

    def put_page(self, p) -> bool:
        """Drop a reference on page ``p``; True if that freed it."""
        rc = int(A.put_page(self.state, self._page(p)))
        if rc < 0:
            raise DoubleFree(f"page {p} is already free", rc)
        return rc == 1

    def ref_count(self, p) -> int:
        return int(A.page_ref_count(self.state, self._page(p)))

    def address(self, p) -> int:
        return self.region.address + self._page(p) * self.page_size

    def page_view(self, p) -> np.ndarray:
        """The ``page_size`` bytes of page ``p`` (a view into the region)."""
        off = self._page(p) * self.page_size
        return self.region.array[off:off + self.page_size]

    @property
    def free_count(self) -> int:
        self._open()
        return int(A.arena_free_count(self.state))

    def stats(self) -> dict:
        c = self.state.ctl
        return {"alloc_calls": int(c[A.A_STAT_ALLOC_CALLS]), "bulk_calls": int(c[A.A_STAT_BULK_CALLS]),
                "pages_out": int(c[A.A_STAT_PAGES_OUT]), "pages_in": int(c[A.A_STAT_PAGES_IN]),
                "fail": int(c[A.A_STAT_FAIL])}

    def _new_pool_id(self) -> int:
        c = self.state.ctl
        pid = int(c[A.A_NEXT_POOL])
        c[A.A_NEXT_POOL] = pid + 1
        return pid

    def close(self) -> None:
        """Unmap the arena; every later call (and every call of its page pools) is refused."""
        if self.region is not None:
            self.region.close()
            self.region = None

    def __repr__(self) -> str:
        if self.closed:
            return "PageArena(closed)"
        return (f"PageArena(n_pages={self.n_pages}, page_size={self.page_size}, "
                f"free={self.free_count})")


class PagePool:
    """A page pool (``page_pool_create``) over ``arena``.

    ``pool_size`` is the recycle ring's size (default 1024, at most 16384); ``flags`` may hold
    ``PP_FLAG_DMA_MAP``; ``refill`` is the slow-path strategy: ``"bulk"`` (64 pages per arena
    call, Linux since 2021) or ``"single"`` (one page per call, as before).  Allocation and
    direct recycling are for the pool's own thread only; ``put_page`` without ``allow_direct``
    may come from any thread.
    """

    def __init__(self, arena: PageArena, pool_size: int | None = None, *, flags: int = 0,
                 refill: str = "bulk"):
        if not isinstance(arena, PageArena):
            raise InvalidArgument("arena must be a PageArena")
        arena._open()
        size = L.PP_RING_DEFAULT if pool_size is None else check_count(pool_size, "pool_size", lo=1)
        size = min(size, L.PP_RING_MAX)
        flags = check_count(flags, "flags", lo=0)
        if flags & ~L.PP_FLAG_ALL:
            raise InvalidArgument(f"unknown page pool flags {flags & ~L.PP_FLAG_ALL:#x}")
        if not isinstance(refill, str) or refill not in _REFILL:
            raise InvalidArgument(f"refill must be 'bulk' or 'single', got {refill!r}")
        self.arena = arena
        self.pool_size = size
        slots = 1
        while slots < size:
            slots <<= 1
        self.state = L.PAGE_POOL.create({"ring_slots": slots})
        self.state.cache[:] = -1
        ctl = self.state.ctl
        ring_init(self.state.ring_hdr, self.state.ring_slots, size, RING_F_EXACT_SZ | RING_F_SC_DEQ)
        self.id = arena._new_pool_id()
        ctl[L.P_ID] = self.id
        ctl[L.P_FLAGS] = flags
        ctl[L.P_REFILL] = _REFILL[refill]
        ctl[L.P_DIRECT] = 1
        ctl[L.P_POOL_SIZE] = size
        ctl[L.P_STATE] = L.PP_ALIVE
        self._args = (self.state, arena.state)

    # -- allocation ---------------------------------------------------------------------------
    def _check_alive(self, what: str) -> None:
        self.arena._open()
        if self.state.ctl[L.P_STATE] != L.PP_ALIVE:
            raise InvalidArgument(f"{what}: the page pool has been destroyed")

    def alloc_page(self) -> int:
        """A page id (one pool reference held by the caller); ``OutOfMemory`` when the cache,
        the ring and the arena are all empty."""
        self._check_alive("alloc_page")
        p = int(page_pool_alloc_pages(*self._args))
        if p < 0:
            _raise(p, "alloc_page")
        return p

    # -- freeing -------------------------------------------------------------------------------
    def _page(self, p) -> int:
        self.arena._open()
        try:
            return check_count(p, "page", lo=-(1 << 31), hi=(1 << 31) - 1)
        except InvalidArgument as e:
            raise InvalidHandle(str(e)) from None

    def put_page(self, p, allow_direct: bool = False) -> None:
        """Drop one pool reference on page ``p``; the last one recycles or releases it.
        ``allow_direct=True`` only from the pool's own thread."""
        rc = int(page_pool_put_page(*self._args, self._page(p),
                                      check_flag(allow_direct, "allow_direct")))
        if rc < 0:
            _raise(rc, f"put_page({p})")

    def put_full_page(self, p, allow_direct: bool = False) -> None:
        self.put_page(p, allow_direct)

    def recycle_direct(self, p) -> None:
        """Return ``p`` from the pool's own thread (into the cache when it has room)."""
        self.put_page(p, True)

    def put_page_bulk(self, pages, allow_direct: bool = False) -> None:
        """Return several pages at once; all or nothing (``InvalidHandle``/``DoubleFree``)."""
        self.arena._open()
        direct = check_flag(allow_direct, "allow_direct")
        a = np.array(check_handles(pages, "pages"), np.int32)   # the kernel overwrites it
        rc = int(page_pool_put_page_bulk(*self._args, a, a.size, direct))
        if rc < 0:
            _raise(rc, "put_page_bulk")

    def release_page(self, p) -> None:
        """Take ``p`` out of the pool without recycling it; the caller keeps the page reference
        and drops it with ``arena.put_page(p)``."""
        rc = int(page_pool_release_page(*self._args, self._page(p)))
        if rc < 0:
            _raise(rc, f"release_page({p})")

    def ref_page(self, p) -> int:
        """Take another pool reference on handed-out page ``p`` (fragments); returns the count."""
        rc = int(page_pool_ref_page(self.state, self.arena.state, self._page(p)))
        if rc < 0:
            _raise(rc, f"ref_page({p})")
        return rc

    # -- accounting ----------------------------------------------------------------------------
    def get_stats(self) -> dict:
        """The eleven counters with Linux's names (``page_pool_get_stats``)."""
        out = np.zeros(len(PP_STAT_NAMES), np.int64)
        page_pool_get_stats(self.state, out)
        return {k: int(v) for k, v in zip(PP_STAT_NAMES, out)}

    @property
    def inflight(self) -> int:
        """Pages that entered the pool from the arena and have not left it (hold - release)."""
        return int(page_pool_inflight(self.state))

    @property
    def hold_cnt(self) -> int:
        return int(self.state.ctl[L.P_HOLD])

    @property
    def release_cnt(self) -> int:
        return int(self.state.ctl[L.P_RELEASE])

    @property
    def cache_count(self) -> int:
        return int(self.state.ctl[L.P_COUNT])

    @property
    def ring_count(self) -> int:
        return int(ring_count(self.state.ring_hdr))

    def dma_addr(self, p) -> int:
        """The iova page ``p`` was mapped at (pools created with ``PP_FLAG_DMA_MAP``)."""
        rc = int(page_pool_get_dma_addr(self.state, self.arena.state, self._page(p)))
        if rc < 0:
            raise InvalidHandle(f"page {p} is not a DMA-mapped page of this pool", rc)
        return rc

    # -- shutdown ------------------------------------------------------------------------------
    @property
    def destroyed(self) -> bool:
        return int(self.state.ctl[L.P_STATE]) != L.PP_ALIVE

    @property
    def freed(self) -> bool:
        return int(self.state.ctl[L.P_STATE]) == L.PP_FREED

    def destroy(self) -> int:
        """``page_pool_destroy``: stop allocating, return what can be returned; the result is the
        number of pages still in flight (0: the pool is gone).  Retry with :meth:`release`."""
        self.arena._open()
        return int(page_pool_destroy(self.state, self.arena.state))

    def release(self) -> int:
        """One more shutdown attempt after :meth:`destroy` (Linux retries every second)."""
        self.arena._open()
        if not self.destroyed:
            raise InvalidArgument("release() is for a destroyed pool; call destroy() first")
        return int(page_pool_release(self.state, self.arena.state))

    def __repr__(self) -> str:
        return (f"PagePool(id={self.id}, pool_size={self.pool_size}, cache={self.cache_count}, "
                f"ring={self.ring_count}, inflight={self.inflight})")
