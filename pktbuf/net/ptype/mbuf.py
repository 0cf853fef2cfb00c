"""The packet type of mbufs, stored in them: ``packet_type`` and the ``tx_offload`` lengths.

DPDK's ``rte_net_get_ptype`` only returns the type and fills a ``struct rte_net_hdr_lens``;
the drivers that use it (virtio, tap, af_packet...) store the type in ``m->packet_type`` and
copy the lengths they need into ``m->l2_len`` / ``l3_len`` / ``l4_len``.  :func:`net_get_ptype`
does both in one call, with the lengths packed into ``tx_offload`` as
``rte_mbuf_tx_offload`` packs them (:mod:`pktbuf.buf.mbuf.offload`):

* no tunnel: ``l2_len``, ``l3_len``, ``l4_len`` of the packet, outer lengths 0;
* a tunnel (GRE, NVGRE, IP-in-IP): DPDK's convention for tunnel offloads -- ``outer_l2_len``
  and ``outer_l3_len`` are the outer headers, ``l2_len`` is the tunnel header plus the inner
  L2 header, ``l3_len`` / ``l4_len`` the inner ones.

Lengths of layers the parse did not reach are 0 (the mbuf gets no stale values), and each is
masked to its bit field as C stores a bit field (``l3_len`` has 9 bits: an IPv6 header chain
longer than 511 bytes is truncated -- :func:`~.parse.net_get_ptype_lens` has the full values).
``tso_segsz`` (bits 24-39) is kept.
"""
from __future__ import annotations

import numpy as np

from ..._jit import always_inline, kernel
from ...errors import E_INVAL
from ...buf.mbuf.layout import NULL
from ...buf.mbuf.offload import mbuf_tx_offload
from ...rawmem import stack_i32
from ..hdr.mem import stack_u8
from .parse import net_get_ptype_buf, net_ptype_first_seg
from .values import (HL_INNER_L2, HL_INNER_L3, HL_INNER_L4, HL_L2, HL_L3, HL_L4, HL_TUNNEL,
                     PTYPE_TUNNEL_MASK)

_TSO_BITS = np.uint64(0xFFFF) << np.uint64(24)


@always_inline
@kernel
def _store(dom, h, pt, hl):
    m = dom.mb[h]
    m.packet_type = pt
    if pt & PTYPE_TUNNEL_MASK:
        lens = mbuf_tx_offload(hl[HL_TUNNEL] + hl[HL_INNER_L2], hl[HL_INNER_L3],
                               hl[HL_INNER_L4], 0, hl[HL_L3], hl[HL_L2])
    else:
        lens = mbuf_tx_offload(hl[HL_L2], hl[HL_L3], hl[HL_L4], 0, 0, 0)
    m.tx_offload = (m.tx_offload & _TSO_BITS) | lens


@always_inline
@kernel
def _one(dom, h, layers, hl, lens, buf):
    """Parse and store one packet.  A packet wholly in its first segment (nearly all) is
    parsed inline from that segment's address; any other goes to the out-of-line parser with
    ``hl``, whose lengths are then copied into ``lens``.  ``lens`` never leaves this function,
    so the compiler keeps the lengths in registers."""
    for i in range(7):
        lens[i] = 0
    m = dom.mb[h]
    dlen = np.int64(m.data_len)
    if np.int64(m.pkt_len) <= dlen:
        pt = net_ptype_first_seg(dom, h, layers, lens, buf,
                                 np.int64(m.buf_addr) + np.int64(m.data_off), dlen)
    else:
        for i in range(7):
            hl[i] = 0
        pt = net_get_ptype_buf(dom, h, layers, hl, buf)
        for i in range(7):
            lens[i] = hl[i]
    _store(dom, h, pt, lens)
    return pt


@always_inline
@kernel
def net_get_ptype(dom, h, layers):
    """Parse packet ``h`` as ``rte_net_get_ptype(m, &hl, layers)``, store the type in its
    ``packet_type`` and the lengths in ``tx_offload`` (module docstring); returns the type
    (>= 0; 0 for a frame shorter than an Ethernet header or ``layers`` without L2 bits)."""
    hl = stack_i32(8)
    lens = stack_i32(8)
    buf = stack_u8(64)
    return _one(dom, h, layers, hl, lens, buf)


@kernel
def net_get_ptype_bulk(dom, handles, n, layers):
    """:func:`net_get_ptype` for ``handles[:n]`` (NULL handles skipped).  Returns how many
    were parsed, or ``E_INVAL`` (nothing done) if ``n`` is negative or exceeds the array."""
    if n < 0 or n > handles.size:
        return E_INVAL
    hl = stack_i32(8)
    lens = stack_i32(8)
    buf = stack_u8(64)
    done = 0
    for k in range(n):
        h = handles[k]
        if h == NULL:
            continue
        _one(dom, np.int64(h), layers, hl, lens, buf)
        done += 1
    return done
