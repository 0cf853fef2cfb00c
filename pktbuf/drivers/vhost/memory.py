"""The front end's memory: SET_MEM_TABLE's regions checked and mapped between guard pages.

QEMU vhost-user "Memory access" and DPDK 22.11 ``vhost_user_set_mem_table``: a region is
``(guest_phys_addr, memory_size, userspace_addr, mmap_offset)`` with one fd; its bytes start
``mmap_offset`` bytes into the file.  The fd is mapped from offset 0 for ``mmap_offset + size``
bytes (as DPDK maps it), inside a reserved window, one inaccessible page before and one after,
so that a stray access just outside the region faults instead of reaching a neighbouring
mapping.  Everything the front end says is checked first (:func:`check_regions`): counts,
sizes, overflow, overlaps, the kind of file and its length -- mapping past the end of a file
would fault (SIGBUS) on first access.
"""
from __future__ import annotations

import fcntl
import os
import stat

from ...shm import PAGE, Region, Window, page_round
from .proto import MAX_REGIONS, VhostViolation

__all__ = ["check_regions", "MappedRegion", "map_regions"]

_U64 = 1 << 64
_F_GET_SEALS = getattr(fcntl, "F_GET_SEALS", 1034)
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
_F_SEAL_SHRINK = getattr(fcntl, "F_SEAL_SHRINK", 0x0002)
MAX_MAP = 1 << 40                        # one region at most 1 TiB of address space


def _overlap(spans) -> tuple | None:
    s = sorted(spans)
    for (a0, a1), (b0, b1) in zip(s, s[1:]):
        if b0 < a1:
            return (a0, a1), (b0, b1)
    return None


def check_regions(regions, fds) -> None:
    """Raise :class:`~pktbuf.drivers.vhost.proto.VhostViolation` unless the table can be
    mapped safely: 1..8 regions, one fd each, sizes > 0, nothing past 2**64, no overlaps in
    either address space, each fd a regular file at least ``mmap_offset + size`` long."""
    if not 1 <= len(regions) <= MAX_REGIONS:
        raise VhostViolation(f"SET_MEM_TABLE: {len(regions)} regions")
    if len(fds) != len(regions):
        raise VhostViolation(f"SET_MEM_TABLE: {len(fds)} fds for {len(regions)} regions")
    for i, (gpa, size, uva, off) in enumerate(regions):
        what = f"SET_MEM_TABLE region {i}"
        if size == 0:
            raise VhostViolation(f"{what}: size 0")
        if gpa + size > _U64 or uva + size > _U64 or off + size > _U64:
            raise VhostViolation(f"{what}: address + size past 2**64")
        if off + size > MAX_MAP:
            raise VhostViolation(f"{what}: offset {off:#x} + size {size:#x} too large")
        try:
            st = os.fstat(fds[i])
        except OSError as e:
            raise VhostViolation(f"{what}: fd unusable ({e.strerror})") from None
        if not stat.S_ISREG(st.st_mode):
            raise VhostViolation(f"{what}: fd is not a regular file (memfd)")
        if st.st_size < off + size:
            raise VhostViolation(f"{what}: file of {st.st_size} bytes, region needs "
                                 f"{off + size}")
    for space, k in (("guest-physical", 0), ("user-space", 2)):
        o = _overlap([(r[k], r[k] + r[1]) for r in regions])
        if o is not None:
            raise VhostViolation(f"SET_MEM_TABLE: regions overlap in {space} space: "
                                 f"[{o[0][0]:#x}, {o[0][1]:#x}) and [{o[1][0]:#x}, {o[1][1]:#x})")


def seal_shrink(fd: int) -> bool:
    """Forbid shrinking the file if it allows seals; True if it cannot shrink now."""
    try:
        if fcntl.fcntl(fd, _F_GET_SEALS) & _F_SEAL_SHRINK:
            return True
        fcntl.fcntl(fd, _F_ADD_SEALS, _F_SEAL_SHRINK)
        return True
    except OSError:
        return False


class MappedRegion:
    """One region of the table, mapped: ``gpa``, ``size``, ``uva``, ``host`` (the address of
    its first byte here), ``sealed`` (the file cannot shrink)."""

    def __init__(self, gpa: int, size: int, uva: int, off: int, fd: int):
        span = off + size
        self.gpa, self.size, self.uva, self.offset = gpa, size, uva, off
        self.sealed = seal_shrink(fd)
        # the fd is adopted by the Region (closed with it)
        self._region = Region(span, "vhost_peer", fd=fd,
                              window=Window(page_round(span) + 2 * PAGE), offset=PAGE, guard=PAGE)
        self.host = self._region.address + off

    def close(self) -> None:
        self._region.close()


def map_regions(regions, fds) -> list[MappedRegion]:
    """Check and map a table; on any failure every fd is closed and nothing stays mapped."""
    out: list[MappedRegion] = []
    try:
        check_regions(regions, fds)
        for (gpa, size, uva, off), fd in zip(regions, fds):
            out.append(MappedRegion(gpa, size, uva, off, fd))
    except BaseException as e:
        for m in out:
            m.close()
        for fd in fds[len(out):]:
            try:
                os.close(fd)
            except OSError:
                pass
        if isinstance(e, OSError):
            raise VhostViolation(f"SET_MEM_TABLE: mmap failed ({e.strerror})") from None
        raise
    return out
