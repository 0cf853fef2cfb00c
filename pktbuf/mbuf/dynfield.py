"""Dynamic mbuf fields and flags (``rte_mbuf_dynfield_register`` / ``rte_mbuf_dynflag_register``).

Applications claim named pieces of the descriptor's spare area -- ``dynfield1``, bytes 92..127
of every mbuf -- and named bits of ``ol_flags`` at run time, so that independent libraries can
attach metadata to packets without a fixed layout.  Rules, as in DPDK:

* registering the same name again with the same parameters returns the same offset (bit);
  with different parameters it fails (``EEXIST``);
* ``size`` must fit the area, ``align`` must be a power of two, ``flags`` must be 0;
* an explicit ``offset`` (``bitnum``) must be free;
* flag bits come from the range DPDK leaves free, bits 23..40
  (``RTE_MBUF_F_FIRST_FREE`` .. ``RTE_MBUF_F_LAST_FREE``).

The registry belongs to a :class:`~pktbuf.api.domain.Domain` (``domain.dyn``).  Read and write
fields in kernels with :func:`mbuf_dynfield_read` / :func:`mbuf_dynfield_write`.
"""
from __future__ import annotations

import threading

import numpy as np

from .._jit import kernel
from ..errors import DynBusy, DynExists, DynNotFound, InvalidArgument, check_count
from ..rawmem import load_u8, store_u8
from .layout import MBUF_DTYPE

DYN_START = MBUF_DTYPE.fields["dynfield1"][1]     # 92
DYN_END = MBUF_DTYPE.itemsize                     # 128
FLAG_FIRST_FREE = 23
FLAG_LAST_FREE = 40


__all__ = ["DynRegistry", "DynExists", "DynBusy", "DynNotFound", "DYN_START", "DYN_END", "FLAG_FIRST_FREE",
           "FLAG_LAST_FREE", "mbuf_dynfield_read", "mbuf_dynfield_write"]


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


@kernel
def mbuf_dynfield_read(dom, h, offset, nbytes):
    """The little-endian unsigned value of ``nbytes`` (1..8) at byte ``offset`` of mbuf ``h``."""
    base = np.uint64(dom.mb.ctypes.data) + np.uint64(h) * np.uint64(128) + np.uint64(offset)
    v = np.uint64(0)
    for i in range(nbytes):
        v |= np.uint64(load_u8(base + np.uint64(i))) << np.uint64(8 * i)
    return v


@kernel
def mbuf_dynfield_write(dom, h, offset, nbytes, value):
    """Store the low ``nbytes`` (1..8) of ``value`` at byte ``offset`` of mbuf ``h``."""
    base = np.uint64(dom.mb.ctypes.data) + np.uint64(h) * np.uint64(128) + np.uint64(offset)
    v = np.uint64(value)
    for i in range(nbytes):
        store_u8(base + np.uint64(i), (v >> np.uint64(8 * i)) & np.uint64(0xFF))
