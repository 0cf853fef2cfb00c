"""Freeing mbufs: per segment, per packet, and in bulk.

``pktmbuf_free_bulk`` is *run-grouped*.  DPDK's ``rte_pktmbuf_free_bulk`` (kept here as
``pktmbuf_free_bulk_staged``, the reference and the benchmark baseline) copies every freeable
mbuf into an on-stack ``pending[64]`` array and puts that array to its pool whenever it fills
or the pool changes.  The run-grouped version walks the caller's array once and hands each
maximal run of consecutive freeable single-segment mbufs of one pool to that pool's bulk put
*in place* -- straight from the caller's array, with no staging copy.  A run ends at

* a NULL entry (``-1``),
* an mbuf that is still referenced after its refcnt decrement (it is not freed),
* a change of pool,
* 64 mbufs, so every bulk put has the size DPDK's would have and goes to the lcore cache
  (a put of more than half the cache size would bypass it);

and the first chained packet sends the rest of the array through the staged walk, where
segments of every chain are freed one by one as DPDK does (``_free_chains``: DPDK's algorithm,
the same puts in the same order, in a loop per packet and per segment with the common segment
cleared inline -- about two thirds of the time of the same algorithm written as one loop over
a "next survivor", which ``_staged`` keeps as the reference).  Runs of one that alternate between
two pools (A, B, A, B) are freed by ``_free_alternating``: the same one-object puts, with both
caches' lengths in registers (:mod:`pktbuf.buf.mempool.cursor`).  Both free exactly the same mbufs.
On arrays of direct single-segment mbufs that are each freed by this call (no NULL, no
still-referenced or indirect entry, no chain) they also make the same sequence of bulk puts,
so every cache and ring ends in the same state, object for object.  Otherwise the run-grouped
version may make more, smaller puts (a run also ends at an indirect mbuf, and a chain hands
over to the staged walk), so caches and rings may hold the same objects in a different order
or place.

Every free kernel takes the ``lcore`` whose caches it may use (``LCORE_ANY`` = none) and
returns 0, or -- when the domain's debug switch is on and a check fails -- a negative code with
nothing freed.

The bulk free's rare paths -- the staged walk of chained packets, the pools taking turns, a
shared or indirect mbuf's prefree, the debug-mode dry run -- are called through this process's
call table (:mod:`pktbuf.calltable`), not by name: compiled once, in cache entries of their own
(``free_*_at``), instead of into every burst, loop and stage that frees.  Creating or attaching
a :class:`~pktbuf.Domain`, or importing :mod:`pktbuf.kernels`, installs them
(:func:`install_free_paths`); a bulk free in a process that has not returns ``E_NOSYS`` with
nothing freed.
"""
from __future__ import annotations

import numpy as np
from numba import types

from ... import calltable as CT
from ..._jit import always_inline, cfunc_address, kernel, never_inline
from ...atomics import field_fetch_add
from ...block import BlockType
from ...calltable import call_address3, call_address5, slot_address
from ...errors import E_INVAL, E_NOMEM, E_NOSYS
from ..mempool.cursor import cursor_close, cursor_open, cursor_put
from ..mempool.kernels import mempool_generic_put, mempool_put
from ..mempool.layout import MAX_LCORE, OBJ_FREE
from ...rawmem import addr_view, stack_i32
from .check import pktmbuf_free_check
from .indirect import pktmbuf_detach
from .layout import F_NOT_DIRECT, NULL
from .raw import debug_enabled, mbuf_raw_free

FREE_PENDING_SZ = 64   # RTE_PKTMBUF_FREE_PENDING_SZ
_U = np.uint64
DEBUG_SCRATCH = 2048   # debug-mode double-free detection covers 2048 segments per call


@kernel
def _debug_free_check(dom, mbufs, n):
    """The debug-mode dry run; beyond DEBUG_SCRATCH segments only the per-mbuf checks run."""
    scratch = stack_i32(DEBUG_SCRATCH)
    rc = pktmbuf_free_check(dom, mbufs, n, scratch)
    return 0 if rc == E_NOMEM else rc


