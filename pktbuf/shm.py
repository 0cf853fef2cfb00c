"""Shared memory: memfd regions, address windows, and mappings at fixed addresses.

Three pieces, from the bottom up:

* :class:`Mapping` -- one ``mmap`` made through libc, so it can be placed at a chosen address.
  NumPy views of it (:meth:`Mapping.view`) keep it alive: the memory is unmapped when the
  mapping has been released *and* the last view is gone, never under a live view (a stale
  view reads stale bytes; it never faults or sees another mapping's memory).
* :class:`Window` -- a reservation of address space (``PROT_NONE``, nothing committed) into
  which regions are placed at offsets chosen by a first-fit allocator.  A domain keeps its
  tables and every pool's data rooms in one window, so each address it stores (``buf_addr``,
  ``region_addr``) is the window's base plus an offset fixed at creation.
* :class:`Region` -- a ``memfd`` of a given size, mapped shared.  Its fd can be handed to
  another process (memif passes it over a Unix socket), which maps the same pages.

**Sharing a domain between processes** uses fixed addresses, as DPDK's multi-process model
does: descriptors hold virtual addresses, so a second process maps the same memfds at the same
addresses (:meth:`Window.attach`, ``MAP_FIXED_NOREPLACE``).  If any part of that range is taken
in the second process, attaching fails with :class:`~pktbuf.errors.AddressInUse` -- a clear
error, never a mapping at another address.  Windows are placed high in the address space and
are large, so that happens only when another mapping landed there first; see
``docs/architecture.md``.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import threading

import numpy as np

from .errors import AddressInUse, InvalidArgument

__all__ = ["PAGE", "Mapping", "Window", "Region", "page_round"]

PAGE = mmap.PAGESIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long)
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_FIXED = 0x10
_MAP_FIXED_NOREPLACE = 0x100000
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)
_PROT_NONE = 0
_RW = mmap.PROT_READ | mmap.PROT_WRITE
_ANON_NONE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE


def page_round(n: int) -> int:
    """``n`` rounded up to a whole number of pages."""
    return (int(n) + PAGE - 1) // PAGE * PAGE


def _mmap(addr, size, prot, flags, fd=-1, offset=0) -> int:
    p = _libc.mmap(addr, size, prot, flags, fd, offset)
    if p in (None, _MAP_FAILED):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return p


class Mapping:
    """``size`` bytes mapped at ``address``; unmapped (or handed back to its window) when
    released and no view of it remains."""

    __slots__ = ("address", "size", "_on_unmap", "__weakref__")

    def __init__(self, address: int, size: int, on_unmap=None):
        self.address = address
        self.size = size
        self._on_unmap = on_unmap

    def view(self, dtype=np.uint8, offset: int = 0, count: int | None = None) -> np.ndarray:
        """A NumPy array over ``[offset, offset + count * itemsize)``; it keeps the mapping
        alive for as long as it (or any view of it) exists."""
        dtype = np.dtype(dtype)
        if count is None:
            count = (self.size - offset) // dtype.itemsize
        nbytes = count * dtype.itemsize
        if offset < 0 or count < 0 or offset + nbytes > self.size:
            raise InvalidArgument(f"view [{offset}, {offset + nbytes}) outside a mapping of "
                                  f"{self.size} bytes")
        raw = (ctypes.c_uint8 * nbytes).from_address(self.address + offset)
        raw._owner = self        # the ctypes array, hence every NumPy view, holds the mapping
        return np.frombuffer(raw, dtype, count) if nbytes else np.empty(0, dtype)

    def __del__(self, _munmap=_libc.munmap):
        # (libc bound at definition: this may run while the interpreter tears modules down)
        if self._on_unmap is not None:
            self._on_unmap(self.address, self.size)
        else:
            _munmap(self.address, self.size)


class Window:
    """A reserved range of address space in which regions are placed at fixed offsets.

    ``Window(size)`` reserves ``size`` bytes anywhere; ``Window.attach(address, size)``
    reserves exactly ``[address, address + size)`` in this process or raises
    :class:`~pktbuf.errors.AddressInUse`.  Nothing is committed until a region is placed.
    """

    def __init__(self, size: int, *, address: int | None = None):
        size = page_round(size)
        if size <= 0:
            raise InvalidArgument("window size must be positive")
        if address is None:
            base = _mmap(None, size, _PROT_NONE, _ANON_NONE)
        else:
            try:
                base = _mmap(address, size, _PROT_NONE, _ANON_NONE | _MAP_FIXED_NOREPLACE)
            except OSError as e:
                raise AddressInUse(
                    f"cannot map [{address:#x}, {address + size:#x}) here: part of it is in use "
                    f"in this process ({e.strerror}); a shared domain must be mapped at the "
                    f"same address in every process") from None
            if base != address:     # kernels before 4.17 ignore MAP_FIXED_NOREPLACE
                _libc.munmap(base, size)
                raise AddressInUse(f"the kernel placed the window at {base:#x}, not "
                                   f"{address:#x} (MAP_FIXED_NOREPLACE unsupported?)")
        self.base = base
        self.size = size
        self._lock = threading.RLock()     # a mapping's finalizer may run inside reserve()
        self._free = [(0, size)]        # sorted (offset, length) of unused space

    @classmethod
    def attach(cls, address: int, size: int) -> "Window":
        return cls(size, address=address)

    # -- placement -------------------------------------------------------------------------
    def reserve(self, size: int, *, offset: int | None = None) -> int:
        """Claim ``size`` bytes (page-rounded) of the window, at ``offset`` if given (it must be
        unused), else first fit.  Returns the offset."""
        size = page_round(size)
        with self._lock:
            for i, (s, ln) in enumerate(self._free):
                start = s if offset is None else offset
                if start < s or start + size > s + ln:
                    continue
                rest = []
                if start > s:
                    rest.append((s, start - s))
                if s + ln > start + size:
                    rest.append((start + size, s + ln - start - size))
                self._free[i:i + 1] = rest
                return start
        where = "" if offset is None else f" at offset {offset:#x}"
        raise InvalidArgument(f"no room for {size} bytes{where} in a window of {self.size} bytes")

    def _unreserve(self, offset: int, size: int) -> None:
        with self._lock:
            self._free.append((offset, size))
            self._free.sort()
            merged = []
            for s, ln in self._free:
                if merged and merged[-1][0] + merged[-1][1] == s:
                    merged[-1] = (merged[-1][0], merged[-1][1] + ln)
                else:
                    merged.append((s, ln))
            self._free = merged

    def map(self, fd: int, size: int, *, offset: int | None = None, guard: int = 0) -> Mapping:
        """Map ``size`` bytes of ``fd`` shared read/write into the window (at ``offset`` if
        given), followed by ``guard`` bytes (page-rounded) left inaccessible, so that running
        off the end faults instead of landing in the next mapping.  When the mapping goes,
        its range and its guard turn back into reserved address space."""
        size = page_round(size)
        guard = page_round(guard) if guard > 0 else 0
        off = self.reserve(size + guard, offset=offset)
        try:
            _mmap(self.base + off, size, _RW, mmap.MAP_SHARED | _MAP_FIXED, fd, 0)
        except OSError:
            self._unreserve(off, size + guard)
            raise
        if guard:
            def release(address, size, _release=self._release, _guard=guard):
                _release(address, size + _guard)
            return Mapping(self.base + off, size, release)
        return Mapping(self.base + off, size, self._release)

    def map_anonymous(self, size: int, *, offset: int | None = None) -> Mapping:
        """Private zero-filled memory (committed on first touch) placed in the window."""
        size = page_round(size)
        off = self.reserve(size, offset=offset)
        try:
            _mmap(self.base + off, size, _RW, _ANON_NONE | _MAP_FIXED)
        except OSError:
            self._unreserve(off, size)
            raise
        return Mapping(self.base + off, size, self._release)

    def _release(self, address: int, size: int, _libc_mmap=_libc.mmap, _prot=_PROT_NONE,
                 _flags=_ANON_NONE | _MAP_FIXED) -> None:
        # back to PROT_NONE (not munmap: the range must stay ours), then free for reuse; the
        # constants bound at definition, as a Mapping's __del__ may call this at shutdown
        if _libc_mmap(address, size, _prot, _flags, -1, 0) != address:
            return      # pragma: no cover - cannot fail for a range we own
        self._unreserve(address - self.base, size)

    def __del__(self, _munmap=_libc.munmap):
        if getattr(self, "base", None) is not None:
            _munmap(self.base, self.size)
            self.base = None

    def __repr__(self) -> str:
        return f"Window({self.base:#x}, size={self.size:#x})"


class Region:
    """A shared, file-backed memory region (``memfd_create`` + ``mmap(MAP_SHARED)``).

    ``fd`` can be passed to another process, which maps the same pages.  ``address`` is the
    virtual address of the first byte in this process; ``array`` is a ``uint8`` view of it.
    With ``window=`` the region is placed inside that :class:`Window` (at ``offset`` if given),
    which is how a domain gives every pool's data a fixed place; ``guard`` bytes after it stay
    inaccessible (a write past the region's last page faults).  ``fd=`` maps an existing
    memfd instead of creating one (the fd is adopted: closed by :meth:`close`).
    """

    def __init__(self, size: int, name: str = "pktbuf", *, fd: int | None = None,
                 seal: bool = True, window: Window | None = None, offset: int | None = None,
                 guard: int = 0):
        if int(size) <= 0:
            raise InvalidArgument(f"region size must be positive, got {size}")
        self.size = int(size)
        self.name = name
        created = fd is None
        if created:
            flags = os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if seal else 0)
            fd = os.memfd_create(name, flags)
            try:
                os.ftruncate(fd, self.size)
                if seal:  # the peer may rely on the size: forbid shrinking, as DPDK does
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
            except BaseException:
                os.close(fd)
                raise
        try:
            if window is not None:
                self._map = window.map(fd, self.size, offset=offset, guard=guard)
            else:
                span = page_round(self.size)
                self._map = Mapping(_mmap(None, span, _RW, mmap.MAP_SHARED, fd, 0), span)
        except BaseException:
            if created:
                os.close(fd)
            raise
        self.fd = fd
        self.address = self._map.address
        self.array = self._map.view(np.uint8, 0, self.size)

    @classmethod
    def attach(cls, fd: int, size: int, name: str = "peer", **kw) -> "Region":
        """Map an existing region received from elsewhere; the fd is adopted."""
        return cls(size, name, fd=fd, **kw)

    def view(self, dtype=np.uint8, offset: int = 0, count: int | None = None) -> np.ndarray:
        if count is None:
            count = (self.size - offset) // np.dtype(dtype).itemsize
        return self._map.view(dtype, offset, count)

    def close(self) -> None:
        """Release the mapping and close the fd.  The memory stays mapped while views of it
        exist (they keep reading the old bytes); kernels must no longer use the addresses."""
        if self._map is None:
            return
        self.array = None
        self._map = None
        if self.fd is not None:
            os.close(self.fd)
        self.fd = None

    @property
    def closed(self) -> bool:
        return self._map is None

    def __repr__(self) -> str:
        return f"Region({self.name!r}, size={self.size}, fd={self.fd})"
