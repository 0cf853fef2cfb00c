"""Packet types for plain Python: :func:`get_ptype`, :func:`get_ptype_lens`, :func:`ptype_name`.

    pt = get_ptype(mbuf)                       # rte_net_get_ptype, stored in the mbuf
    pt, lens = get_ptype_lens(mbuf)            # the header lengths too, as a dict
    ptype_name(pt)                             # 'L2_ETHER L3_IPV4 L4_UDP '

An mbuf is an :class:`~pktbuf.Mbuf` or a ``(domain, handle)`` pair (a Domain or a pool).
Arguments are checked here and bad ones raise from :mod:`pktbuf.errors`; the work is done by
:mod:`pktbuf.net.ptype.parse` and :mod:`pktbuf.net.ptype.mbuf` (callable from ``@njit`` code).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import InvalidArgument, check_uint, raise_for
from ...buf.domain.entry import py_mbuf_status
from .mbuf import net_get_ptype, net_get_ptype_bulk
from .names import ptype_name as _name
from .parse import net_get_ptype_lens
from .values import HL_NAMES, HL_SIZE, PTYPE_ALL_MASK

__all__ = ["get_ptype", "get_ptype_lens", "get_ptype_bulk", "ptype_name"]


@kernel
def _status_all(dom, hs, n):
    for k in range(n):
        if hs[k] != -1:
            rc = py_mbuf_status(dom, hs[k])
            if rc < 0:
                return k, rc
    return -1, 0


def _target(m, handle):
    """(domain, state, handle) of an Mbuf or of (domain-or-pool, handle), checked."""
    if handle is None:
        if isinstance(m, tuple) and len(m) == 2:
            m, handle = m
        else:
            dom = getattr(m, "domain", None)
            if dom is None or not hasattr(m, "handle") or not hasattr(m, "_valid"):
                raise InvalidArgument("expected an Mbuf or (domain, handle)")
            m._valid()
            return dom, dom.state, int(m.handle)
    d = getattr(m, "domain", m)
    if not hasattr(d, "state") or not hasattr(d, "handle"):
        raise InvalidArgument(f"expected a Domain or a pool, got {type(m).__name__}")
    h = d.handle(handle)
    rc = int(py_mbuf_status(d.state, h))
    raise_for(min(rc, 0), f"{h} is not an mbuf the application holds")
    return d, d.state, h


def _layers(layers) -> int:
    return check_uint(layers, "layers", 32)


def get_ptype(m, handle=None, *, layers=PTYPE_ALL_MASK) -> int:
    """The packet type of a packet, as ``rte_net_get_ptype`` (only the ``layers`` asked for);
    stored in its ``packet_type``, with the header lengths in its ``tx_offload``
    (docs/net.md: which lengths go where)."""
    lay = _layers(layers)
    _, st, h = _target(m, handle)
    return int(net_get_ptype(st, h, lay))


def get_ptype_lens(m, handle=None, *, layers=PTYPE_ALL_MASK) -> tuple[int, dict]:
    """``(ptype, lengths)`` without touching the mbuf: ``lengths`` holds the fields of DPDK's
    ``struct rte_net_hdr_lens`` that rte_net_get_ptype writes for this packet (``l2_len``,
    ``l3_len``, ``l4_len``, ``tunnel_len``, ``inner_l2_len`` ...)."""
    lay = _layers(layers)
    _, st, h = _target(m, handle)
    hl = np.full(HL_SIZE, -1, np.int32)
    pt = int(net_get_ptype_lens(st, h, lay, hl))
    return pt, {name: int(v) for name, v in zip(HL_NAMES, hl) if v >= 0}


def get_ptype_bulk(domain, mbufs, *, layers=PTYPE_ALL_MASK) -> np.ndarray:
    """:func:`get_ptype` for every packet of ``mbufs`` (handles or Mbufs; -1 skipped) of
    ``domain`` (a Domain or a pool).  Returns the types (uint32; 0 for skipped entries).  A
    handle that is not an mbuf the application holds raises, and then nothing is written."""
    lay = _layers(layers)
    d = getattr(domain, "domain", domain)
    if not hasattr(d, "state") or not hasattr(d, "handles"):
        raise InvalidArgument(f"expected a Domain or a pool, got {type(domain).__name__}")
    a = d.handles(mbufs, "mbufs")
    k, rc = _status_all(d.state, a, a.size)
    if k >= 0:
        raise_for(int(rc), f"mbufs[{k}] = {int(a[k])} is not an mbuf the application holds")
    raise_for(min(int(net_get_ptype_bulk(d.state, a, a.size, lay)), 0))
    mb = d.state.mb
    return np.array([mb["packet_type"][h] if h != -1 else 0 for h in a.tolist()], np.uint32)


def ptype_name(ptype) -> str:
    """``rte_get_ptype_name``: ``'L2_ETHER L3_IPV4 L4_UDP '`` (each name followed by a space,
    as DPDK writes it), ``'UNKNOWN'`` for 0."""
    return _name(check_uint(ptype, "ptype", 32))
