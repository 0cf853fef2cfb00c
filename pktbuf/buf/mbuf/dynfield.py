"""Dynamic mbuf fields and flags (``rte_mbuf_dynfield_register`` / ``rte_mbuf_dynflag_register``).

Applications claim named pieces of the descriptor's spare area -- ``dynfield1``, bytes 92..127
of every mbuf -- and named bits of ``ol_flags`` at run time, so that independent libraries can
attach metadata to packets without a fixed layout.  Rules, as in DPDK:

* registering the same name again with the same parameters returns the same offset (bit);
  with different parameters it fails (``EEXIST``);
* ``size`` must fit the area, ``align`` must be a power of two, ``flags`` must be 0;
* an explicit ``offset`` (``bitnum``) must be free;
* flag bits come from the range DPDK leaves free, bits 23..40
  (``RTE_MBUF_F_FIRST_FREE`` .. ``RTE_MBUF_F_LAST_FREE``).

The registry of names is the facade's (:class:`pktbuf.buf.domain.dynfield.DynRegistry`, one per
:class:`~pktbuf.Domain` as ``domain.dyn``).  Read and write fields in kernels with
:func:`mbuf_dynfield_read` / :func:`mbuf_dynfield_write`.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...rawmem import load_u8, store_u8
from .layout import MBUF_DTYPE

DYN_START = MBUF_DTYPE.fields["dynfield1"][1]     # 92
DYN_END = MBUF_DTYPE.itemsize                     # 128
FLAG_FIRST_FREE = 23
FLAG_LAST_FREE = 40


__all__ = ["DYN_START", "DYN_END", "FLAG_FIRST_FREE", "FLAG_LAST_FREE", "mbuf_dynfield_read",
           "mbuf_dynfield_write"]


@kernel
def mbuf_dynfield_read(dom, h, offset, nbytes):
    """The little-endian unsigned value of ``nbytes`` (1..8) at byte ``offset`` of mbuf ``h``."""
    base = np.uint64(dom.mb.ctypes.data) + np.uint64(h) * np.uint64(128) + np.uint64(offset)
    v = np.uint64(0)
    for i in range(nbytes):
        v |= np.uint64(load_u8(base + np.uint64(i))) << np.uint64(8 * i)
    return v


@kernel
def mbuf_dynfield_write(dom, h, offset, nbytes, value):
    """Store the low ``nbytes`` (1..8) of ``value`` at byte ``offset`` of mbuf ``h``."""
    base = np.uint64(dom.mb.ctypes.data) + np.uint64(h) * np.uint64(128) + np.uint64(offset)
    v = np.uint64(value)
    for i in range(nbytes):
        store_u8(base + np.uint64(i), (v >> np.uint64(8 * i)) & np.uint64(0xFF))
