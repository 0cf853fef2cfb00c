"""Mapping a peer's region behind guard pages.

A server maps memory its client created.  The data path never addresses anything outside a
region (every descriptor is validated), and as a second line of defence each peer region is
mapped between two inaccessible pages: a stray access just past either end faults instead of
silently reading or corrupting whatever mapping happens to be adjacent.  The plumbing is
:mod:`pktbuf.shm`'s: a window of the region's size plus a page on each side, the region placed
one page in, with a guard page after it.
"""
from __future__ import annotations

from ...shm import PAGE, Region, Window, page_round

__all__ = ["PeerRegion"]


class PeerRegion(Region):
    """``size`` bytes of the peer's memfd ``fd`` (adopted: closed by :meth:`close`), mapped
    shared read/write with an inaccessible page on each side."""

    def __init__(self, fd: int, size: int, name: str = "peer"):
        window = Window(page_round(size) + 2 * PAGE) if int(size) > 0 else None
        super().__init__(size, name, fd=fd, window=window, offset=PAGE, guard=PAGE)

    def __repr__(self) -> str:
        return f"PeerRegion({self.name!r}, size={self.size})"