@always_inline
@kernel
def pktmbuf_prefree_seg(dom, lcore, h):
    """``rte_pktmbuf_prefree_seg``: drop one reference on segment ``h``.

    Returns ``h`` when that was the last reference -- the segment is then back in the in-pool
    state (refcnt 1, no next, one segment, direct) and the caller returns it to its pool -- or
    NULL (-1) if it is still referenced.  Only fields that differ are written.
    """
    mb = dom.mb
    m = mb[h]
    if m.refcnt != 1:
        # shared: the decrement must be atomic; whoever takes it to 0 owns the mbuf
        if np.int64(field_fetch_add(mb, h, "refcnt", -1)) != 1:
            return np.int64(NULL)
        m.refcnt = 1
    if (m.ol_flags & F_NOT_DIRECT) != 0:
        pktmbuf_detach(dom, lcore, h)        # rare: out of line
    if m.next != NULL:
        m.next = NULL
    if m.nb_segs != 1:
        m.nb_segs = 1
    return np.int64(h)


@kernel
def pktmbuf_free_seg(dom, lcore, h):
    """``rte_pktmbuf_free_seg``: free one segment (its ``next`` is not followed)."""
    if pktmbuf_prefree_seg(dom, lcore, h) != NULL:
        mbuf_raw_free(dom, lcore, h)


@never_inline
@kernel
def _free_slow(dom, lcore, h):
    """``pktmbuf_free`` of anything but one direct segment freed by this call, or any packet
    with the debug switch on: the dry run, then every segment through prefree."""
    if debug_enabled(dom):
        one = stack_i32(1)
        one[0] = h
        rc = _free_check_call(dom, one, 1)
        if rc < 0:
            return rc
    seg = np.int64(h)
    while seg != NULL:
        nxt = np.int64(dom.mb[seg].next)   # read before prefree clears it
        pktmbuf_free_seg(dom, lcore, seg)
        seg = nxt
    return 0


@always_inline
@kernel
def pktmbuf_free(dom, lcore, h):
    """``rte_pktmbuf_free``: free every segment of packet ``h``; NULL is allowed.  Returns 0,
    or with the debug switch on a negative code (nothing freed) if the free is not legal.

    The common packet -- one direct segment, last reference, debug off -- is freed inline
    (prefree would write nothing: mark it free and push it on the lcore cache); everything
    else is the out-of-line ``_free_slow``."""
    if h >= 0 and not debug_enabled(dom):
        m = dom.mb[_U(h)]
        if (m.next == NULL and m.refcnt == 1 and (m.ol_flags & F_NOT_DIRECT) == 0
                and m.nb_segs == 1):
            m.state = OBJ_FREE
            mempool_put(dom, np.int64(m.pool), np.int64(lcore), np.int64(h))
            return 0
    if h == NULL:
        return 0
    return _free_slow(dom, lcore, h)


@kernel
def _prefree_call(dom, lcore, h):
    """``pktmbuf_prefree_seg`` as a call, for the run loop's rare entries (shared, indirect): the
    inlined prefree would take registers from the run loop, which would then spill its own."""
    return pktmbuf_prefree_seg(dom, lcore, h)


@kernel
def _staged(dom, lcore, mbufs, start, n):
    """DPDK's algorithm over ``mbufs[start:n]``: stage survivors in pending[64]."""
    mb = dom.mb
    pending = stack_i32(FREE_PENDING_SZ)
    npend = 0
    pend_pool = np.int64(-1)
    i = start
    seg = np.int64(NULL)
    while True:
        # the next segment whose last reference this free drops (-1: none left)
        survivor = np.int64(-1)
        while survivor < 0 and (seg != NULL or i < n):
            if seg == NULL:
                seg = np.int64(mbufs[i])
                i += 1
                continue
            nxt = np.int64(mb[seg].next)       # read before prefree clears it
            if pktmbuf_prefree_seg(dom, lcore, seg) != NULL:
                survivor = seg
            seg = nxt
        pool = np.int64(mb[survivor].pool) if survivor >= 0 else np.int64(-1)
        # flush when pending is full or the pool changes (one call site, so it is inlined)
        if npend > 0 and (survivor < 0 or npend == FREE_PENDING_SZ or pool != pend_pool):
            mempool_generic_put(dom, pend_pool, np.int64(lcore), pending, np.int64(0),
                                np.int64(npend))
            npend = 0
        if survivor < 0:
            return
        if npend == 0:
            pend_pool = pool
        mb[survivor].state = OBJ_FREE
        pending[npend] = survivor
        npend += 1


