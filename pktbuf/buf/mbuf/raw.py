"""Raw mbuf allocation and release, field reset, and pool population.

``raw`` means what it does in DPDK: the caller guarantees the invariants and nothing is reset
beyond what the pool guarantees (``buf_addr``, ``buf_iova``, ``buf_len``, ``refcnt == 1``,
``nb_segs == 1``, ``next == NULL``, ``pool``, ``priv_size``).  The ``pktmbuf_`` allocators
add the per-packet field reset.

Every allocation marks the descriptor ``OBJ_ALLOC`` and every release ``OBJ_FREE``: one 16-bit
store on the first cache line, which the allocation writes anyway.  It is what lets the facade
(and the debug checks) tell a double free from a legitimate one in O(1).
"""
from __future__ import annotations

import numpy as np

from ..._jit import always_inline, kernel
from ..mempool.kernels import (mempool_generic_get, mempool_generic_put, mempool_get,
                               mempool_put)
from ...errors import E_INVAL
from ..mempool.layout import CFG_DEBUG, OBJ_ALLOC, OBJ_FREE
from .layout import NULL, PORT_INVALID

_U = np.uint64


@kernel
def debug_enabled(dom):
    """True when the domain's debug switch is on (``pktbuf.set_debug`` / ``Domain.debug``)."""
    return dom.cfg[CFG_DEBUG] != 0


@kernel
def pktmbuf_pool_init(dom, pid):
    """``rte_pktmbuf_init`` over every object of pool ``pid``, after ``mempool_populate`` gave
    them their buffers: the in-pool state of an mbuf and zeroed metadata."""
    p = dom.pools[pid]
    base = np.int64(p.obj_base)
    for k in range(np.int64(p.size)):
        h = base + k
        m = dom.mb[h]
        m.buf_len = p.data_room
        m.priv_size = p.priv_size
        m.refcnt = 1
        m.nb_segs = 1
        m.next = NULL
        m.direct = NULL
        m.nb_indirect = 0
        m.hash = 0
        m.hash_hi = 0
        m.shinfo = 0
        m.timesync = 0
        pktmbuf_raw_reset(dom, h, p.headroom)
        for i in range(9):
            m.dynfield1[i] = 0


@kernel
def mbuf_raw_alloc_bulk(dom, pid, lcore, mbufs, n):
    """``rte_mbuf_raw_alloc_bulk``: ``n`` mbufs in the in-pool state; 0 or -ENOENT (none taken)."""
    rc = mempool_generic_get(dom, np.int64(pid), np.int64(lcore), mbufs, np.int64(0), np.int64(n))
    if rc < 0:
        return rc
    mb = dom.mb
    for i in range(_U(n)):
        mb[_U(mbufs[i])].state = OBJ_ALLOC
    return 0


@kernel
def mbuf_raw_alloc(dom, pid, lcore):
    """``rte_mbuf_raw_alloc``: one mbuf handle, or -ENOENT (-2)."""
    h = mempool_get(dom, np.int64(pid), np.int64(lcore))
    if h >= 0:
        dom.mb[_U(h)].state = OBJ_ALLOC
    return h


@kernel
def mbuf_raw_free(dom, lcore, h):
    """``rte_mbuf_raw_free``: return one mbuf that is already in the in-pool state."""
    m = dom.mb[h]
    m.state = OBJ_FREE
    mempool_put(dom, np.int64(m.pool), np.int64(lcore), h)


@kernel
def mbuf_raw_free_bulk(dom, pid, lcore, mbufs, n):
    """``rte_mbuf_raw_free_bulk``: ``n`` direct, reinitialised mbufs of pool ``pid`` (fast free)."""
    if n < 0 or n > mbufs.size:
        return E_INVAL
    mb = dom.mb
    for i in range(n):
        mb[mbufs[i]].state = OBJ_FREE
    return mempool_generic_put(dom, np.int64(pid), np.int64(lcore), mbufs, np.int64(0), np.int64(n))


@kernel
def pktmbuf_raw_reset(dom, h, headroom):
    """The per-packet reset of ``rte_mbuf_raw_reset_bulk`` for one mbuf (second line: tx_offload)."""
    m = dom.mb[h]
    m.data_off = headroom
    m.port = PORT_INVALID
    m.ol_flags = 0
    m.packet_type = 0
    m.pkt_len = 0
    m.data_len = 0
    m.vlan_tci = 0
    m.vlan_tci_outer = 0
    m.tx_offload = 0


@kernel
def pktmbuf_copy_header(dom, dst, src):
    """Copy the per-packet metadata (port, VLANs, Tx offload lengths, hash, packet type,
    dynamic fields) of ``src`` to ``dst`` -- what attach and copy share, as DPDK's
    ``__rte_pktmbuf_copy_hdr`` (which leaves ``timesync`` and ``ol_flags`` alone)."""
    d = dom.mb[dst]
    s = dom.mb[src]
    d.port = s.port
    d.vlan_tci = s.vlan_tci
    d.vlan_tci_outer = s.vlan_tci_outer
    d.tx_offload = s.tx_offload
    d.hash = s.hash
    d.hash_hi = s.hash_hi
    d.packet_type = s.packet_type
    for i in range(9):
        d.dynfield1[i] = s.dynfield1[i]


@kernel
def pktmbuf_reset(dom, h):
    """``rte_pktmbuf_reset``: the raw reset plus ``next``/``nb_segs`` of a single segment."""
    m = dom.mb[h]
    m.next = NULL
    m.nb_segs = 1
    pktmbuf_raw_reset(dom, h, dom.pools[m.pool].headroom)


@kernel
def pktmbuf_alloc_bulk(dom, pid, lcore, mbufs, n):
    """``rte_pktmbuf_alloc_bulk``: ``n`` reset mbufs into ``mbufs[:n]``; 0 or -ENOENT (none taken)."""
    rc = mempool_generic_get(dom, np.int64(pid), np.int64(lcore), mbufs, np.int64(0), np.int64(n))
    if rc < 0:
        return rc
    headroom = dom.pools[pid].headroom
    mb = dom.mb
    for i in range(_U(n)):
        h = _U(mbufs[i])
        mb[h].state = OBJ_ALLOC
        pktmbuf_raw_reset(dom, h, headroom)
    return 0


@always_inline
@kernel
def pktmbuf_alloc(dom, pid, lcore):
    """``rte_pktmbuf_alloc``: one reset mbuf handle, or -ENOENT (-2).

    ``rte_pktmbuf_reset`` also sets ``next`` and ``nb_segs``; an mbuf just taken from its pool
    has them already (the in-pool invariants), so only the per-packet fields are written."""
    h = mbuf_raw_alloc(dom, pid, lcore)
    if h >= 0:
        pktmbuf_raw_reset(dom, _U(h), dom.pools[_U(pid)].headroom)
    return h
