"""The redirection table (RETA): which Rx queue a hash goes to.

``queue = reta[hash & (size - 1)]`` -- DPDK's ``reta[hash % reta_size]`` with a power-of-two
size, i.e. the low bits of the hash index the table.  :func:`reta_init` fills it round robin
(entry ``i`` -> queue ``i % nb_queues``, what ixgbe and Linux's default indirection do);
:func:`reta_update` changes entries chosen by a bit mask, as
``rte_eth_dev_rss_reta_update`` does with its groups of 64 (``masks[g]`` bit ``b`` selects
entry ``64 g + b``).  A packet that was not hashed has hash 0 and goes to ``reta[0]``.
Tables are uint16 arrays.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import E_INVAL
from ...buf.mbuf.layout import NULL
from .tuple import RX_RSS_HASH

RETA_GROUP_SIZE = 64            # RTE_ETH_RETA_GROUP_SIZE
RETA_SIZE_MAX = 512             # RTE_ETH_RSS_RETA_SIZE_512


@kernel(inline="always")
def _size_ok(size):
    return size >= 1 and size <= 65536 and (size & (size - 1)) == 0


@kernel
def reta_init(reta, nb_queues):
    """Fill ``reta`` round robin over ``nb_queues`` queues: 0, or ``E_INVAL`` (nothing
    written) when its size is not a power of two or ``nb_queues`` is not in 1 .. 65535."""
    if not _size_ok(reta.size) or nb_queues < 1 or nb_queues > 0xFFFF:
        return E_INVAL
    for i in range(reta.size):
        reta[i] = i % nb_queues
    return 0


@kernel
def reta_update(reta, masks, entries, nb_queues):
    """Set ``reta[i] = entries[i]`` for every ``i`` whose bit is set in ``masks`` (uint64, one
    per group of 64 entries).  All or nothing: ``E_INVAL`` when the sizes differ from the
    table's or a selected entry names a queue >= ``nb_queues``."""
    size = reta.size
    if (not _size_ok(size) or entries.size != size
            or masks.size != (size + RETA_GROUP_SIZE - 1) // RETA_GROUP_SIZE):
        return E_INVAL
    for i in range(size):
        if (masks[i // RETA_GROUP_SIZE] >> np.uint64(i % RETA_GROUP_SIZE)) & np.uint64(1):
            if np.int64(entries[i]) >= nb_queues:
                return E_INVAL
    for i in range(size):
        if (masks[i // RETA_GROUP_SIZE] >> np.uint64(i % RETA_GROUP_SIZE)) & np.uint64(1):
            reta[i] = entries[i]
    return 0


@kernel(inline="always")
def reta_queue(reta, hash):
    """The queue of ``hash``: ``reta[hash & (reta.size - 1)]`` (size a power of two)."""
    return np.int64(reta[np.int64(hash) & (reta.size - 1)])


@kernel
def rss_queue_bulk(dom, mbufs, n, reta, out):
    """``out[k]`` = the queue of mbuf ``mbufs[k]``'s hash (its ``hash`` field, 0 when the
    RSS flag is not set), for ``k < n``; NULL handles get -1.  Returns ``n`` or ``E_INVAL``."""
    if n < 0 or n > mbufs.size or n > out.size or not _size_ok(reta.size):
        return E_INVAL
    for k in range(n):
        h = mbufs[k]
        if h == NULL:
            out[k] = -1
            continue
        m = dom.mb[h]
        v = np.int64(m.hash) if (m.ol_flags & np.uint64(RX_RSS_HASH)) else np.int64(0)
        out[k] = reta_queue(reta, v)
    return n
