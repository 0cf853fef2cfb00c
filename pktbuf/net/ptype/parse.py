"""``rte_net_get_ptype`` (DPDK 22.11, lib/net/rte_net.c) over an mbuf, in JIT.

:func:`net_get_ptype_lens` returns the packet type of packet ``h`` and fills ``hl`` -- the
seven header lengths of DPDK's ``struct rte_net_hdr_lens`` in its field order (slots
:data:`~.values.HL_L2` ...) -- writing, as DPDK does, only the slots of the layers it
reaches.  What it recognises, and the quirks kept on purpose (docs/net.md lists them):

* L2: Ethernet; one 802.1Q tag (0x8100) or an 802.1ad pair (0x88A8, the second tag's TPID
  unchecked); MPLS stops at L2 (``L2_ETHER``, the MPLS type is never returned); anything else
  is ``L2_ETHER`` with no L3.
* L3: IPv4 from the version/IHL byte (0x45 ``IPV4``, 0x46-0x4F ``IPV4_EXT``, other values no
  L3 bits but the parse goes on with ``l3_len = IHL * 4``); IPv6 with extension headers walked
  by :func:`~pktbuf.net.hdr.ipv6_ext.ipv6_skip_ext` (ESP and AH not skipped).
* L4: UDP, TCP (length from the data offset; an unreadable TCP header drops the L4 bits),
  SCTP; fragments (``L4_FRAG``, parse stops).  ICMP and IGMP get no L4 bits.
* Tunnels (only without UDP/TCP/SCTP): GRE (length from its flags; 0x6558 payload is
  ``NVGRE``), IPv4-in-IP and IPv6-in-IP (``TUNNEL_IP``); then the inner Ethernet, VLAN/QinQ,
  IPv4/IPv6 and L4 as the outer ones, with ``INNER_*`` values.  No port-based tunnels.
* Every read goes through ``rte_pktmbuf_read``'s rules (:mod:`pktbuf.net.hdr.access`): across
  segments, never past ``pkt_len``; a read that fails stops the parse with what was found.

``proto`` below holds what DPDK's variable of that name holds on a little-endian host: an
ethertype is its two wire bytes loaded as a host word, an IP protocol its byte.  DPDK compares
both kinds against IP protocol numbers when it looks for a tunnel, so an ethertype such as
0x2F00 after a non-IP L2 header counts as GRE there; keeping the same representation keeps
the same answers.
"""
from __future__ import annotations

import numpy as np

from ..._jit import always_inline, kernel, never_inline
from ...errors import E_INVAL, E_RANGE
from ...rawmem import load_u8
from ..hdr.access import hdr_read
from ..hdr.gre import gre_hdr_len
from ..hdr.ipv6_ext import (IPPROTO_AH, IPPROTO_DSTOPTS, IPPROTO_ESP, IPPROTO_FRAGMENT,
                            IPPROTO_HOPOPTS, IPPROTO_ROUTING, ipv6_skip_ext)
from ..hdr.l4 import SCTP_HDR_LEN, TCP_HDR_LEN, UDP_HDR_LEN, tcp_hdr_len
from ..hdr.mem import load_be16, load_le16, stack_u8
from .values import (HL_INNER_L2, HL_INNER_L3, HL_INNER_L4, HL_L2, HL_L3, HL_L4, HL_SIZE,
                     HL_TUNNEL, PTYPE_INNER_L2_ETHER, PTYPE_INNER_L2_ETHER_QINQ,
                     PTYPE_INNER_L2_ETHER_VLAN, PTYPE_INNER_L2_MASK, PTYPE_INNER_L3_IPV4,
                     PTYPE_INNER_L3_IPV4_EXT, PTYPE_INNER_L3_IPV6, PTYPE_INNER_L3_IPV6_EXT,
                     PTYPE_INNER_L3_MASK, PTYPE_INNER_L4_FRAG, PTYPE_INNER_L4_MASK,
                     PTYPE_INNER_L4_SCTP, PTYPE_INNER_L4_TCP, PTYPE_INNER_L4_UDP,
                     PTYPE_L2_ETHER, PTYPE_L2_ETHER_QINQ, PTYPE_L2_ETHER_VLAN, PTYPE_L2_MASK,
                     PTYPE_L3_IPV4, PTYPE_L3_IPV4_EXT, PTYPE_L3_IPV6, PTYPE_L3_IPV6_EXT,
                     PTYPE_L3_MASK, PTYPE_L4_FRAG, PTYPE_L4_MASK, PTYPE_L4_SCTP, PTYPE_L4_TCP,
                     PTYPE_L4_UDP, PTYPE_TUNNEL_GRE, PTYPE_TUNNEL_IP, PTYPE_TUNNEL_MASK,
                     PTYPE_TUNNEL_NVGRE)


