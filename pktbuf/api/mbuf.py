"""The :class:`Mbuf` facade: one packet (or segment) handle with Pythonic operations."""
from __future__ import annotations

import numpy as np

from ..errors import (E_ALREADY, E_BADF, E_NOSPC, E_OVERFLOW, E_RANGE, ChainTooLong, DoubleFree,
                      InvalidArgument, InvalidHandle, NoRoom, OutOfRange, PoolExhausted,
                      RefcntError, SanityCheckError, check_count, raise_for)
from ..lcore import facade_lcore
from ..mbuf import data as D
from ..mbuf import indirect as I
from ..mbuf.check import CHECK_REASONS, mbuf_raw_check
from ..mbuf.dynfield import DYN_END, DYN_START, mbuf_dynfield_read, mbuf_dynfield_write
from ..mbuf.layout import F_INDIRECT, NULL, REFCNT_MAX
from ..mbuf.offload import tx_offload_unpack
from . import _entry as E

__all__ = ["Mbuf"]

_SIMPLE_FIELDS = ("pkt_len", "data_len", "nb_segs", "data_off", "buf_len", "port", "ol_flags",
                  "packet_type", "vlan_tci", "vlan_tci_outer", "hash", "hash_hi", "tx_offload",
                  "priv_size", "timesync", "buf_iova")


def _check_dyn(offset: int, nbytes: int) -> None:
    if not (1 <= nbytes <= 8 and DYN_START <= offset and offset + nbytes <= DYN_END):
        raise InvalidArgument(f"dynfield bytes [{offset}, {offset + nbytes}) are outside "
                              f"[{DYN_START}, {DYN_END})")


