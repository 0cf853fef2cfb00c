"""A put cursor: one-object puts to one lcore cache with the length and counters kept in registers.

``pktmbuf_free_bulk`` over pools that alternate (A, B, A, B, ...) makes one one-object put per
mbuf, each to the other pool's cache.  Through ``mempool_put`` every one of them loads and
stores the cache length and read-modify-writes two statistics counters in memory.  A cursor
does the same puts with the length and the number of cache hits in the caller's registers:

* :func:`cursor_open` reads the cache's place, size and length once;
* :func:`cursor_put` is exactly ``mempool_put`` of ``objs[k]`` -- append when the cache has
  room, otherwise the length is stored and the ordinary slow path (flush of the cold half,
  with its own counters) runs, and the length is read back;
* :func:`cursor_close` stores the length and adds the hits to ``put_bulk`` / ``put_objs``.

So a sequence of cursor puts leaves the cache, the ring and the counters exactly as the same
sequence of ``mempool_put`` calls.  Until the close, the slots written since the last stored
length belong to nobody else but are not yet counted in the cache: a process killed in between
loses those objects as it loses any burst it is freeing (docs/multiprocess.md).  The lcore
must be in ``[0, MAX_LCORE)`` (the caller checks); the cursor is for one caller and one call.
"""
from __future__ import annotations

import numpy as np

from ..._jit import always_inline, kernel
from .kernels import _cache_slot, _put_slow, _stat_idx
from .layout import CACHE_LINE_WORDS, CACHE_MAX_SIZE, STAT_PUT_BULK

_U = np.uint64


@always_inline
@kernel
def cursor_open(dom, pid, lcore):
    """``(li, cbase, size, clen)`` of ``lcore``'s cache of pool ``pid``: the word index of its
    length, the index of its first slot, its size and its current length."""
    slot = _cache_slot(pid, lcore)
    li = slot * _U(CACHE_LINE_WORDS)
    return (li, slot * _U(CACHE_MAX_SIZE), np.int64(dom.pools[_U(pid)].cache_size),
            np.int64(dom.cache_len[li]))


@always_inline
@kernel
def cursor_put(dom, pid, lcore, li, cbase, size, clen, hits, objs, k):
    """``mempool_put(dom, pid, lcore, objs[k])`` through the cursor; returns the new
    ``(clen, hits)``."""
    if clen < size:
        dom.cache_objs[cbase + _U(clen)] = objs[_U(k)]
        return clen + 1, hits + 1
    dom.cache_len[li] = clen
    _put_slow(dom, pid, lcore, objs, k, np.int64(1))
    return np.int64(dom.cache_len[li]), hits


@always_inline
@kernel
def cursor_close(dom, pid, lcore, li, clen, hits):
    """Store the length and count the cursor's cache hits (``put_bulk`` and ``put_objs``)."""
    dom.cache_len[li] = clen
    if hits > 0:
        i = _stat_idx(pid, lcore, STAT_PUT_BULK)
        dom.stats[i] += hits
        dom.stats[i + _U(1)] += hits
