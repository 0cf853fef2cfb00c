"""Entry points for the Python facade: validation and the kernel call in one compiled call.

Each wrapper checks what the facade cannot check cheaply from Python (handles against the
descriptor table, a dry run of a free) and then calls the real kernel, so a facade call is one
crossing into compiled code.  They are called through :class:`~pktbuf.buf.domain.fastcall.FastCall`.
User ``@njit`` code calls the real kernels directly.

The hottest ones (``py_alloc_bulk``, ``py_alloc``, ``py_free_bulk_simple`` and the floor
``py_floor``) take the domain block's *address*, an int, and rebuild the block inside
(:func:`~pktbuf.block.block_at`): Numba unboxes an int in a few nanoseconds, while a
:class:`~pktbuf.block.Block` argument costs an attribute lookup by name and a conversion,
about a quarter of a microsecond per call on the machines pktbuf is measured on.  Only the
facade calls them, always with the address of its own live domain.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...block import block_at
from .fastcall import FastCall
from ...errors import E_ALREADY, E_BADF, E_FAULT
from ..mbuf.check import (CHK_OK, check_seg, free_check_scratch_size, mbuf_check,
                          mbuf_handle_valid, pktmbuf_free_check)
from ..mbuf.free import pktmbuf_free_bulk, pktmbuf_free_bulk_staged, pktmbuf_free_seg
from ..mbuf.layout import F_NOT_DIRECT, NULL
from ..mempool.layout import OBJ_ALLOC, OBJ_FREE
from ..mbuf.raw import mbuf_raw_alloc_bulk, pktmbuf_alloc, pktmbuf_alloc_bulk
from ..mempool.kernels import (mempool_audit, mempool_avail_count, mempool_generic_get,
                      mempool_generic_put, mempool_in_use_count)


@kernel
def py_alloc_bulk(addr, pid, lcore, out, n, raw):
    dom = block_at(addr, "domain")
    if raw:
        return mbuf_raw_alloc_bulk(dom, pid, lcore, out, n)
    return pktmbuf_alloc_bulk(dom, pid, lcore, out, n)


@kernel
def py_alloc(addr, pid, lcore):
    return pktmbuf_alloc(block_at(addr, "domain"), pid, lcore)


# a descriptor's state while the facade's check has seen it in this call (never outside one)
_OBJ_SEEN = 0xA111


@kernel
def _free_check_simple(dom, mbufs, n):
    """``pktmbuf_free_check`` in O(n) for the common array: every entry NULL or an allocated,
    direct, single-segment mbuf that passes its segment check, held once by the application
    (``refcnt == 1``, no clone attached) and listed once.

    Returns 1 when the array is such an array (the free is legal), the code the full check
    would return for the first entry that fails (``E_BADF``, ``E_ALREADY``, ``E_FAULT``), or 0
    when some entry needs the full check (a chain, a shared or indirect mbuf, a handle listed
    twice, a bad ``n``).  Duplicates are found by marking each mbuf seen (``_OBJ_SEEN``) and
    meeting the mark again, instead of sorting; every mark is undone before returning, so the
    domain is as it was whatever the result."""
    if n < 0 or n > mbufs.size:
        return 0
    mb = dom.mb
    rc = 1
    k = 0
    while k < n:
        h = np.int64(mbufs[k])
        if h != NULL:
            if not mbuf_handle_valid(dom, h):
                rc = E_BADF
                break
            m = mb[h]
            st = m.state
            if st != OBJ_ALLOC:
                rc = 0 if st == _OBJ_SEEN else E_ALREADY
                break
            if (m.next != NULL or m.refcnt != 1 or m.nb_indirect != 0
                    or (m.ol_flags & F_NOT_DIRECT) != 0):
                rc = 0
                break
            if check_seg(dom, h) != CHK_OK:
                rc = E_FAULT
                break
            m.state = _OBJ_SEEN
        k += 1
    for j in range(k):
        h = np.int64(mbufs[j])
        if h != NULL:
            mb[h].state = OBJ_ALLOC
    return rc


FREE_NEEDS_CHECK = 1     # py_free_bulk_simple: nothing done, call py_free_bulk (full check)


@kernel
def py_free_bulk_simple(addr, lcore, mbufs, n):
    """The facade's usual free: the array validated in O(n) (``_free_check_simple``), then
    freed -- one compiled call, no scratch.  Returns 0, a negative code (nothing freed), or
    ``FREE_NEEDS_CHECK`` (nothing done) when the array needs the full check of
    ``py_free_bulk``.  ``addr``: the domain block's address."""
    dom = block_at(addr, "domain")
    rc = _free_check_simple(dom, mbufs, n)
    if rc == 0:
        return FREE_NEEDS_CHECK
    if rc < 0:
        return rc
    return pktmbuf_free_bulk(dom, lcore, mbufs, n)


