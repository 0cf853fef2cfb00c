"""Reference counts, indirect mbufs (attach / detach), and clone.

An *indirect* mbuf carries no data of its own: it points at the buffer of a *direct* mbuf and
holds a reference on it (``ol_flags`` has ``F_INDIRECT``, ``direct`` names the owner).  A clone
of a packet is a chain of indirect mbufs, one per segment.  Cloning a clone points at the
original direct mbuf, never at the intermediate clone.  Detaching (or freeing) an indirect mbuf
drops that reference and, on the last one, returns the direct mbuf to its pool.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel, never_inline
from ...atomics import field_fetch_add, field_load_acquire
from ...errors import E_INVAL, E_NOENT
from .layout import F_INDIRECT, F_NOT_DIRECT, NULL
from .raw import mbuf_raw_alloc, mbuf_raw_free, pktmbuf_copy_header, pktmbuf_reset


@kernel
def mbuf_refcnt_read(dom, h):
    """``rte_mbuf_refcnt_read``."""
    return np.int64(field_load_acquire(dom.mb, h, "refcnt"))


@kernel
def mbuf_refcnt_set(dom, h, v):
    """``rte_mbuf_refcnt_set`` (a plain store: the caller owns the mbuf exclusively)."""
    dom.mb[h].refcnt = v


@kernel
def mbuf_refcnt_update(dom, h, v):
    """``rte_mbuf_refcnt_update``: add ``v`` and return the new count.

    When the count is 1 we are the only owner, so nobody else can change it concurrently: skip
    the atomic (an atomic read-modify-write costs ~20 cycles) and store the result directly.
    """
    m = dom.mb[h]
    if m.refcnt == 1:
        nv = np.int64(1) + v
        m.refcnt = nv
        return nv
    return np.int64(field_fetch_add(dom.mb, h, "refcnt", v)) + v


@kernel
def pktmbuf_refcnt_update(dom, h, v):
    """``rte_pktmbuf_refcnt_update``: add ``v`` to the refcnt of every segment of packet ``h``."""
    seg = np.int64(h)
    while seg != NULL:
        mbuf_refcnt_update(dom, seg, v)
        seg = np.int64(dom.mb[seg].next)


@kernel
def mbuf_from_indirect(dom, h):
    """The direct mbuf whose buffer ``h`` uses (``h`` itself when ``h`` is direct)."""
    m = dom.mb[h]
    if (m.ol_flags & F_INDIRECT) != 0:
        return np.int64(m.direct)
    return np.int64(h)


@kernel
def pktmbuf_attach(dom, mi, m):
    """``rte_pktmbuf_attach``: make ``mi`` an indirect mbuf sharing ``m``'s buffer.

    ``mi`` must be direct with refcnt 1 (returns -EINVAL otherwise, nothing changed).  The
    reference is taken on the direct mbuf behind ``m``, so attaching to a clone points at the
    original.  Header fields and the data window of ``m`` are copied; ``mi`` becomes a single
    segment whose ``pkt_len`` is its ``data_len``.
    """
    mb = dom.mb
    a = mb[mi]
    if (a.ol_flags & F_NOT_DIRECT) != 0 or a.refcnt != 1:
        return E_INVAL
    src = mb[m]
    md = mbuf_from_indirect(dom, m)
    mbuf_refcnt_update(dom, md, 1)
    field_fetch_add(dom.mb, md, "nb_indirect", 1)
    a.priv_size = src.priv_size
    a.buf_addr = src.buf_addr
    a.buf_iova = src.buf_iova
    a.buf_len = src.buf_len
    a.direct = md
    a.ol_flags = src.ol_flags | F_INDIRECT
    pktmbuf_copy_header(dom, mi, m)
    a.data_off = src.data_off
    a.data_len = src.data_len
    a.next = NULL
    a.pkt_len = a.data_len
    a.nb_segs = 1
    return 0


@kernel
def _free_direct(dom, lcore, md):
    """Drop one reference on direct mbuf ``md``; on the last, restore it and return it."""
    if mbuf_refcnt_update(dom, md, -1) == 0:
        d = dom.mb[md]
        d.next = NULL
        d.nb_segs = 1
        d.refcnt = 1
        mbuf_raw_free(dom, lcore, md)


@never_inline
@kernel
def pktmbuf_detach(dom, lcore, h):
    """``rte_pktmbuf_detach``: give an indirect mbuf its own buffer back.

    Drops the reference on the direct mbuf (freeing it into its pool, through ``lcore``'s
    cache, if that was the last one), then restores ``h``'s own buffer, headroom and flags.
    A direct mbuf is left as it is.
    """
    m = dom.mb[h]
    if (m.ol_flags & F_INDIRECT) == 0:
        return
    md = np.int64(m.direct)
    p = dom.pools[m.pool]
    off = (np.int64(h) - np.int64(p.obj_base)) * np.int64(p.elt_size) + np.int64(p.priv_size)
    m.priv_size = p.priv_size
    m.buf_addr = np.uint64(p.region_addr) + np.uint64(off)
    m.buf_iova = np.uint64(off)
    m.buf_len = p.data_room
    m.data_off = p.headroom
    m.data_len = 0
    m.ol_flags = 0
    m.direct = NULL
    field_fetch_add(dom.mb, md, "nb_indirect", -1)
    _free_direct(dom, lcore, md)


@kernel
def pktmbuf_clone(dom, pid, lcore, md):
    """``rte_pktmbuf_clone``: an indirect copy of packet ``md`` with mbufs from pool ``pid``.

    Returns the new head, or -ENOENT (-2) if the pool ran out (the partial clone is freed, so
    nothing changes).  ``md``'s segments each gain one reference.
    """
    mb = dom.mb
    head = mbuf_raw_alloc(dom, pid, lcore)
    if head < 0:
        return head
    pktmbuf_reset(dom, head)
    last = head
    seg = np.int64(md)
    nseg = 0
    first = True
    while seg != NULL:
        if first:
            mi = head
            first = False
        else:
            mi = mbuf_raw_alloc(dom, pid, lcore)
            if mi < 0:
                # undo: detach and release every clone segment made so far
                s = head
                while s != NULL:
                    nx = np.int64(mb[s].next)
                    pktmbuf_detach(dom, lcore, s)
                    mb[s].next = NULL
                    mb[s].nb_segs = 1
                    mbuf_raw_free(dom, lcore, s)
                    s = nx
                return np.int64(E_NOENT)
            pktmbuf_reset(dom, mi)
            mb[last].next = mi
        pktmbuf_attach(dom, mi, seg)
        last = mi
        nseg += 1
        seg = np.int64(mb[seg].next)
    mb[head].nb_segs = nseg
    mb[head].pkt_len = mb[md].pkt_len
    return head
