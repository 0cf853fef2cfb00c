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

__all__ = ["RingMemory"]


class RingMemory:
    """``nvrings`` split rings of ``num`` entries; ``ring(i)`` gives ``(desc, avail, used,
    hdrs)`` host addresses of vring ``i``; ``region`` the memfd :class:`~pktbuf.shm.Region`."""

    def __init__(self, nvrings: int, num: int):
        self.num = num
        self.step_used = page_round(16 * num + 6 + 2 * num)
        self.step = self.step_used + page_round(6 + 8 * num) + page_round(16 * num)
        self.region = Region(self.step * nvrings, "pktbuf-virtio-rings")

    def ring(self, i: int) -> tuple[int, int, int, int]:
        base = self.region.address + i * self.step
        desc = base
        avail = base + 16 * self.num
        used = base + self.step_used
        hdrs = used + page_round(6 + 8 * self.num)
        return desc, avail, used, hdrs

    def close(self) -> None:
        self.region.close()