def _host(ethertype: int) -> int:
    """An ethertype as DPDK's ``proto`` holds it on a little-endian host."""
    return ((ethertype & 0xFF) << 8) | (ethertype >> 8)


P_IPV4, P_IPV6 = _host(0x0800), _host(0x86DD)
P_VLAN, P_QINQ = _host(0x8100), _host(0x88A8)
P_MPLS, P_MPLSM, P_TEB = _host(0x8847), _host(0x8848), _host(0x6558)
IPPROTO_IPIP, IPPROTO_IPV6, IPPROTO_GRE = 4, 41, 47
IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP = 6, 17, 132
MAX_MPLS_HDR = 5
SCRATCH = 64              # bytes of stack for a header that straddles segments (IPv6: 40)


@always_inline
@kernel
def _rd(dom, h, off, n, buf, base, dlen, fast):
    """:func:`~pktbuf.net.hdr.access.hdr_read` for the parser.  ``fast`` (a constant at every
    call): the whole packet is in the first segment (``pkt_len <= data_len``), whose data
    start at ``base``, ``dlen`` bytes -- then a read either lies inside it or goes past
    ``pkt_len``, which is ``E_RANGE`` in ``hdr_read`` too, so the answer is the same without
    reloading the mbuf and without a call to the out-of-line segment walk."""
    if fast:
        if off + n <= dlen:
            return base + off
        return np.int64(E_RANGE)
    return hdr_read(dom, h, off, n, buf)


@always_inline
@kernel
def _l4_bits(proto, inner):
    if proto == IPPROTO_UDP:
        return PTYPE_INNER_L4_UDP if inner else PTYPE_L4_UDP
    if proto == IPPROTO_TCP:
        return PTYPE_INNER_L4_TCP if inner else PTYPE_L4_TCP
    if proto == IPPROTO_SCTP:
        return PTYPE_INNER_L4_SCTP if inner else PTYPE_L4_SCTP
    return 0


@always_inline
@kernel
def _ip6_is_ext(proto):
    return (proto == IPPROTO_HOPOPTS or proto == IPPROTO_ROUTING or proto == IPPROTO_FRAGMENT
            or proto == IPPROTO_ESP or proto == IPPROTO_AH or proto == IPPROTO_DSTOPTS)


@always_inline
@kernel
def _ip_layer(dom, h, layers, hl, proto, off, buf, base, dlen, fast, inner):
    """The L3 header at ``off`` and the L4 protocol after it: ``(bits, proto, off, stop)``.
    ``stop`` means the parse ends here with the bits found so far (a layer not asked for, a
    read that failed, a fragment, no next header)."""
    l3_mask = PTYPE_INNER_L3_MASK if inner else PTYPE_L3_MASK
    l4_mask = PTYPE_INNER_L4_MASK if inner else PTYPE_L4_MASK
    s_l3 = HL_INNER_L3 if inner else HL_L3
    s_l4 = HL_INNER_L4 if inner else HL_L4
    frag_bits = PTYPE_INNER_L4_FRAG if inner else PTYPE_L4_FRAG
    if (layers & l3_mask) == 0:
        return 0, proto, off, True
    if proto == P_IPV4:
        p = _rd(dom, h, off, 20, buf, base, dlen, fast)
        if p < 0:
            return 0, proto, off, True
        vihl = np.int64(load_u8(p))
        bits = 0
        if vihl == 0x45:
            bits = PTYPE_INNER_L3_IPV4 if inner else PTYPE_L3_IPV4
        elif 0x46 <= vihl <= 0x4F:
            bits = PTYPE_INNER_L3_IPV4_EXT if inner else PTYPE_L3_IPV4_EXT
        n = (vihl & 0xF) * 4
        hl[s_l3] = n
        off += n
        if (layers & l4_mask) == 0:
            return bits, proto, off, True
        if load_be16(p + 6) & 0x3FFF:             # MF or a fragment offset
            hl[s_l4] = 0
            return bits | frag_bits, proto, off, True
        proto = np.int64(load_u8(p + 9))
        return bits | _l4_bits(proto, inner), proto, off, False
    if proto == P_IPV6:
        p = _rd(dom, h, off, 40, buf, base, dlen, fast)
        if p < 0:
            return 0, proto, off, True
        proto = np.int64(load_u8(p + 6))
        hl[s_l3] = 40
        off += 40
        frag = 0
        if _ip6_is_ext(proto):
            bits = PTYPE_INNER_L3_IPV6_EXT if inner else PTYPE_L3_IPV6_EXT
            nxt, end, frag = ipv6_skip_ext(dom, h, off, proto, buf)
            if nxt < 0:
                return bits, proto, off, True
            hl[s_l3] = hl[s_l3] + (end - off)
            proto = nxt
            off = end
        else:
            bits = PTYPE_INNER_L3_IPV6 if inner else PTYPE_L3_IPV6
        if proto == 0 or (layers & l4_mask) == 0:
            return bits, proto, off, True
        if frag:
            hl[s_l4] = 0
            return bits | frag_bits, proto, off, True
        return bits | _l4_bits(proto, inner), proto, off, False
    return 0, proto, off, False


