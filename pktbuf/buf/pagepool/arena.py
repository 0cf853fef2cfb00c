"""The page allocator under the page pool: an arena of equal pages with a single and a bulk call.

An arena is ``n_pages`` pages of ``PAGE_SIZE << 0`` bytes in one memfd :class:`~pktbuf.shm.Region`
(order-0 pages only: there is no buddy merging, so no high-order allocations).  A page is an
``int32`` id; its bytes are at ``base + (id << page_shift)`` and its *iova* (what a device or a
memif peer would use) is ``id << page_shift``, the offset inside the region.

State (:data:`ARENA`, a block of three arrays, so kernels can take it from a user's ``@njit`` code):

* ``ctl`` -- ``int64[ARENA_CTL_WORDS]``.  Word 0 is the spin lock; the free-stack depth and the
  counters the lock protects share its cache line (whoever holds the lock writes them anyway).
  The second line is the read-only description.
* ``pages`` -- :data:`PAGE_DTYPE` per page, the analogue of ``struct page``: the page reference
  count (``refcount``, Linux's ``_refcount``), the page pool's own reference count
  (``pp_ref``, Linux's ``pp_ref_count``), the owning pool id (``pp``, -1 when none) and the DMA
  address the pool mapped it at.
* ``free_stack`` -- ``int32[n_pages]``: the free pages, a LIFO so the most recently freed (cache
  hot) page goes out first, as the per-CPU free lists do.

Cost structure (this is what the page pool's bulk refill amortises): every call into the
allocator takes the arena lock once -- a compare-and-swap that owns the lock's cache line --
and updates the counters; ``alloc_page`` does that for one page, ``alloc_pages_bulk`` for up to
``n``.  Each page is prepared (reference count, owner, flags) under the lock in both, one by one.

Names are Linux's: ``alloc_page``, ``alloc_pages_bulk`` (the *array* flavour of 2021, which only
fills slots that are empty, -1 here, and may succeed partially), ``get_page``, ``put_page``,
``page_ref_count``, ``page_address``.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...block import Layout
from ...atomics import field_cas, field_load_acquire, load_relaxed
from ...errors import E_ALREADY, E_BADF, E_NOMEM
from ...spinlock import spin_lock, spin_unlock

__all__ = ["ARENA", "PAGE_DTYPE", "PG_BUDDY", "PG_DMA_MAPPED", "PG_STAGED",
           "ARENA_CTL_WORDS", "arena_init", "alloc_page", "alloc_pages_bulk", "get_page",
           "put_page", "page_ref_count", "page_address", "arena_free_count", "arena_npages"]

PAGE_DTYPE = np.dtype([
    ("refcount", np.int32),   # page references (0 while in the allocator)
    ("pp_ref", np.int32),     # page pool references (1 while handed out by a pool, else 0)
    ("pp", np.int32),         # id of the page pool that owns the page, -1 if none
    ("flags", np.int32),      # PG_* bits
    ("dma_addr", np.int64),   # iova the owning pool mapped the page at (valid with PG_DMA_MAPPED)
], align=True)

# page flags
PG_BUDDY = 0x1        # the page is free, in the allocator (Linux's PageBuddy)
PG_DMA_MAPPED = 0x2   # the owning pool has mapped the page for DMA
PG_STAGED = 0x4       # transient: collected once by a bulk put (duplicate entries are skipped)

# ctl words -- line 0: lock and what it protects; line 1: description
A_LOCK = 0
A_FREE_TOP = 1          # pages on the free stack
A_STAT_ALLOC_CALLS = 2    # alloc_page calls that returned a page
A_STAT_BULK_CALLS = 3     # alloc_pages_bulk calls that filled at least one slot
A_STAT_PAGES_OUT = 4      # pages handed out, both calls
A_STAT_PAGES_IN = 5       # pages freed back
A_STAT_FAIL = 6           # calls that found the arena empty
A_NPAGES = 8
A_PAGE_SHIFT = 9
A_BASE = 10
A_MAGIC = 11
A_NEXT_POOL = 12        # next page pool id (fetch_add at pool creation)
ARENA_CTL_WORDS = 16

ARENA_MAGIC = 0x50414745  # "PAGE"

ARENA = Layout("page_arena", [
    ("ctl", np.int64, ARENA_CTL_WORDS),
    ("pages", PAGE_DTYPE, None),        # one per page
    ("free_stack", np.int32, None),     # one per page
])
"""A page arena's block: take it from ``arena.state`` and pass it to kernels; it never changes
for the arena's life."""


@kernel
def arena_init(arena, n_pages, page_shift, base):
    """Describe ``n_pages`` pages of ``1 << page_shift`` bytes at address ``base``, all free.

    Page 0 goes out first.  Returns 0, or -22 (EINVAL) if the arrays are too small.
    """
    if n_pages < 1 or arena.pages.size < n_pages or arena.free_stack.size < n_pages \
            or arena.ctl.size < ARENA_CTL_WORDS or page_shift < 6 or page_shift > 30:
        return -22
    ctl = arena.ctl
    ctl[:] = 0
    for p in range(n_pages):
        pg = arena.pages[p]
        pg.refcount = 0
        pg.pp_ref = 0
        pg.pp = -1
        pg.flags = PG_BUDDY
        pg.dma_addr = 0
        arena.free_stack[p] = n_pages - 1 - p
    ctl[A_FREE_TOP] = n_pages
    ctl[A_NPAGES] = n_pages
    ctl[A_PAGE_SHIFT] = page_shift
    ctl[A_BASE] = base
    ctl[A_MAGIC] = ARENA_MAGIC
    return 0


