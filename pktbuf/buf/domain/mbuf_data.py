"""The packet-data operations of :class:`~pktbuf.buf.domain.mbuf.Mbuf`: head- and tailroom, views of
the data, buffer and private area, ``read``, the length changes (``append``, ``prepend``,
``adj``, ``trim``) and segment chains (``chain``, ``linearize``).

They live in :class:`MbufData`, a mixin that :class:`~pktbuf.buf.domain.mbuf.Mbuf` inherits; it holds
no state and relies on Mbuf's checks (``_valid``, ``_m``, ``_st``, ``_seg_handles``,
``_other``, ``_app_refs``).  Use :class:`~pktbuf.buf.domain.mbuf.Mbuf`.
"""
from __future__ import annotations

import numpy as np

from ...errors import (E_FAULT, E_NOSPC, E_OVERFLOW, E_RANGE, ChainTooLong, InvalidArgument,
                       NoRoom, OutOfRange, SanityCheckError, check_count, raise_for)
from ...lcore import check_lcore
from ..mbuf import data as D
from ..mbuf.layout import F_INDIRECT, NULL

__all__ = ["MbufData"]


class MbufData:
    """Data views, reads, length changes and chains of an :class:`~pktbuf.buf.domain.mbuf.Mbuf` (a
    mixin: no state of its own)."""

    __slots__ = ()

    # -- data views ------------------------------------------------------------------------
    @property
    def headroom(self) -> int:
        self._valid()
        return int(D.pktmbuf_headroom(self._st, self.handle))

    @property
    def tailroom(self) -> int:
        self._valid()
        return int(D.pktmbuf_tailroom(self._st, self.handle))

    def _region_view(self, addr: int, n: int, h: int | None = None) -> np.ndarray:
        h = self.handle if h is None else h
        m = self.domain.state.mb[h]
        owner = int(m["direct"]) if int(m["ol_flags"]) & F_INDIRECT else h
        reg = self.domain.pool_of(owner).region
        off = addr - reg.address
        if off < 0 or off + n > reg.size:  # pragma: no cover - guarded by the sanity rules
            raise SanityCheckError(f"mbuf {h}: data outside its region")
        return reg.array[off:off + n]

    def mtod(self, off: int = 0) -> int:
        """``rte_pktmbuf_mtod_offset``: the address of data byte ``off`` of this segment."""
        self._valid()
        off = check_count(off, "off", lo=0, hi=0xFFFF)
        return int(D.pktmbuf_mtod(self._st, self.handle)) + off

    @property
    def data(self) -> np.ndarray:
        """This segment's data bytes (``data_len``), writeable."""
        self._valid()
        m = self._m()
        return self._region_view(int(m["buf_addr"]) + int(m["data_off"]), int(m["data_len"]))

    @property
    def buffer(self) -> np.ndarray:
        """This segment's whole buffer (``buf_len`` bytes)."""
        self._valid()
        m = self._m()
        return self._region_view(int(m["buf_addr"]), int(m["buf_len"]))

    @property
    def priv(self) -> np.ndarray:
        """The private area in front of the buffer (``priv_size`` bytes)."""
        self._valid()
        m = self._m()
        ps = int(m["priv_size"])
        return self._region_view(int(m["buf_addr"]) - ps, ps)

    def tobytes(self) -> bytes:
        """The whole packet's data, across segments."""
        return b"".join(bytes(s.data) for s in self.segments())

    def read(self, off: int, length: int, *, out: np.ndarray | None = None) -> np.ndarray:
        """``rte_pktmbuf_read``: ``length`` bytes from ``off``.

        Without ``out``: a view into the packet if the bytes lie in one segment, else a copy.
        With ``out`` (a writeable contiguous uint8 array of at least ``length``): the bytes
        are always in ``out[:length]``, which is returned.  ``OutOfRange`` if
        ``off + length > pkt_len`` -- checked before anything is allocated.
        """
        self._valid()
        off = check_count(off, "off", lo=0)
        length = check_count(length, "length", lo=0)
        if out is not None and not (isinstance(out, np.ndarray) and out.dtype == np.uint8
                                    and out.ndim == 1 and out.flags.c_contiguous
                                    and out.flags.writeable):
            raise InvalidArgument("out must be a writeable contiguous 1-d uint8 array")
        pkt_len = int(self._m()["pkt_len"])
        if off + length > pkt_len:
            raise OutOfRange(f"read of {length} bytes at {off} is beyond pkt_len {pkt_len}", E_RANGE)
        if out is not None and out.size < length:
            raise InvalidArgument(f"out has {out.size} bytes, fewer than length ({length})")
        buf = out if out is not None else np.empty(max(length, 1), np.uint8)
        addr = int(D.pktmbuf_read(self._st, self.handle, off, length, buf))
        if addr == E_FAULT:
            raise SanityCheckError(f"mbuf {self.handle}: its segments hold fewer bytes than "
                                   f"pkt_len", addr)
        if addr < 0:   # pragma: no cover - the range was checked above
            raise OutOfRange(f"read of {length} bytes at {off} is beyond pkt_len", addr)
        if addr == buf.ctypes.data:
            return buf[:length]
        view = None
        if length == 0:
            view = np.empty(0, np.uint8)
        else:   # inside one segment: find it to build the view
            mb = self.domain.state.mb
            for h in self._seg_handles():
                m = mb[h]
                a = int(m["buf_addr"]) + int(m["data_off"])
                if a <= addr and addr + length <= a + int(m["data_len"]):
                    view = self._region_view(addr, length, h)
                    break
            if view is None:  # pragma: no cover - the kernel returned a segment address
                raise SanityCheckError(f"mbuf {self.handle}: read returned a foreign address")
        if out is not None:
            out[:length] = view
            return out[:length]
        return view

    # -- length changes --------------------------------------------------------------------
    def append(self, length: int) -> np.ndarray:
        """Grow the tail by ``length`` bytes; returns a view of them (``NoRoom`` if no tailroom)."""
        self._valid()
        length = check_count(length, "length", lo=0)
        if length > 0xFFFF:
            raise NoRoom(f"append of {length} bytes exceeds the tailroom", E_NOSPC)
        addr = int(D.pktmbuf_append(self._st, self.handle, length))
        if addr == E_NOSPC:
            raise NoRoom(f"append of {length} bytes exceeds the tailroom", addr)
        raise_for(addr)
        last = int(D.pktmbuf_lastseg(self._st, self.handle))
        return self._region_view(addr, length, last)

    def append_bytes(self, payload) -> "Mbuf":
        """Append and copy ``payload`` (bytes-like) in; returns ``self``."""
        try:
            b = np.frombuffer(memoryview(payload).cast("B"), np.uint8)
        except (TypeError, ValueError) as e:
            raise InvalidArgument(f"payload must be a bytes-like object ({e})") from None
        self.append(b.size)[:] = b
        return self

    def prepend(self, length: int) -> np.ndarray:
        """Grow the front by ``length`` bytes; returns a view of them (``NoRoom`` if no headroom)."""
        self._valid()
        length = check_count(length, "length", lo=0)
        if length > 0xFFFF:
            raise NoRoom(f"prepend of {length} bytes exceeds the headroom", E_NOSPC)
        addr = int(D.pktmbuf_prepend(self._st, self.handle, length))
        if addr == E_NOSPC:
            raise NoRoom(f"prepend of {length} bytes exceeds the headroom", addr)
        raise_for(addr)
        return self._region_view(addr, length)

    def adj(self, length: int) -> None:
        """Remove ``length`` bytes from the front (``OutOfRange`` beyond the first segment)."""
        self._valid()
        length = check_count(length, "length", lo=0)
        if length > 0xFFFF:
            raise OutOfRange(f"adj of {length} bytes exceeds data_len", E_RANGE)
        rc = int(D.pktmbuf_adj(self._st, self.handle, length))
        if rc == E_RANGE:
            raise OutOfRange(f"adj of {length} bytes exceeds data_len", rc)

    def trim(self, length: int) -> None:
        """Remove ``length`` bytes from the end (``OutOfRange`` beyond the last segment)."""
        self._valid()
        length = check_count(length, "length", lo=0)
        if length > 0xFFFF:
            raise OutOfRange(f"trim of {length} bytes exceeds the last segment's data_len", E_RANGE)
        rc = int(D.pktmbuf_trim(self._st, self.handle, length))
        if rc == E_RANGE:
            raise OutOfRange(f"trim of {length} bytes exceeds the last segment's data_len", rc)

    # -- chains ----------------------------------------------------------------------------
    def chain(self, tail) -> "Mbuf":
        """Append packet ``tail`` (``ChainTooLong`` past 65535 segments); returns ``self``.

        The chain takes over one of the application's references to ``tail``.  Refused
        (``InvalidArgument``, nothing changed): chaining a packet to itself or to a packet it
        is part of, and chaining onto a packet whose first or last segment is shared (held more
        than once by the application): the other holders would free the new segments too.
        """
        self._valid()
        t = self._other(tail, "tail")
        mine = self._seg_handles()
        if t.handle in mine or self.handle in t._seg_handles():
            raise InvalidArgument("cannot chain a packet to itself")
        if self._app_refs(self.handle) != 1 or self._app_refs(mine[-1]) != 1:
            raise InvalidArgument("cannot chain onto a shared packet (its first or last segment "
                                  "is referenced more than once)")
        rc = int(D.pktmbuf_chain(self._st, self.handle, t.handle))
        if rc == E_OVERFLOW:
            raise ChainTooLong("chain would exceed 65535 segments", rc)
        raise_for(rc)
        return self

    def linearize(self, *, lcore: int | None = None) -> None:
        """Copy every segment into the first (``NoRoom`` if it does not fit).  The packet must
        not be shared (``InvalidArgument``): the segments it frees belong to every holder."""
        self._valid()
        lc = check_lcore(lcore)
        if int(self._m()["next"]) == NULL:
            return
        if self._app_refs(self.handle) != 1:
            raise InvalidArgument("cannot linearize a shared packet (refcnt > 1)")
        rc = int(D.pktmbuf_linearize(self._st, lc, self.handle))
        if rc == E_NOSPC:
            raise NoRoom("the first segment's tailroom cannot hold the packet", rc)
        if rc == E_FAULT:
            raise SanityCheckError(f"mbuf {self.handle}: the segment chain loops", rc)
        raise_for(rc)
