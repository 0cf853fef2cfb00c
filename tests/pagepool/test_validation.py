"""The PageArena and PagePool facades validate every argument before a kernel runs: bad types
and ranges raise from the PktbufError hierarchy with every arena and pool unchanged, and never
compile new kernels."""
from __future__ import annotations

import numpy as np
import pytest

from pktbuf import DoubleFree, InvalidArgument, InvalidHandle, PktbufError
from pktbuf.buf.pagepool.api import PageArena, PagePool

from ..sigs import run_battery_without_new_specialisations
from .conftest import assert_same, snapshot

BAD_PAGES = [(-1, InvalidHandle), (1.0, InvalidHandle), ("1", InvalidHandle),
             (None, InvalidHandle), (True, InvalidHandle), (2 ** 31, InvalidHandle),
             (2 ** 64, InvalidHandle), (10 ** 6, InvalidHandle)]
BAD_FLAGS = ["yes", 2, 1.0, None]


def battery(arena, pool, other):
    objs = (arena, pool, other)
    p = pool.alloc_page()
    q = arena.alloc_page()

    def refused(fn, exc):
        before = snapshot(*objs)
        with pytest.raises(exc) as ei:
            fn()
        assert isinstance(ei.value, PktbufError)
        assert_same(before, snapshot(*objs))

    for bad, exc in BAD_PAGES:
        for fn in (arena.get_page, arena.put_page, arena.ref_count, arena.address,
                   arena.page_view, pool.put_page, pool.recycle_direct, pool.release_page,
                   pool.ref_page, pool.dma_addr, pool.put_full_page):
            refused(lambda: fn(bad), exc)
        refused(lambda: pool.put_page_bulk([p, bad]), exc if not isinstance(bad, str)
                else InvalidHandle)
    for flag in BAD_FLAGS:
        refused(lambda: pool.put_page(p, flag), InvalidArgument)
        refused(lambda: pool.put_page_bulk([p], flag), InvalidArgument)
    for arr, exc in ((np.full(4, -1, np.int64), InvalidArgument),
                     (np.full(8, -1, np.int32)[::2], InvalidArgument),
                     (np.full((2, 2), -1, np.int32), InvalidArgument),
                     ([-1, -1], InvalidArgument), (np.array([-1, 5000], np.int32), InvalidHandle)):
        refused(lambda: arena.alloc_pages_bulk(arr), exc)
    ro = np.full(4, -1, np.int32)
    ro.flags.writeable = False
    refused(lambda: arena.alloc_pages_bulk(ro), InvalidArgument)
    for bad in ([[p]], "abc", None, [p + 0.5], [True]):
        refused(lambda: pool.put_page_bulk(bad), PktbufError)
    refused(lambda: pool.put_page(q), InvalidHandle)        # the arena's, not the pool's
    refused(lambda: other.put_page(p), InvalidHandle)       # another pool's
    pool.put_page(p)
    refused(lambda: pool.put_page(p), DoubleFree)
    arena.put_page(q)
    # odd arrays that hold good pages are normalised, never passed through
    a = np.array([pool.alloc_page() for _ in range(3)], np.int64)[::-1]
    pool.put_page_bulk(a)


@pytest.fixture
def three():
    arena = PageArena(256)
    yield arena, PagePool(arena, 64), PagePool(arena, 64)
    arena.close()


def test_garbage_arguments(three):
    battery(*three)


def test_no_new_specialisations(three):
    run_battery_without_new_specialisations(lambda: battery(*three))


@pytest.mark.parametrize("kw", [dict(pool_size=1.5), dict(pool_size="8"), dict(flags=-1),
                                dict(flags=1.0), dict(flags=1 << 40), dict(refill=["bulk"]),
                                dict(refill=None), dict(refill="fast")])
def test_bad_pool_construction(kw):
    arena = PageArena(16)
    with pytest.raises(InvalidArgument):
        PagePool(arena, **kw)
    arena.close()


@pytest.mark.parametrize("args", [(1.5,), ("4",), (None,), (True,), (16, 4096.0), (16, 100),
                                  (16, 4096, 3)])
def test_bad_arena_construction(args):
    with pytest.raises(PktbufError):
        if len(args) == 3:
            PageArena(args[0], args[1], name=args[2])
        else:
            PageArena(*args)


def test_a_closed_arena_refuses_every_call():
    arena = PageArena(16)
    pool = PagePool(arena)
    p = pool.alloc_page()
    arena.close()
    for fn in (arena.alloc_page, lambda: arena.get_page(p), lambda: arena.put_page(p),
               lambda: arena.page_view(p), lambda: arena.free_count,
               lambda: arena.alloc_pages_bulk(np.full(2, -1, np.int32)),
               pool.alloc_page, lambda: pool.put_page(p), lambda: pool.put_page_bulk([p]),
               lambda: pool.release_page(p), pool.destroy, lambda: PagePool(arena)):
        with pytest.raises(InvalidArgument):
            fn()
    assert repr(arena) == "PageArena(closed)"
