"""Validation of what the peer writes into shared memory: ring indices and descriptors.

The peer is untrusted (DPDK itself checks none of this).  Every value a kernel takes from the
ring -- the peer's index, a descriptor's region, offset and length -- passes through one of
these checks, and is read exactly once: the checked copy lives in the queue's private scratch
arrays, so the peer cannot change it between the check and the use.  A failure takes the queue
down (:func:`pktbuf.drivers.memif.queue.queue_fail`) with one of the ``V_*`` codes; the facade then
disconnects with the matching reason string (:data:`REASONS`).

All arithmetic is in 64 bits, so ``offset + length`` cannot wrap.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .queue import Q_NREGIONS

V_RING_INDEX = 1
V_DESC_REGION = 2
V_DESC_BOUNDS = 3
V_DESC_LENGTH = 4
V_CHAIN = 5
V_NO_PATH = 6       # not the peer's doing: the queue's burst path has no address (.variants)

REASONS = {
    V_RING_INDEX: "Ring index out of range",
    V_DESC_REGION: "Descriptor region invalid",
    V_DESC_BOUNDS: "Descriptor buffer outside its region",
    V_DESC_LENGTH: "Descriptor length exceeds buffer size",
    V_CHAIN: "Descriptor chain longer than the ring",
    V_NO_PATH: "Burst path not loaded in this process",
}

IDX_MASK = 0xFFFF


@kernel(inline="always")
def ring_distance(a, b):
    """``(a - b) mod 2**16``: the distance between two free-running u16 ring indices."""
    return (np.int64(a) - np.int64(b)) & IDX_MASK


@kernel(inline="always")
def desc_address(q, region, offset, length):
    """Address of a descriptor's buffer in this process, or a negative ``-V_*`` code.

    Checks: region index below the number of regions mapped, and ``offset + length`` inside
    that region.
    """
    if region >= q.cfg[Q_NREGIONS]:
        return np.int64(-V_DESC_REGION)
    size = np.int64(q.regions[region, 1])
    end = np.int64(offset) + np.int64(length)
    if end > size:
        return np.int64(-V_DESC_BOUNDS)
    return np.int64(q.regions[region, 0]) + np.int64(offset)


def reason(code: int) -> str:
    return REASONS.get(int(code), f"Invalid descriptor ({int(code)})")