@always_inline
@kernel
def _tunnel(dom, h, proto, off, buf, base, dlen, fast):
    """``(tunnel bits, inner proto, offset after the tunnel header)``."""
    if proto == IPPROTO_GRE:
        p = _rd(dom, h, off, 4, buf, base, dlen, fast)
        if p < 0:
            return 0, proto, off
        n = gre_hdr_len(load_be16(p))
        if n == 0:
            return 0, proto, off
        inner = load_le16(p + 2)
        return (PTYPE_TUNNEL_NVGRE if inner == P_TEB else PTYPE_TUNNEL_GRE), inner, off + n
    if proto == IPPROTO_IPIP:
        return PTYPE_TUNNEL_IP, np.int64(P_IPV4), off
    if proto == IPPROTO_IPV6:
        return PTYPE_TUNNEL_IP, np.int64(P_IPV6), off
    return 0, proto, off


@always_inline
@kernel
def _vlan(dom, h, proto, off, buf, base, dlen, fast, s_l2, hl):
    """After an ethertype: one VLAN tag or a QinQ pair.  ``(kind, proto, off)`` with kind 0
    (none), 1 (VLAN), 2 (QinQ), or -1/-2 when that tag could not be read."""
    if proto == P_VLAN:
        p = _rd(dom, h, off, 4, buf, base, dlen, fast)
        if p < 0:
            return -1, proto, off
        hl[s_l2] = hl[s_l2] + 4
        return 1, load_le16(p + 2), off + 4
    if proto == P_QINQ:
        p = _rd(dom, h, off + 4, 4, buf, base, dlen, fast)
        if p < 0:
            return -2, proto, off
        hl[s_l2] = hl[s_l2] + 8
        return 2, load_le16(p + 2), off + 8
    return 0, proto, off


@never_inline
@kernel
def net_get_ptype_buf(dom, h, layers, hl, buf):
    """:func:`net_get_ptype_lens` with the caller's scratch buffer (``buf``: uint8, 64 bytes
    or more; not checked).  Any packet: segments are walked where a header needs it."""
    return _parse(dom, h, layers, hl, buf, np.int64(0), np.int64(0), False)


@always_inline
@kernel
def net_ptype_first_seg(dom, h, layers, hl, buf, base, dlen):
    """The parser for a packet wholly in its first segment (``pkt_len <= data_len``; its data
    at ``base``, ``dlen`` bytes): no mbuf field is read again, no call is made but the IPv6
    extension-header walk.  Inlined into the per-packet kernels (:mod:`.mbuf`), which call
    :func:`net_get_ptype_buf` out of line for every other packet."""
    return _parse(dom, h, layers, hl, buf, base, dlen, True)