@kernel(inline="always")
def _prep_new_page(pages, p):
    """A page leaving the allocator: one reference, no owner, no flags (``prep_new_page``)."""
    pg = pages[p]
    pg.refcount = 1
    pg.pp_ref = 0
    pg.pp = -1
    pg.flags = 0
    pg.dma_addr = 0


@kernel
def alloc_page(arena):
    """One order-0 page: its id, or -12 (ENOMEM) if the arena is empty.

    Takes the arena lock for this one page: the per-call cost a bulk call amortises.
    """
    ctl = arena.ctl
    spin_lock(ctl, A_LOCK)
    top = ctl[A_FREE_TOP]
    if top == 0:
        ctl[A_STAT_FAIL] += 1
        spin_unlock(ctl, A_LOCK)
        return np.int64(E_NOMEM)
    top -= 1
    p = np.int64(arena.free_stack[top])
    ctl[A_FREE_TOP] = top
    _prep_new_page(arena.pages, p)
    ctl[A_STAT_ALLOC_CALLS] += 1
    ctl[A_STAT_PAGES_OUT] += 1
    spin_unlock(ctl, A_LOCK)
    return p


@kernel
def alloc_pages_bulk(arena, page_array, n):
    """Fill the empty (-1) slots of ``page_array[:n]`` with pages, in slot order.

    The array flavour of Linux's bulk allocator: slots already holding a page are left alone,
    and fewer pages than empty slots is a normal outcome when the arena runs low.  Returns how
    many slots were filled (0 when none were empty or the arena is empty).  One lock round trip
    for the whole call.
    """
    need = 0
    for i in range(n):
        if page_array[i] < 0:
            need += 1
    if need == 0:
        return 0
    ctl = arena.ctl
    stack = arena.free_stack
    spin_lock(ctl, A_LOCK)
    top = ctl[A_FREE_TOP]
    take = need if need < top else top
    if take == 0:
        ctl[A_STAT_FAIL] += 1
        spin_unlock(ctl, A_LOCK)
        return 0
    j = top
    filled = 0
    i = 0
    pages = arena.pages
    while filled < take:
        if page_array[i] < 0:
            j -= 1
            p = stack[j]
            page_array[i] = p
            _prep_new_page(pages, p)
            filled += 1
        i += 1
    ctl[A_FREE_TOP] = j
    ctl[A_STAT_BULK_CALLS] += 1
    ctl[A_STAT_PAGES_OUT] += take
    spin_unlock(ctl, A_LOCK)
    return take


@kernel(inline="always")
def page_valid(arena, p):
    """Whether ``p`` is a page id of this arena."""
    return p >= 0 and p < arena.ctl[A_NPAGES]


@kernel
def _free_page(arena, p):
    """The last reference went away: back onto the free stack (``__free_pages``)."""
    pg = arena.pages[p]
    pg.pp = -1
    pg.pp_ref = 0
    pg.dma_addr = 0
    pg.flags = PG_BUDDY
    ctl = arena.ctl
    spin_lock(ctl, A_LOCK)
    top = ctl[A_FREE_TOP]
    arena.free_stack[top] = p
    ctl[A_FREE_TOP] = top + 1
    ctl[A_STAT_PAGES_IN] += 1
    spin_unlock(ctl, A_LOCK)


@kernel(inline="always")
def _ref_add(pages, p, delta):
    """Add ``delta`` to a referenced page's count (never from 0: a free page stays free).
    Returns the count before, or -114 (EALREADY) if it was 0."""
    while True:
        rc = np.int64(field_load_acquire(pages, p, "refcount"))
        if rc <= 0:
            return np.int64(E_ALREADY)
        if np.int64(field_cas(pages, p, "refcount", rc, rc + delta)) == rc:
            return rc


@kernel
def put_page(arena, p):
    """Drop one reference on page ``p``; the last one frees the page to the arena.

    Returns 1 if the page was freed, 0 if it is still referenced, -9 (EBADF) for an id outside
    the arena, -114 (EALREADY) if the page has no reference (already free) -- then nothing
    changes.
    """
    if not page_valid(arena, p):
        return E_BADF
    rc = _ref_add(arena.pages, p, -1)
    if rc <= 0:
        return rc
    if rc > 1:
        return 0
    _free_page(arena, p)
    return 1


@kernel
def get_page(arena, p):
    """Take one more reference on page ``p`` (which must have one); returns the new count,
    or -9 (EBADF) / -114 (EALREADY, the page is free)."""
    if not page_valid(arena, p):
        return E_BADF
    rc = _ref_add(arena.pages, p, 1)
    return rc if rc <= 0 else rc + 1


@kernel
def page_ref_count(arena, p):
    """The reference count of page ``p`` (0 = free), or -9 (EBADF)."""
    if not page_valid(arena, p):
        return E_BADF
    return np.int64(field_load_acquire(arena.pages, p, "refcount"))


@kernel(inline="always")
def page_address(arena, p):
    """Virtual address of the first byte of page ``p`` (no check)."""
    return arena.ctl[A_BASE] + (np.int64(p) << arena.ctl[A_PAGE_SHIFT])


@kernel
def arena_free_count(arena):
    """Pages in the allocator (a snapshot)."""
    return load_relaxed(arena.ctl, A_FREE_TOP)


@kernel(inline="always")
def arena_npages(arena):
    return arena.ctl[A_NPAGES]

