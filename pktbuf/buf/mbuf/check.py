"""Sanity checks: handle validity, ``rte_mbuf_check`` and the dry run of a free.

These run in the facade before every mutating call, and inside kernels when the domain's
debug switch is on.  None of them writes anything.

``mbuf_check`` returns 0 or a negative *reason* (``CHK_*``); ``CHECK_REASONS`` maps it to the
message.  DPDK's ``iova == 0`` rule has no meaning here (a buffer at the start of its region
has iova 0); its place is taken by a stronger one: the buffer must lie inside its pool's region
and ``buf_iova`` must be the buffer's offset there.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_ALREADY, E_BADF, E_FAULT, E_INVAL, E_NOMEM, E_OK
from ..mempool.layout import MAX_POOLS, OBJ_ALLOC, POOL_F_MBUF, POOL_F_USED
from .layout import F_INDIRECT, MAX_SEGS, NULL

CHK_OK = 0
CHK_NULL = -1
CHK_BAD_HANDLE = -2
CHK_POOL = -3
CHK_BUF_ADDR = -4
CHK_IOVA = -5
CHK_REFCNT = -6
CHK_STATE = -7
CHK_DATA_LEN = -8
CHK_DATA_OFF = -9
CHK_SEG_LEN = -10
CHK_NB_SEGS = -11
CHK_PKT_LEN = -12
CHK_RAW = -13
CHK_LOOP = -14

CHECK_REASONS = {
    CHK_NULL: "mbuf is NULL",
    CHK_BAD_HANDLE: "handle outside the descriptor table",
    CHK_POOL: "bad mbuf pool",
    CHK_BUF_ADDR: "bad buf_addr",
    CHK_IOVA: "bad IO addr",
    CHK_REFCNT: "bad ref cnt",
    CHK_STATE: "mbuf is not allocated",
    CHK_DATA_LEN: "bad data_len",
    CHK_DATA_OFF: "data offset too big in mbuf segment",
    CHK_SEG_LEN: "data length too big in mbuf segment",
    CHK_NB_SEGS: "bad nb_segs",
    CHK_PKT_LEN: "bad pkt_len",
    CHK_RAW: "mbuf not in its in-pool state (refcnt 1, one segment, no next, direct)",
    CHK_LOOP: "segment chain longer than 65535 (a loop?)",
}


@kernel
def mbuf_handle_valid(dom, h):
    """True if ``h`` is an object of a live mbuf pool of this domain (whatever its state)."""
    if h < 0 or h >= dom.mb.size:
        return False
    pid = np.int64(dom.mb[h].pool)
    if pid >= MAX_POOLS:
        return False
    p = dom.pools[pid]
    if (p.flags & (POOL_F_USED | POOL_F_MBUF)) != (POOL_F_USED | POOL_F_MBUF):
        return False
    k = np.int64(h) - np.int64(p.obj_base)
    return k >= 0 and k < np.int64(p.size)


@kernel
def check_seg(dom, h):
    """The per-segment rules of rte_mbuf_check (pool, buffer, refcnt): 0 or a ``CHK_*``."""
    if h == NULL:
        return CHK_NULL
    if h < 0 or h >= dom.mb.size:
        return CHK_BAD_HANDLE
    if not mbuf_handle_valid(dom, h):
        return CHK_POOL
    m = dom.mb[h]
    # the buffer must sit inside the region of the pool that owns it
    owner = np.int64(m.direct) if (m.ol_flags & F_INDIRECT) != 0 else np.int64(h)
    if owner < 0 or owner >= dom.mb.size or not mbuf_handle_valid(dom, owner):
        return CHK_BUF_ADDR
    p = dom.pools[dom.mb[owner].pool]
    addr = np.uint64(m.buf_addr)
    lo = np.uint64(p.region_addr)
    if addr == 0 or addr < lo or addr + np.uint64(m.buf_len) > lo + np.uint64(p.region_size):
        return CHK_BUF_ADDR
    if np.uint64(m.buf_iova) != addr - lo:
        return CHK_IOVA
    if m.refcnt == 0 or m.refcnt == 0xFFFF:
        return CHK_REFCNT
    return CHK_OK


@kernel
def mbuf_check(dom, h, is_header):
    """``rte_mbuf_check``: 0, or a negative ``CHK_*`` reason.

    For a packet header (``is_header``) also walks the chain: every segment's data window
    inside its buffer, the number of segments equal to ``nb_segs``, and ``pkt_len`` equal to the
    sum of ``data_len``.  Allocated state is checked too (an mbuf in its pool is no packet).
    """
    rc = check_seg(dom, h)
    if rc != CHK_OK:
        return rc
    if not is_header:
        return CHK_OK
    m = dom.mb[h]
    if m.state != OBJ_ALLOC:
        return CHK_STATE
    if np.int64(m.data_len) > np.int64(m.pkt_len):
        return CHK_DATA_LEN
    nb = np.int64(m.nb_segs)
    pkt_len = np.int64(m.pkt_len)
    total = np.int64(0)
    seg = np.int64(h)
    count = 0
    while seg != NULL:
        if count >= MAX_SEGS:
            return CHK_LOOP
        rc = check_seg(dom, seg)
        if rc != CHK_OK:
            return rc
        s = dom.mb[seg]
        if s.state != OBJ_ALLOC:
            return CHK_STATE
        if np.int64(s.data_off) > np.int64(s.buf_len):
            return CHK_DATA_OFF
        if np.int64(s.data_off) + np.int64(s.data_len) > np.int64(s.buf_len):
            return CHK_SEG_LEN
        total += np.int64(s.data_len)
        count += 1
        seg = np.int64(s.next)
    if count != nb:
        return CHK_NB_SEGS
    if total != pkt_len:
        return CHK_PKT_LEN
    return CHK_OK


@kernel
def mbuf_raw_check(dom, h):
    """``rte_mbuf_raw_check``: ``mbuf_check`` of one segment plus the in-pool invariants."""
    rc = check_seg(dom, h)
    if rc != CHK_OK:
        return rc
    m = dom.mb[h]
    if m.refcnt != 1 or m.next != NULL or m.nb_segs != 1 or (m.ol_flags & F_INDIRECT) != 0:
        return CHK_RAW
    return CHK_OK


@kernel
def _heapsort(a, n):
    """Sort a[:n] in place (no allocation, so it runs without Numba's runtime)."""
    start = n // 2 - 1
    end = n - 1
    while start >= 0:
        _sift(a, start, n)
        start -= 1
    while end > 0:
        t = a[end]
        a[end] = a[0]
        a[0] = t
        _sift(a, 0, end)
        end -= 1


@kernel
def _sift(a, root, n):
    while True:
        child = 2 * root + 1
        if child >= n:
            return
        if child + 1 < n and a[child + 1] > a[child]:
            child += 1
        if a[root] >= a[child]:
            return
        t = a[root]
        a[root] = a[child]
        a[child] = t
        root = child


@kernel
def free_check_scratch_size(dom, mbufs, n):
    """Scratch entries ``pktmbuf_free_check`` needs for ``mbufs[:n]`` (one per segment)."""
    nseg = 0
    for i in range(n):
        seg = np.int64(mbufs[i])
        cnt = 0
        while seg >= 0 and seg < dom.mb.size and cnt <= MAX_SEGS:
            cnt += 1
            seg = np.int64(dom.mb[seg].next)
        nseg += cnt
    return nseg


@kernel
def pktmbuf_free_check(dom, mbufs, n, scratch):
    """Dry run of freeing the packets ``mbufs[:n]``: 0 if the free is legal, else a code.

    * ``E_BADF``: an entry is neither NULL (-1) nor an mbuf of a live pool;
    * ``E_ALREADY``: an mbuf is already in its pool, or the free would drop more references
      on some segment (counting segments reached through chains and the direct mbufs behind
      indirect ones) than the application holds -- a double free (references held by
      attached clones do not count as the application's);
    * ``E_FAULT``: a segment fails its sanity check (foreign buffer, refcnt 0 or 0xFFFF) or
      the chain is broken or loops.  Lengths are not checked: they do not matter for a free,
      and a raw-allocated mbuf legitimately carries stale ones;
    * ``E_NOMEM``: ``scratch`` (int32) is smaller than ``free_check_scratch_size``: the
      reference counting was not done (everything else was checked).

    Nothing in the domain is written.  Cost: O(s log s) for s segments in all.
    """
    if n < 0 or n > mbufs.size:
        return E_INVAL
    nseg = 0
    for i in range(n):
        h = np.int64(mbufs[i])
        if h == NULL:
            continue
        if not mbuf_handle_valid(dom, h):
            return E_BADF
        if dom.mb[h].state != OBJ_ALLOC:
            return E_ALREADY
        seg = h
        cnt = 0
        while seg != NULL:
            if not mbuf_handle_valid(dom, seg):
                return E_FAULT
            if dom.mb[seg].state != OBJ_ALLOC:
                return E_ALREADY
            if check_seg(dom, seg) != CHK_OK:
                return E_FAULT
            cnt += 1
            if cnt > MAX_SEGS:
                return E_FAULT
            seg = np.int64(dom.mb[seg].next)
        nseg += cnt
    if scratch.size < nseg:
        return E_NOMEM
    k = 0
    for i in range(n):
        seg = np.int64(mbufs[i])
        while seg != NULL:
            scratch[k] = seg
            k += 1
            seg = np.int64(dom.mb[seg].next)
    return _count_refs(scratch, k, dom)


@kernel
def _count_refs(refs, nref, dom):
    """Sort refs[:nref]; 0 if no handle occurs more often than the application holds it.

    The application's references to a segment are its ``refcnt`` minus the references held by
    attached indirect mbufs (``nb_indirect``): freeing an mbuf twice while a clone still uses
    it is a double free, even though the refcnt alone would allow it.  Freeing a clone drops
    the clone's own reference on the direct mbuf, never one of the application's.
    """
    _heapsort(refs, nref)
    i = 0
    while i < nref:
        h = refs[i]
        j = i
        while j < nref and refs[j] == h:
            j += 1
        m = dom.mb[h]
        if j - i > np.int64(m.refcnt) - np.int64(m.nb_indirect):
            return E_ALREADY
        i = j
    return E_OK