@kernel
def _free_chains(dom, lcore, mbufs, start, n):
    """The run-grouped free's walk from the first chained packet: ``_staged``'s algorithm --
    the same segments staged in pending[64], the same puts in the same order -- with the loop
    written per packet and per segment, and the common segment (sole owner, direct) cleared
    inline; a shared or indirect one goes through ``_prefree_call``.  (``_staged`` stays as it
    is: it is DPDK's algorithm as the reference the benchmarks compare with.)"""
    mb = dom.mb
    pending = stack_i32(FREE_PENDING_SZ)
    npend = 0
    pend_pool = np.int64(-1)
    for i in range(start, n):
        seg = np.int64(mbufs[i])
        while seg != NULL:
            m = mb[seg]
            nxt = np.int64(m.next)            # read before the segment is cleared
            if m.refcnt == 1 and (m.ol_flags & F_NOT_DIRECT) == 0:
                if nxt != NULL:
                    m.next = NULL
                if m.nb_segs != 1:
                    m.nb_segs = 1
                ok = True
            else:
                ok = _prefree_call(dom, lcore, seg) != NULL
            if ok:
                pool = np.int64(m.pool)
                if npend == FREE_PENDING_SZ or (npend > 0 and pool != pend_pool):
                    mempool_generic_put(dom, pend_pool, np.int64(lcore), pending, np.int64(0),
                                        np.int64(npend))
                    npend = 0
                pend_pool = pool
                m.state = OBJ_FREE
                pending[npend] = seg
                npend += 1
            seg = nxt
    if npend > 0:
        mempool_generic_put(dom, pend_pool, np.int64(lcore), pending, np.int64(0),
                            np.int64(npend))


@kernel
def _bulk_precheck(dom, mbufs, n):
    """Bounds always; the dry run when the debug switch is on; ``E_NOSYS`` when this process
    has not installed the free paths (:func:`install_free_paths`).  0 or a negative code."""
    if n < 0 or n > mbufs.size:
        return E_INVAL
    if slot_address(CT.FREE_CHAINS) == 0:
        return E_NOSYS
    if debug_enabled(dom):
        return _free_check_call(dom, mbufs, n)
    return 0


@kernel
def pktmbuf_free_bulk_staged(dom, lcore, mbufs, n):
    """DPDK's array-staged ``rte_pktmbuf_free_bulk``: the reference and the benchmark baseline."""
    rc = _bulk_precheck(dom, mbufs, n)
    if rc < 0:
        return rc
    _staged(dom, lcore, mbufs, 0, n)
    return 0


@always_inline
@kernel
def _alt_step(dom, lcore, mbufs, k, n, h, pid, other, li, cbase, size, clen, hits):
    """One mbuf of an alternating stretch: ``mbufs[k] == h`` of pool ``pid`` is freeable and
    marked free.  If the next mbuf is freeable and of the same pool, ``h`` starts a run of two
    or more: code 2, nothing put.  Otherwise ``h`` is a run of one and is put through the
    cursor; code 0 if the next mbuf is freeable and of pool ``other`` (it is then marked free
    and returned as the next ``h``), else code 1.  Returns ``(code, clen, hits, next h)``."""
    mb = dom.mb
    j = _U(k) + _U(1)
    nxt = np.int64(NULL)
    p2 = np.int64(-1)
    if j < _U(n):
        h2 = np.int64(mbufs[j])
        if h2 >= 0:
            m2 = mb[_U(h2)]
            if (m2.next == NULL and m2.refcnt == 1 and (m2.ol_flags & F_NOT_DIRECT) == 0
                    and m2.nb_segs == 1):
                p2 = np.int64(m2.pool)
                if p2 == pid:
                    return 2, clen, hits, nxt
                nxt = h2
    clen, hits = cursor_put(dom, pid, lcore, li, cbase, size, clen, hits, mbufs, k)
    if p2 != other:
        return 1, clen, hits, nxt
    mb[_U(nxt)].state = OBJ_FREE
    return 0, clen, hits, nxt