@kernel
def py_free_bulk(dom, lcore, mbufs, n, scratch):
    """Validate the whole array first (dry run), then free: all or nothing.  The common array
    is validated in O(n) (``_free_check_simple``), anything else by the full check."""
    rc = _free_check_simple(dom, mbufs, n)
    if rc == 0:
        rc = pktmbuf_free_check(dom, mbufs, n, scratch)
    if rc < 0:
        return rc
    return pktmbuf_free_bulk(dom, lcore, mbufs, n)


@kernel
def py_free_bulk_staged(dom, lcore, mbufs, n, scratch):
    """As py_free_bulk, with DPDK's staged algorithm (compiled only when first asked for)."""
    rc = pktmbuf_free_check(dom, mbufs, n, scratch)
    if rc < 0:
        return rc
    return pktmbuf_free_bulk_staged(dom, lcore, mbufs, n)


@kernel
def py_scratch_size(dom, mbufs, n):
    return free_check_scratch_size(dom, mbufs, n)


@kernel
def _mbuf_status(dom, h):
    """The pool id of ``h`` if it is an allocated mbuf the application still holds a
    reference to; E_BADF if it is not an mbuf of a live pool; E_ALREADY if it is in its pool,
    or if only attached clones keep it (``refcnt - nb_indirect < 1``: freed by the
    application, its buffer still in use)."""
    if h == NULL or not mbuf_handle_valid(dom, h):
        return np.int64(E_BADF)
    m = dom.mb[h]
    if m.state != OBJ_ALLOC or np.int64(m.refcnt) - np.int64(m.nb_indirect) < 1:
        return np.int64(E_ALREADY)
    return np.int64(m.pool)


@kernel
def py_free_seg(dom, lcore, h):
    """Free one segment after the same status rule as every other facade call."""
    rc = _mbuf_status(dom, h)
    if rc < 0:
        return rc
    pktmbuf_free_seg(dom, lcore, h)
    return 0


@kernel
def py_mbuf_status(dom, h):
    """The pool id (>= 0) if ``h`` is an allocated mbuf held by the application, else E_BADF
    or E_ALREADY (see ``_mbuf_status``)."""
    return _mbuf_status(dom, h)


@kernel
def py_mbuf_check(dom, h, is_header):
    return mbuf_check(dom, h, is_header)


@kernel
def py_get_bulk(dom, pid, lcore, out, n):
    rc = mempool_generic_get(dom, np.int64(pid), np.int64(lcore), out, np.int64(0), np.int64(n))
    if rc < 0:
        return rc
    for i in range(n):
        dom.obj[out[i]].state = OBJ_ALLOC
    return 0


@kernel
def py_put_bulk(dom, pid, lcore, objs, n):
    """Put objects back after checking each belongs to pool ``pid``, is handed out, and
    appears once: all or nothing."""
    p = dom.pools[pid]
    base = p.obj_base
    size = p.size
    for i in range(n):
        h = objs[i]
        if h < base or h - base >= size:
            return E_BADF
        if dom.obj[h].state != OBJ_ALLOC:
            return E_ALREADY
    for i in range(n):  # duplicates: mark as we go, undo on failure
        h = objs[i]
        if dom.obj[h].state != OBJ_ALLOC:
            for j in range(i):
                dom.obj[objs[j]].state = OBJ_ALLOC
            return E_ALREADY
        dom.obj[h].state = OBJ_FREE
    mempool_generic_put(dom, np.int64(pid), np.int64(lcore), objs, np.int64(0), np.int64(n))
    return 0


@kernel
def py_counts(dom, pid):
    return mempool_avail_count(dom, pid), mempool_in_use_count(dom, pid)


@kernel
def py_audit(dom, pid, seen):
    return mempool_audit(dom, pid, seen)


@kernel
def py_floor(addr, lcore, objs, n):
    """Nothing, with the argument shape of the facade's bulk calls (the domain's address and
    other ints, an int32 array): the per-call floor of a facade call, against which ``pktbuf bench core`` and asv
    report the facade's alloc_bulk + free_bulk."""
    return 0


# fixed-type call sites of the facade go through these (see fastcall.py)
fast_alloc_bulk = FastCall(py_alloc_bulk)
fast_alloc = FastCall(py_alloc)
fast_free_bulk = FastCall(py_free_bulk)
fast_free_bulk_simple = FastCall(py_free_bulk_simple)
fast_free_bulk_staged = FastCall(py_free_bulk_staged)
fast_get_bulk = FastCall(py_get_bulk)
fast_put_bulk = FastCall(py_put_bulk)
fast_mbuf_status = FastCall(py_mbuf_status)
fast_floor = FastCall(py_floor)
