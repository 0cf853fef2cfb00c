"""The memory this side owns and shares: the vrings and the Tx header slots, in one memfd.

Laid out as DPDK's virtio_user lays a split ring out (DPDK 22.11 ``virtio_ring.h``
``vring_init``, checked on this machine): per vring the descriptor table at a page boundary,
avail right after it, used at the next page boundary; then, for each vring, 16 bytes per
descriptor of header slots (a Tx chain's virtio-net header when it cannot go in the mbuf's
headroom).  A fresh region per connection: a back end that went away keeps no view of the
rings the next one uses.
"""
from __future__ import annotations

from ...shm import Region, page_round
from .layout import IND_MAX

__all__ = ["RingMemory"]


class RingMemory:
    """``nvrings`` split rings of ``num`` entries; ``ring(i)`` gives ``(desc, avail, used,
    hdrs)`` host addresses of vring ``i``; ``region`` the memfd :class:`~pktbuf.shm.Region`.
    ``indirect``: each vring also gets ``IND_MAX`` descriptors of indirect table per ring
    entry (``indirect(i)``), after its header slots."""

    def __init__(self, nvrings: int, num: int, indirect: bool = False):
        self.num = num
        self.step_used = page_round(16 * num + 6 + 2 * num)
        self.step_ind = self.step_used + page_round(6 + 8 * num) + page_round(16 * num)
        self.ind_size = page_round(16 * IND_MAX * num) if indirect else 0
        self.step = self.step_ind + self.ind_size
        self.region = Region(self.step * nvrings, "pktbuf-virtio-rings")

    def ring(self, i: int) -> tuple[int, int, int, int]:
        base = self.region.address + i * self.step
        desc = base
        avail = base + 16 * self.num
        used = base + self.step_used
        hdrs = used + page_round(6 + 8 * self.num)
        return desc, avail, used, hdrs

    def indirect(self, i: int) -> int:
        """Host address of vring ``i``'s indirect tables (``IND_MAX`` 16-byte entries per
        descriptor), 0 when the memory was laid out without them."""
        return self.region.address + i * self.step + self.step_ind if self.ind_size else 0

    def close(self) -> None:
        self.region.close()
