"""Mapping a peer's region behind guard pages.

A server maps memory its client created.  The data path never addresses anything outside a
region (every descriptor is validated), and as a second line of defence each peer region is
mapped between two inaccessible pages: a stray access just past either end faults instead of
silently reading or corrupting whatever mapping happens to be adjacent.
"""
from __future__ import annotations

import ctypes
import mmap
import os

import numpy as np

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long)
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_FIXED = 0x10
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)


class PeerRegion:
    """``size`` bytes of ``fd`` mapped shared read/write, with a guard page on each side.

    Same interface as :class:`pktbuf.rawmem.Region` where the memif code uses it: ``address``,
    ``size``, ``array`` (a uint8 view), ``fd`` (adopted: closed by :meth:`close`).
    """

    def __init__(self, fd: int, size: int, name: str = "peer"):
        if size <= 0:
            raise ValueError("region size must be positive")
        self.name = name
        self.size = int(size)
        span = (self.size + PAGE - 1) // PAGE * PAGE
        self._total = span + 2 * PAGE
        base = _libc.mmap(None, self._total, 0,  # PROT_NONE
                          mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
        if base in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), "cannot reserve address space for a peer region")
        addr = _libc.mmap(base + PAGE, self.size, mmap.PROT_READ | mmap.PROT_WRITE,
                          mmap.MAP_SHARED | _MAP_FIXED, fd, 0)
        if addr in (None, _MAP_FAILED) or addr != base + PAGE:
            err = ctypes.get_errno()
            _libc.munmap(base, self._total)
            raise OSError(err, os.strerror(err) if err else "mmap failed")
        self._base = base
        self.address = addr
        self.fd = fd
        self.array = np.ctypeslib.as_array((ctypes.c_uint8 * self.size).from_address(addr))

    @property
    def closed(self) -> bool:
        return self._base is None

    def close(self) -> None:
        """Unmap and close the fd.  No view of ``array`` may be used afterwards."""
        if self._base is None:
            return
        self.array = None
        _libc.munmap(self._base, self._total)
        self._base = None
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None

    def __repr__(self) -> str:
        return f"PeerRegion({self.name!r}, size={self.size})"