class Mbuf:
    """A handle to an allocated mbuf of a :class:`~pktbuf.api.domain.Domain`.

    The object is a thin view: two ``Mbuf`` with the same handle are the same mbuf, and after
    :meth:`free` the handle must not be used.  Every method checks that the handle is an
    allocated mbuf first (``InvalidHandle``/``DoubleFree`` otherwise).  Data views are NumPy
    arrays into the pool's shared region; writing to them writes the packet.
    """

    __slots__ = ("domain", "handle")

    def __init__(self, domain, handle: int):
        self.domain = domain
        self.handle = int(handle)
        self._valid()

    # -- validation ------------------------------------------------------------------------
    def _valid(self) -> None:
        rc = E.fast_mbuf_status(*self.domain._args, self.handle)
        if rc == E_BADF:
            raise InvalidHandle(f"{self.handle} is not an mbuf of a live pool of this domain")
        if rc == E_ALREADY:
            raise DoubleFree(f"mbuf {self.handle} is free (in its pool)")

    @property
    def _st(self):
        return self.domain.state

    def _m(self):
        return self.domain.state.mb[self.handle]

    def _other(self, m) -> "Mbuf":
        if not isinstance(m, Mbuf):
            m = Mbuf(self.domain, m)
        elif m.domain is not self.domain:
            raise InvalidHandle("mbufs belong to different domains")
        m._valid()
        return m

    # -- fields ----------------------------------------------------------------------------
    def __getattr__(self, name):
        if name in _SIMPLE_FIELDS:
            self._valid()
            return int(self._m()[name])
        raise AttributeError(name)

    @property
    def refcnt(self) -> int:
        self._valid()
        return int(I.mbuf_refcnt_read(self._st, self.handle))

    @property
    def next(self):
        """The next segment, or None."""
        self._valid()
        n = int(self._m()["next"])
        return None if n == NULL else Mbuf(self.domain, n)

    @property
    def pool(self):
        return self.domain.pool_of(self.handle)

    @property
    def is_indirect(self) -> bool:
        return bool(int(self._m()["ol_flags"]) & F_INDIRECT)

    @property
    def is_contiguous(self) -> bool:
        return self.nb_segs == 1

    @property
    def headroom(self) -> int:
        self._valid()
        return int(D.pktmbuf_headroom(self._st, self.handle))

    @property
    def tailroom(self) -> int:
        self._valid()
        return int(D.pktmbuf_tailroom(self._st, self.handle))

    def set(self, **fields) -> "Mbuf":
        """Set header fields, e.g. ``m.set(port=1, packet_type=0x11)``; returns ``self``."""
        self._valid()
        m = self._m()
        for k, v in fields.items():
            if k not in ("port", "ol_flags", "packet_type", "vlan_tci", "vlan_tci_outer", "hash",
                         "hash_hi", "tx_offload", "timesync"):
                raise InvalidArgument(f"{k} cannot be set directly")
            m[k] = v
        return self

    def segments(self) -> list["Mbuf"]:
        self._valid()
        out, h = [], self.handle
        while h != NULL and len(out) <= 0xFFFF:
            out.append(Mbuf(self.domain, h))
            h = int(self.domain.state.mb[h]["next"])
        return out

    # -- data views ------------------------------------------------------------------------
    def _region_view(self, addr: int, n: int) -> np.ndarray:
        m = self._m()
        owner = int(m["direct"]) if int(m["ol_flags"]) & F_INDIRECT else self.handle
        reg = self.domain.pool_of(owner).region
        off = addr - reg.address
        if off < 0 or off + n > reg.size:  # pragma: no cover - guarded by the sanity rules
            raise SanityCheckError(f"mbuf {self.handle}: data outside its region")
        return reg.array[off:off + n]

    def mtod(self, off: int = 0) -> int:
        """``rte_pktmbuf_mtod_offset``: the address of data byte ``off`` of this segment."""
        self._valid()
        return int(D.pktmbuf_mtod(self._st, self.handle)) + int(off)

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

    def read(self, off: int, length: int) -> np.ndarray:
        """``rte_pktmbuf_read``: ``length`` bytes from ``off`` (a view if contiguous, else a copy)."""
        self._valid()
        off = check_count(off, "off", lo=0)
        length = check_count(length, "length", lo=0)
        buf = np.empty(max(length, 1), np.uint8)
        addr = int(D.pktmbuf_read(self._st, self.handle, off, length, buf))
        if addr < 0:
            raise OutOfRange(f"read of {length} bytes at {off} is beyond pkt_len {self.pkt_len}", addr)
        if addr == buf.ctypes.data:
            return buf[:length]
        # inside one segment: find it to build the view
        for s in self.segments():
            m = s._m()
            a = int(m["buf_addr"]) + int(m["data_off"])
            if a <= addr and addr + length <= a + int(m["data_len"]):
                return s._region_view(addr, length)
        return np.empty(0, np.uint8) if length == 0 else buf[:length]  # pragma: no cover

    # -- length changes --------------------------------------------------------------------
    def append(self, length: int) -> np.ndarray:
        """Grow the tail by ``length`` bytes; returns a view of them (``NoRoom`` if no tailroom)."""
        self._valid()
        length = check_count(length, "length", lo=0, hi=0xFFFF)
        addr = int(D.pktmbuf_append(self._st, self.handle, length))
        if addr == E_NOSPC:
            raise NoRoom(f"append of {length} bytes exceeds the tailroom", addr)
        raise_for(addr)
        last = Mbuf(self.domain, int(D.pktmbuf_lastseg(self._st, self.handle)))
        return last._region_view(addr, length)

    def append_bytes(self, payload) -> "Mbuf":
        """Append and copy ``payload`` (bytes-like) in; returns ``self``."""
        b = np.frombuffer(memoryview(payload).cast("B"), np.uint8)
        self.append(b.size)[:] = b
        return self

    def prepend(self, length: int) -> np.ndarray:
        """Grow the front by ``length`` bytes; returns a view of them (``NoRoom`` if no headroom)."""
        self._valid()
        length = check_count(length, "length", lo=0, hi=0xFFFF)
        addr = int(D.pktmbuf_prepend(self._st, self.handle, length))
        if addr == E_NOSPC:
            raise NoRoom(f"prepend of {length} bytes exceeds the headroom", addr)
        raise_for(addr)
        return self._region_view(addr, length)

    def adj(self, length: int) -> None:
        """Remove ``length`` bytes from the front (``OutOfRange`` beyond the first segment)."""
        self._valid()
        length = check_count(length, "length", lo=0)
        rc = int(D.pktmbuf_adj(self._st, self.handle, length))
        if rc == E_RANGE:
            raise OutOfRange(f"adj of {length} bytes exceeds data_len", rc)

    def trim(self, length: int) -> None:
        """Remove ``length`` bytes from the end (``OutOfRange`` beyond the last segment)."""
        self._valid()
        length = check_count(length, "length", lo=0)
        rc = int(D.pktmbuf_trim(self._st, self.handle, length))
        if rc == E_RANGE:
            raise OutOfRange(f"trim of {length} bytes exceeds the last segment's data_len", rc)

    # -- chains ----------------------------------------------------------------------------
    def chain(self, tail) -> "Mbuf":
        """Append packet ``tail`` (``ChainTooLong`` past 65535 segments); returns ``self``."""
        self._valid()
        t = self._other(tail)
        if t.handle == self.handle or t.handle in {s.handle for s in self.segments()}:
            raise InvalidArgument("cannot chain a packet to itself")
        rc = int(D.pktmbuf_chain(self._st, self.handle, t.handle))
        if rc == E_OVERFLOW:
            raise ChainTooLong("chain would exceed 65535 segments", rc)
        return self

    def linearize(self, *, lcore: int | None = None) -> None:
        """Copy every segment into the first (``NoRoom`` if it does not fit)."""
        self._valid()
        lc = facade_lcore() if lcore is None else lcore
        rc = int(D.pktmbuf_linearize(self._st, lc, self.handle))
        if rc == E_NOSPC:
            raise NoRoom("the first segment's tailroom cannot hold the packet", rc)

    # -- references ------------------------------------------------------------------------
    def refcnt_update(self, v: int) -> int:
        """``rte_pktmbuf_refcnt_update``: add ``v`` to the refcnt of every segment.

        Each result must stay in [1, 65534] (``RefcntError`` otherwise, nothing changed).
        Returns the first segment's new count.
        """
        self._valid()
        v = int(v)
        for s in self.segments():
            cur = s.refcnt
            if not 1 <= cur + v <= REFCNT_MAX:
                raise RefcntError(f"refcnt of segment {s.handle}: {cur} + {v} is outside "
                                  f"[1, {REFCNT_MAX}]")
        I.pktmbuf_refcnt_update(self._st, self.handle, v)
        return self.refcnt

    def clone(self, pool=None, *, lcore: int | None = None) -> "Mbuf":
        """An indirect copy sharing this packet's data, with mbufs from ``pool`` (default: ours)."""
        self._valid()
        pool = pool if pool is not None else self.pool
        pool._check_open()
        for s in self.segments():
            if s.refcnt >= REFCNT_MAX:
                raise RefcntError(f"mbuf {s.handle} has the maximum refcnt")
        lc = facade_lcore() if lcore is None else lcore
        h = int(I.pktmbuf_clone(self._st, pool.id, lc, self.handle))
        if h < 0:
            raise PoolExhausted(f"pool {pool.name!r} has too few mbufs for the clone", h)
        return Mbuf(self.domain, h)

    def attach(self, m) -> "Mbuf":
        """Make this (direct, refcnt 1) mbuf an indirect view of ``m``'s first segment."""
        self._valid()
        src = self._other(m)
        if self.is_indirect or self.refcnt != 1:
            raise InvalidArgument("attach needs a direct mbuf with refcnt 1")
        if self.nb_segs != 1 or int(self._m()["next"]) != NULL:
            raise InvalidArgument("attach needs a single-segment mbuf")
        rc = int(I.pktmbuf_attach(self._st, self.handle, src.handle))
        raise_for(rc)
        return self

    def detach(self, *, lcore: int | None = None) -> "Mbuf":
        """Give an indirect mbuf its own (empty) buffer back; no-op on a direct one."""
        self._valid()
        lc = facade_lcore() if lcore is None else lcore
        I.pktmbuf_detach(self._st, lc, self.handle)
        return self

    def copy(self, pool=None, off: int = 0, length: int | None = None, *,
             lcore: int | None = None) -> "Mbuf":
        """A deep copy of bytes [off, off + length) into new mbufs of ``pool``."""
        self._valid()
        pool = pool if pool is not None else self.pool
        off = check_count(off, "off", lo=0)
        length = 0xFFFFFFFF if length is None else check_count(length, "length", lo=0)
        lc = facade_lcore() if lcore is None else lcore
        h = int(D.pktmbuf_copy(self._st, pool.id, lc, self.handle, off, length))
        if h == E_RANGE:
            raise OutOfRange(f"offset {off} is beyond pkt_len", h)
        if h < 0:
            raise PoolExhausted(f"pool {pool.name!r} has too few mbufs for the copy", h)
        return Mbuf(self.domain, h)

    # -- checks and release ----------------------------------------------------------------
    def check(self, header: bool = True) -> None:
        """``rte_mbuf_sanity_check``: raise ``SanityCheckError`` with the reason on failure."""
        rc = int(E.py_mbuf_check(*self.domain._args, self.handle, header))
        if rc != 0:
            raise SanityCheckError(f"mbuf {self.handle}: {CHECK_REASONS.get(rc, rc)}")

    def raw_check(self) -> None:
        rc = int(mbuf_raw_check(self._st, self.handle))
        if rc != 0:
            raise SanityCheckError(f"mbuf {self.handle}: {CHECK_REASONS.get(rc, rc)}")

    def free(self, *, lcore: int | None = None) -> None:
        """Free the whole packet (every segment)."""
        self.domain.free_bulk(np.array([self.handle], np.int32), lcore=lcore)

    def free_seg(self, *, lcore: int | None = None) -> None:
        """Free this segment alone (its ``next`` is not followed)."""
        lc = facade_lcore() if lcore is None else lcore
        raise_for(int(E.py_free_seg(*self.domain._args, lc, self.handle)),
                  f"cannot free segment {self.handle}")

    def dump(self, dump_len: int = 64) -> str:
        """``rte_pktmbuf_dump``: header fields of every segment and a hex dump of its data
        (at most ``dump_len`` bytes in all)."""
        self._valid()
        lines = []
        h = self._m()
        lines.append(f"dump mbuf at handle {self.handle}, pool {int(h['pool'])}, "
                     f"buf_addr {int(h['buf_addr']):#x}, buf_iova {int(h['buf_iova']):#x}, "
                     f"buf_len {int(h['buf_len'])}")
        lines.append(f"  pkt_len={int(h['pkt_len'])}, ol_flags={int(h['ol_flags']):#x}, "
                     f"nb_segs={int(h['nb_segs'])}, port={int(h['port'])}, "
                     f"ptype={int(h['packet_type']):#x}")
        left = max(0, int(dump_len))
        for s in self.segments():
            m = s._m()
            lines.append(f"  segment at handle {s.handle}, data={int(m['buf_addr']) + int(m['data_off']):#x}, "
                         f"off={int(m['data_off'])}, len={int(m['data_len'])}, refcnt={int(m['refcnt'])}")
            chunk = bytes(s.data[:left])
            left -= len(chunk)
            for o in range(0, len(chunk), 16):
                row = chunk[o:o + 16]
                lines.append(f"  {o:08x}: " + " ".join(f"{b:02X}" for b in row))
        return "\n".join(lines)

    def tx_offload_fields(self) -> dict:
        """The ``tx_offload`` bit fields (l2_len, l3_len, ...)."""
        return tx_offload_unpack(self.tx_offload)

    def dynfield(self, offset: int, nbytes: int) -> int:
        """Read a dynamic field (see ``domain.dyn.register_field``)."""
        self._valid()
        _check_dyn(offset, nbytes)
        return int(mbuf_dynfield_read(self._st, self.handle, offset, nbytes))

    def set_dynfield(self, offset: int, nbytes: int, value: int) -> None:
        self._valid()
        _check_dyn(offset, nbytes)
        mbuf_dynfield_write(self._st, self.handle, offset, nbytes, int(value) & ((1 << 64) - 1))

    def __int__(self) -> int:
        return self.handle

    __index__ = __int__

    def __eq__(self, other) -> bool:
        return isinstance(other, Mbuf) and other.handle == self.handle and other.domain is self.domain

    def __hash__(self) -> int:
        return hash((id(self.domain), self.handle))

    def __len__(self) -> int:
        return self.pkt_len

    def __repr__(self) -> str:
        try:
            m = self._m()
            return (f"Mbuf({self.handle}, pkt_len={int(m['pkt_len'])}, nb_segs={int(m['nb_segs'])}, "
                    f"refcnt={int(m['refcnt'])}{', indirect' if self.is_indirect else ''})")
        except Exception:  # pragma: no cover
            return f"Mbuf({self.handle})"