@always_inline
@kernel
def _parse(dom, h, layers, hl, buf, base, dlen, fast):
    """The parser itself; ``fast``: see :func:`_rd`."""
    p = _rd(dom, h, 0, 14, buf, base, dlen, fast)
    if p < 0:
        return np.int64(0)
    proto = load_le16(p + 12)
    off = np.int64(14)
    hl[HL_L2] = 14
    if (layers & PTYPE_L2_MASK) == 0:
        return np.int64(0)
    pt = np.int64(PTYPE_L2_ETHER)
    if proto != P_IPV4:
        if proto == P_MPLS or proto == P_MPLSM:
            return pt                  # DPDK reads the labels, then always stops at L2
        kind, proto, off = _vlan(dom, h, proto, off, buf, base, dlen, fast, HL_L2, hl)
        if kind != 0:
            pt = PTYPE_L2_ETHER_VLAN if (kind == 1 or kind == -1) else PTYPE_L2_ETHER_QINQ
            if kind < 0:
                return pt
    bits, proto, off, stop = _ip_layer(dom, h, layers, hl, proto, off, buf, base, dlen, fast, False)
    pt |= bits
    if stop:
        return pt
    l4 = pt & PTYPE_L4_MASK
    if l4 == PTYPE_L4_UDP:
        hl[HL_L4] = UDP_HDR_LEN
        return pt
    if l4 == PTYPE_L4_TCP:
        t = _rd(dom, h, off, TCP_HDR_LEN, buf, base, dlen, fast)
        if t < 0:
            return pt & (PTYPE_L2_MASK | PTYPE_L3_MASK)
        hl[HL_L4] = tcp_hdr_len(t)
        return pt
    if l4 == PTYPE_L4_SCTP:
        hl[HL_L4] = SCTP_HDR_LEN
        return pt
    hl[HL_L4] = 0
    if (layers & PTYPE_TUNNEL_MASK) == 0:
        return pt
    tbits, proto, end = _tunnel(dom, h, proto, off, buf, base, dlen, fast)
    pt |= tbits
    hl[HL_TUNNEL] = end - off
    hl[HL_INNER_L2] = end - off
    off = end
    if (layers & PTYPE_INNER_L2_MASK) == 0:
        return pt
    hl[HL_INNER_L2] = 0
    if proto == P_TEB:
        e = _rd(dom, h, off, 14, buf, base, dlen, fast)
        if e < 0:
            return pt
        pt |= PTYPE_INNER_L2_ETHER
        proto = load_le16(e + 12)
        off += 14
        hl[HL_INNER_L2] = 14
    kind, proto, off = _vlan(dom, h, proto, off, buf, base, dlen, fast, HL_INNER_L2, hl)
    if kind != 0:
        pt = (pt & ~PTYPE_INNER_L2_MASK) | (PTYPE_INNER_L2_ETHER_VLAN if (kind == 1 or kind == -1)
                                            else PTYPE_INNER_L2_ETHER_QINQ)
        if kind < 0:
            return pt
    bits, proto, off, stop = _ip_layer(dom, h, layers, hl, proto, off, buf, base, dlen, fast, True)
    pt |= bits
    if stop:
        return pt
    l4 = pt & PTYPE_INNER_L4_MASK
    if l4 == PTYPE_INNER_L4_UDP:
        hl[HL_INNER_L4] = UDP_HDR_LEN
    elif l4 == PTYPE_INNER_L4_TCP:
        t = _rd(dom, h, off, TCP_HDR_LEN, buf, base, dlen, fast)
        if t < 0:
            return pt & (PTYPE_INNER_L2_MASK | PTYPE_INNER_L3_MASK)
        hl[HL_INNER_L4] = tcp_hdr_len(t)
    elif l4 == PTYPE_INNER_L4_SCTP:
        hl[HL_INNER_L4] = SCTP_HDR_LEN
    else:
        hl[HL_INNER_L4] = 0
    return pt


@kernel
def net_get_ptype_lens(dom, h, layers, hl):
    """``rte_net_get_ptype(m, hl, layers)``: the packet type of packet ``h`` (>= 0), parsing
    only the layers whose bits are in ``layers`` (``PTYPE_ALL_MASK`` for everything), with
    the header lengths in ``hl`` (7 or more integers, :data:`~.values.HL_L2` ...; only the
    slots of the layers reached are written).  ``E_INVAL`` if ``hl`` is shorter than 7.
    Nothing in the mbuf is changed (:func:`~.mbuf.net_get_ptype` stores the results)."""
    if hl.size < HL_SIZE:
        return np.int64(E_INVAL)
    buf = stack_u8(64)
    return net_get_ptype_buf(dom, h, layers, hl, buf)
