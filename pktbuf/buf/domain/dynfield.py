"""The dynamic-field registry of a domain (``rte_mbuf_dynfield_register`` /
``rte_mbuf_dynflag_register``): which names own which bytes of the descriptor's spare area
and which bits of ``ol_flags``.  The rules are DPDK's; see :mod:`pktbuf.buf.mbuf.dynfield`, which
also holds the kernels that read and write the fields."""
from __future__ import annotations

import threading

import numpy as np

from ...errors import DynBusy, DynExists, DynNotFound, InvalidArgument, check_count
from ..mbuf.dynfield import DYN_END, DYN_START, FLAG_FIRST_FREE, FLAG_LAST_FREE

__all__ = ["DynRegistry"]


def _name(name, what: str) -> str:
    if not isinstance(name, str) or not name or len(name) >= 64:
        raise InvalidArgument(f"{what} name must be a string of 1..63 characters")
    return name


class DynRegistry:
    """Names of the dynamic fields and flags of one domain."""

    def __init__(self):
        self._lock = threading.Lock()
        self._fields: dict[str, tuple[int, int, int]] = {}   # name -> (offset, size, align)
        self._flags: dict[str, int] = {}                      # name -> bit
        self._used = np.zeros(DYN_END, bool)
        self._used[:DYN_START] = True

    def register_field(self, name: str, size: int, align: int = 1, *, offset: int | None = None,
                       flags: int = 0) -> int:
        """Claim ``size`` bytes aligned to ``align``; returns the byte offset in the mbuf."""
        name = _name(name, "dynfield")
        if check_count(flags, "flags") != 0:
            raise InvalidArgument("dynfield flags must be 0")
        size = check_count(size, "size", lo=1, hi=DYN_END - DYN_START)
        align = check_count(align, "align", lo=1, hi=DYN_END - DYN_START)
        if align & (align - 1):
            raise InvalidArgument("dynfield align must be a power of two")
        if offset is not None:
            offset = check_count(offset, "offset", lo=0, hi=DYN_END)
        with self._lock:
            old = self._fields.get(name)
            if old is not None:
                if old[1:] == (size, align) and (offset is None or offset == old[0]):
                    return old[0]
                raise DynExists(f"dynfield {name!r} exists with other parameters")
            if offset is not None:
                cands = [offset]
                if offset % align or offset < DYN_START or offset + size > DYN_END:
                    raise DynBusy(f"offset {offset} is not usable for size {size}, align {align}")
            else:
                first = (DYN_START + align - 1) // align * align
                cands = range(first, DYN_END - size + 1, align)
            for off in cands:
                if not self._used[off:off + size].any():
                    self._used[off:off + size] = True
                    self._fields[name] = (off, size, align)
                    return off
            raise DynBusy(f"no room for dynfield {name!r} (size {size}, align {align})")

    def lookup_field(self, name: str) -> int:
        with self._lock:
            if name not in self._fields:
                raise DynNotFound(f"no dynfield {name!r}")
            return self._fields[name][0]

    def register_flag(self, name: str, *, bitnum: int | None = None, flags: int = 0) -> int:
        """Claim a bit of ``ol_flags``; returns its number (use ``1 << bit``)."""
        name = _name(name, "dynflag")
        if check_count(flags, "flags") != 0:
            raise InvalidArgument("dynflag flags must be 0")
        if bitnum is not None:
            bitnum = check_count(bitnum, "bitnum", lo=0, hi=63)
        with self._lock:
            old = self._flags.get(name)
            if old is not None:
                if bitnum is None or bitnum == old:
                    return old
                raise DynExists(f"dynflag {name!r} exists with bit {old}")
            taken = set(self._flags.values())
            if bitnum is not None:
                if not FLAG_FIRST_FREE <= bitnum <= FLAG_LAST_FREE or bitnum in taken:
                    raise DynBusy(f"bit {bitnum} is not free")
                cands = [bitnum]
            else:
                cands = [b for b in range(FLAG_LAST_FREE, FLAG_FIRST_FREE - 1, -1) if b not in taken]
            if not cands:
                raise DynBusy("no free ol_flags bit left")
            self._flags[name] = cands[0]
            return cands[0]

    def lookup_flag(self, name: str) -> int:
        with self._lock:
            if name not in self._flags:
                raise DynNotFound(f"no dynflag {name!r}")
            return self._flags[name]