@never_inline
@kernel
def _free_alternating(dom, lcore, mbufs, k, n):
    """A stretch of runs of one between two pools (A, B, A, B, ...) from ``mbufs[k]``, which is
    freeable, of pool A and marked free; ``mbufs[k + 1]`` is freeable, of pool B != A and not
    marked yet.  Each mbuf is the one-object put the run-grouped loop would make, made through
    a cursor per pool (:mod:`pktbuf.buf.mempool.cursor`): same puts in the same order, the two
    cache lengths and hit counters in registers until the stretch ends.  Returns the index
    where the run-grouped loop resumes: every mbuf before it is freed, the one at it is not
    (it may be marked free already, which the loop does again)."""
    mb = dom.mb
    h = np.int64(mbufs[_U(k)])
    pa = np.int64(mb[_U(h)].pool)
    pb = np.int64(mb[_U(mbufs[_U(k) + _U(1)])].pool)
    lia, cba, sza, cla = cursor_open(dom, pa, lcore)
    lib, cbb, szb, clb = cursor_open(dom, pb, lcore)
    hia = np.int64(0)
    hib = np.int64(0)
    while True:
        code, cla, hia, h = _alt_step(dom, lcore, mbufs, k, n, h, pa, pb, lia, cba, sza, cla,
                                      hia)
        if code != 0:
            break
        k += 1
        code, clb, hib, h = _alt_step(dom, lcore, mbufs, k, n, h, pb, pa, lib, cbb, szb, clb,
                                      hib)
        if code != 0:
            break
        k += 1
    cursor_close(dom, pa, lcore, lia, cla, hia)
    cursor_close(dom, pb, lcore, lib, clb, hib)
    return k + 1 if code == 1 else k


@kernel
def pktmbuf_free_bulk(dom, lcore, mbufs, n):
    """Free the packets ``mbufs[:n]`` (NULL entries allowed), run-grouped.

    Equivalent to DPDK's ``rte_pktmbuf_free_bulk``; see the module docstring for how runs of
    one pool go back to it straight from ``mbufs``.  ``mbufs`` itself is not modified.
    -EINVAL if ``n`` is outside ``mbufs``; -ENOSYS (nothing freed) if this process has not
    installed the free paths.
    """
    rc = _bulk_precheck(dom, mbufs, n)
    if rc < 0:
        return rc
    mb = dom.mb
    un = _U(n)
    i = _U(0)
    seen = False
    while i < un:
        h = np.int64(mbufs[i])
        if h == NULL:
            i += _U(1)
            continue
        m = mb[h]
        if seen:
            # the run before ended here at a change of pool only: this mbuf was checked there
            seen = False
        elif m.next != NULL:
            # the first chained packet: DPDK's staged walk does the rest (through the call
            # table: _bulk_precheck found the slot filled)
            call_address5(slot_address(CT.FREE_CHAINS), dom, np.int64(lcore), mbufs,
                          np.int64(i), np.int64(n))
            return 0
        elif m.refcnt != 1 or (m.ol_flags & F_NOT_DIRECT) != 0 or m.nb_segs != 1:
            # shared, indirect or with a stale nb_segs: the general per-segment path, through
            # the call table (detaching an indirect mbuf frees into its direct one's pool)
            if call_address3(slot_address(CT.FREE_PREFREE), dom, np.int64(lcore),
                             np.int64(h)) == NULL:
                i += _U(1)          # still referenced elsewhere: not ours to free
                continue
        # mbuf i is freeable: it starts a run of its pool.  The inner loop is the common
        # case -- sole owners of direct single segments of the same pool -- and does nothing
        # but check and mark them; the run then goes back to the pool straight from `mbufs`.
        pool = np.int64(m.pool)
        m.state = OBJ_FREE
        start = i
        # the run's length counts up from 1 (one induction variable: `i` is set after the loop)
        k = _U(1)
        lim = min(un - start, _U(FREE_PENDING_SZ))
        while k < lim:
            h2 = mbufs[start + k]
            if h2 < 0:
                break
            m2 = mb[_U(h2)]
            if (m2.next != NULL or m2.refcnt != 1 or (m2.ol_flags & F_NOT_DIRECT) != 0
                    or m2.nb_segs != 1):
                break
            if np.int64(m2.pool) != pool:
                seen = True         # freeable, of another pool: it starts the next run
                break
            m2.state = OBJ_FREE
            k += _U(1)
        if k != _U(1):
            mempool_generic_put(dom, pool, np.int64(lcore), mbufs, np.int64(start), np.int64(k))
            i = start + k
        elif seen and _U(lcore) < _U(MAX_LCORE):
            # a run of one ended by a freeable mbuf of another pool: pools may be alternating,
            # A, B, A, B: the loop of runs of one, with the two caches in registers (it frees
            # mbuf `start` too)
            i = _U(call_address5(slot_address(CT.FREE_ALTERNATING), dom, np.int64(lcore),
                                 mbufs, np.int64(start), np.int64(n)))
            seen = False
        else:
            # a run of one (a NULL or a shared mbuf next to it): the one-object put, which is
            # the same operation as a bulk put of 1
            mempool_put(dom, pool, np.int64(lcore), h)
            i = start + _U(1)
    return 0


