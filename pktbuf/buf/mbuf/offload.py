"""The ``tx_offload`` word (``rte_mbuf_tx_offload``).

Field widths and order, from bit 0, as in ``struct rte_mbuf``: l2_len 7, l3_len 9, l4_len 8,
tso_segsz 16, outer_l3_len 9, outer_l2_len 7 (8 bits unused).  Values are masked to their
widths, as C bit fields are.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel

TX_OFFLOAD_FIELDS = (("l2_len", 0, 7), ("l3_len", 7, 9), ("l4_len", 16, 8),
                     ("tso_segsz", 24, 16), ("outer_l3_len", 40, 9), ("outer_l2_len", 49, 7))


@kernel
def mbuf_tx_offload(l2_len, l3_len, l4_len, tso_segsz, outer_l3_len, outer_l2_len):
    """``rte_mbuf_tx_offload``: pack the six lengths into one 64-bit word."""
    return ((np.uint64(l2_len) & np.uint64(0x7F))
            | ((np.uint64(l3_len) & np.uint64(0x1FF)) << np.uint64(7))
            | ((np.uint64(l4_len) & np.uint64(0xFF)) << np.uint64(16))
            | ((np.uint64(tso_segsz) & np.uint64(0xFFFF)) << np.uint64(24))
            | ((np.uint64(outer_l3_len) & np.uint64(0x1FF)) << np.uint64(40))
            | ((np.uint64(outer_l2_len) & np.uint64(0x7F)) << np.uint64(49)))


def tx_offload_unpack(v) -> dict:
    """The six lengths of a ``tx_offload`` word, as a dict."""
    v = int(v)
    return {name: (v >> shift) & ((1 << width) - 1) for name, shift, width in TX_OFFLOAD_FIELDS}