# ---------------------------------------------------------------------------------------------
# the paths called through this process's call table (pktbuf.calltable): each compiled once, in
# a cache entry of its own, instead of into every kernel that frees -- and again into every
# loop above those.  Each takes the handle array as the address of its data.

@kernel(cfunc=True)
def free_alternating_at(dom, lcore, mbufs_addr, k, n):
    return np.int64(_free_alternating(dom, lcore, addr_view(mbufs_addr, n, np.int32), k, n))


@kernel(cfunc=True)
def free_check_at(dom, mbufs_addr, n):
    return np.int64(_debug_free_check(dom, addr_view(mbufs_addr, n, np.int32), n))


@kernel(cfunc=True)
def prefree_at(dom, lcore, h):
    return np.int64(pktmbuf_prefree_seg(dom, lcore, h))


@kernel(cfunc=True)
def free_chains_at(dom, lcore, mbufs_addr, start, n):
    _free_chains(dom, lcore, addr_view(mbufs_addr, n, np.int32), start, n)
    return np.int64(0)


@kernel(inline="always")
def _free_check_call(dom, mbufs, n):
    """The debug-mode dry run, through the call table (E_NOSYS: not installed)."""
    fn = slot_address(CT.FREE_CHECK)
    if fn == 0:
        return E_NOSYS
    return call_address3(fn, dom, mbufs, np.int64(n))


_D, _I = BlockType("domain"), types.int64
_FREE_PATH_SLOTS = ((CT.FREE_ALTERNATING, free_alternating_at, (_D, _I, _I, _I, _I)),
                    (CT.FREE_CHECK, free_check_at, (_D, _I, _I)),
                    (CT.FREE_PREFREE, prefree_at, (_D, _I, _I)),
                    (CT.FREE_CHAINS, free_chains_at, (_D, _I, _I, _I, _I)))
"""Slot, kernel and argument types of each path; the chained packets' slot last."""

FREE_PATHS = tuple(disp for _, disp, _ in _FREE_PATH_SLOTS)
"""The kernels :func:`install_free_paths` compiles or loads (``pktbuf compile`` warms them)."""


def install_free_paths() -> None:
    """Compile (or load from the cache) the free paths the free kernels call through this
    process's call table and fill their slots -- the chained packets' last, which the kernels
    test.  Idempotent; every :class:`~pktbuf.Domain` created or attached calls it, so a
    process that has a domain to free into has them."""
    if CT.installed(CT.FREE_CHAINS):
        return
    for slot, disp, sig in _FREE_PATH_SLOTS:
        CT.install(slot, cfunc_address(disp, sig))
