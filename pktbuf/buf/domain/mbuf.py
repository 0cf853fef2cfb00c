"""The :class:`Mbuf` facade: one packet (or segment) handle with Pythonic operations."""
from __future__ import annotations

import numpy as np

from ...errors import (E_ALREADY, E_BADF, E_FAULT, E_INVAL, E_OVERFLOW, E_RANGE, ChainTooLong,
                       DoubleFree, InvalidArgument, InvalidHandle, OutOfRange, PoolExhausted,
                       RefcntError, SanityCheckError, UseAfterFree, check_count, check_flag,
                       check_uint, raise_for)
from ...lcore import check_lcore
from ..mbuf import data as D
from ..mbuf import indirect as I
from ..mbuf.check import CHECK_REASONS, mbuf_raw_check
from ..mbuf.dynfield import DYN_END, DYN_START, mbuf_dynfield_read, mbuf_dynfield_write
from ..mbuf.layout import F_NOT_DIRECT, F_INDIRECT, MAX_SEGS, NULL, REFCNT_MAX
from ..mbuf.offload import TX_OFFLOAD_FIELDS, mbuf_tx_offload, tx_offload_unpack
from . import entry as E
from .domain import Domain
from .mbuf_data import MbufData

__all__ = ["Mbuf"]

_READ_ONLY_FIELDS = ("pkt_len", "data_len", "nb_segs", "data_off", "buf_len", "priv_size",
                     "buf_iova")
# the fields a user sets, as in DPDK, with their widths in bits
SETTABLE_FIELDS = {"port": 16, "ol_flags": 64, "packet_type": 32, "vlan_tci": 16,
                   "vlan_tci_outer": 16, "hash": 32, "hash_hi": 32, "tx_offload": 64,
                   "timesync": 16}


def _check_dyn(offset, nbytes) -> tuple[int, int]:
    offset = check_count(offset, "offset", lo=DYN_START, hi=DYN_END - 1)
    nbytes = check_count(nbytes, "nbytes", lo=1, hi=8)
    if offset + nbytes > DYN_END:
        raise InvalidArgument(f"dynfield bytes [{offset}, {offset + nbytes}) are outside "
                              f"[{DYN_START}, {DYN_END})")
    return offset, nbytes


def _field_property(name: str, bits: int):
    def get(self):
        self._valid()
        return int(self._m()[name])

    def set_(self, value):
        self.set(**{name: value})

    return property(get, set_, doc=f"``{name}`` ({bits}-bit); settable.")


class Mbuf(MbufData):
    """A handle to an allocated mbuf of a :class:`~pktbuf.buf.domain.domain.Domain`.

    The object is a thin view: two ``Mbuf`` with the same handle are the same mbuf, and after
    :meth:`free` the handle must not be used.  Every method first checks that the handle is
    still an mbuf the application holds (``DoubleFree`` for a free of a freed mbuf,
    ``UseAfterFree`` -- a ``DoubleFree`` -- for any other use of it, also when only clones
    keep its buffer alive; ``InvalidHandle`` if it is not an mbuf) and that it is not
    *stale*: an Mbuf records its domain and the generation of its pool, so after the pool is
    closed -- even once a new pool reuses its id and handles -- it raises ``InvalidHandle``; an
    Mbuf given to another domain's mbuf raises ``InvalidHandle`` too.  (Raw ``int`` handles
    carry no such tag: they are checked only for being an allocated mbuf of a live pool.)

    Data views are NumPy arrays into the pool's shared region; writing to them writes the
    packet.  Packet-level operations (``free``, ``append``, ``chain``, ``read``, ``clone``...)
    are for a packet's first segment; as in DPDK, a segment inside a chain (``next``,
    ``segments()[1:]``) takes segment-level ones (``free_seg``, ``refcnt``, fields, ``data``).
    """

    __slots__ = ("domain", "handle", "_pid", "_gen")
    _is_mbuf_facade = True

    def __init__(self, domain, handle):
        if not isinstance(domain, Domain):
            raise InvalidArgument(f"domain must be a Domain, got {type(domain).__name__}")
        self.domain = domain
        self.handle = h = domain.handle(handle)
        pid = int(E.fast_mbuf_status(*domain._args, h))
        if pid < 0:
            self._pid = self._gen = -1
            self._raise(pid)
        self._pid = pid
        self._gen = domain._gens[pid]

    @classmethod
    def _new(cls, domain, h: int, pid: int) -> "Mbuf":
        """An Mbuf for a handle just allocated from pool ``pid`` (nothing to check)."""
        self = object.__new__(cls)
        self.domain = domain
        self.handle = h
        self._pid = pid
        self._gen = domain._gens[pid]
        return self

    # -- validation ------------------------------------------------------------------------
    def _valid(self, freeing: bool = False) -> None:
        pid = E.fast_mbuf_status(*self.domain._args, self.handle)
        if pid != self._pid or self.domain._gens[pid] != self._gen:
            self._raise(pid, freeing)

    def _stale(self) -> bool:
        d = self.domain
        return self._pid >= 0 and (d._gens[self._pid] != self._gen or self._pid not in d._pools)

    def _raise(self, rc, freeing: bool = False) -> None:
        """Raise what status ``rc`` of this mbuf means; ``freeing``: the caller was freeing it
        (a freed mbuf is then a double free; for any other use, a use after free)."""
        h = self.handle
        if self._stale():
            raise InvalidHandle(f"mbuf {h} is stale: its pool was closed")
        if rc == E_BADF:
            raise InvalidHandle(f"{h} is not an mbuf of a live pool of this domain")
        if rc == E_ALREADY:
            where = "it is in its pool, or only clones still use its buffer"
            if freeing:
                raise DoubleFree(f"mbuf {h} was freed already ({where}): a double free")
            raise UseAfterFree(f"mbuf {h} is used after it was freed ({where}); a freed "
                               f"handle must not be read, written or wrapped again")
        # allocated, but from another pool than when this Mbuf was made: its pool was closed
        raise InvalidHandle(f"mbuf {h} is stale: its pool was closed")

    def _check_domain(self, domain) -> None:
        if self.domain is not domain:
            raise InvalidHandle(f"mbuf {self.handle} belongs to another domain")

    @property
    def _st(self):
        return self.domain.state

    def _m(self):
        return self.domain.state.mb[self.handle]

    def _other(self, m, name: str) -> "Mbuf":
        """Another mbuf argument: an Mbuf of our domain (checked like self) or an int."""
        if isinstance(m, Mbuf):
            m._check_domain(self.domain)
            m._valid()
            return m
        return Mbuf(self.domain, self.domain.handle(m, name))

    def _app_refs(self, h: int) -> int:
        """References to segment ``h`` the application holds (refcnt minus those of clones)."""
        m = self.domain.state.mb[h]
        return int(m["refcnt"]) - int(m["nb_indirect"])

    def _direct_of(self, h: int) -> int:
        return int(I.mbuf_from_indirect(self._st, h))

    def _seg_handles(self) -> list[int]:
        """The handles of this packet's segments (a chain that loops stops at 65535)."""
        mb = self.domain.state.mb
        out, h = [], self.handle
        while h != NULL and len(out) < MAX_SEGS:
            out.append(h)
            h = int(mb[h]["next"])
        return out

    def _pool_arg(self, pool):
        """A pool argument of clone/copy: an open PktmbufPool of this mbuf's domain."""
        if pool is None:
            return self.pool
        # a PktmbufPool (which imports this module: tested by its class flag, not by name)
        if not getattr(type(pool), "_is_mbuf", False):
            raise InvalidArgument(f"pool must be a PktmbufPool, got {type(pool).__name__}")
        if pool.domain is not self.domain:
            raise InvalidArgument(f"pool {pool.name!r} belongs to another domain")
        pool._check_open()
        return pool

    # -- fields ----------------------------------------------------------------------------
    def __getattr__(self, name):
        if name in _READ_ONLY_FIELDS:
            self._valid()
            return int(self._m()[name])
        raise AttributeError(name)

    port = _field_property("port", 16)
    ol_flags = _field_property("ol_flags", 64)
    packet_type = _field_property("packet_type", 32)
    vlan_tci = _field_property("vlan_tci", 16)
    vlan_tci_outer = _field_property("vlan_tci_outer", 16)
    hash = _field_property("hash", 32)
    hash_hi = _field_property("hash_hi", 32)
    tx_offload = _field_property("tx_offload", 64)
    timesync = _field_property("timesync", 16)

    def set(self, **fields) -> "Mbuf":
        """Set header fields, e.g. ``m.set(port=1, packet_type=0x11)``; returns ``self``.

        Settable: ``port``, ``vlan_tci``, ``vlan_tci_outer``, ``timesync`` (16-bit),
        ``packet_type``, ``hash``, ``hash_hi`` (32-bit), ``ol_flags``, ``tx_offload`` (64-bit);
        each value must fit its field.  ``ol_flags`` must keep the INDIRECT and EXTERNAL bits
        as they are (the mbuf's kind is not a flag you set).  All values are checked before
        any is written.  Each field can also be assigned alone: ``m.port = 1``.
        """
        self._valid()
        vals = {}
        for k, v in fields.items():
            bits = SETTABLE_FIELDS.get(k)
            if bits is None:
                raise InvalidArgument(f"{k} cannot be set (settable: {', '.join(SETTABLE_FIELDS)})")
            vals[k] = check_uint(v, k, bits)
        m = self._m()
        if "ol_flags" in vals and (vals["ol_flags"] ^ int(m["ol_flags"])) & F_NOT_DIRECT:
            raise InvalidArgument("ol_flags: the INDIRECT and EXTERNAL bits cannot be changed")
        for k, v in vals.items():
            m[k] = v
        return self

    def set_tx_offload(self, **lengths) -> "Mbuf":
        """Set ``tx_offload`` from its bit fields (``l2_len`` 7 bits, ``l3_len`` 9, ``l4_len``
        8, ``tso_segsz`` 16, ``outer_l3_len`` 9, ``outer_l2_len`` 7; missing ones are 0), as
        ``rte_mbuf_tx_offload`` packs them.  A value too wide for its field raises
        InvalidArgument (C bit fields would silently truncate it)."""
        widths = {name: width for name, _, width in TX_OFFLOAD_FIELDS}
        vals = {name: 0 for name in widths}
        for k, v in lengths.items():
            if k not in widths:
                raise InvalidArgument(f"{k} is not a tx_offload field ({', '.join(widths)})")
            vals[k] = check_uint(v, k, widths[k])
        return self.set(tx_offload=int(mbuf_tx_offload(*(vals[n] for n, _, _ in TX_OFFLOAD_FIELDS))))

    @property
    def refcnt(self) -> int:
        """This segment's reference count.  Assigning sets it for this segment alone
        (``rte_mbuf_refcnt_set``): 1..65534, and at least one more than the clones attached to
        its buffer hold (the application keeps a reference)."""
        self._valid()
        return int(I.mbuf_refcnt_read(self._st, self.handle))

    @refcnt.setter
    def refcnt(self, v) -> None:
        self._valid()
        v = check_count(v, "refcnt", lo=1, hi=REFCNT_MAX)
        clones = int(self._m()["nb_indirect"])
        if v < clones + 1:
            raise RefcntError(f"refcnt of mbuf {self.handle} must be at least {clones + 1}: "
                              f"{clones} attached clones hold references")
        I.mbuf_refcnt_set(self._st, self.handle, v)

    @property
    def next(self):
        """The next segment, or None."""
        self._valid()
        n = int(self._m()["next"])
        return None if n == NULL else Mbuf(self.domain, n)

    @property
    def pool(self):
        self._valid()
        return self.domain.pool_of(self.handle)

    @property
    def is_indirect(self) -> bool:
        self._valid()
        return bool(int(self._m()["ol_flags"]) & F_INDIRECT)

    @property
    def is_contiguous(self) -> bool:
        return self.nb_segs == 1

    def segments(self) -> list["Mbuf"]:
        self._valid()
        return [Mbuf(self.domain, h) for h in self._seg_handles()]
    # -- references ------------------------------------------------------------------------
    def refcnt_update(self, v: int) -> int:
        """``rte_pktmbuf_refcnt_update``: add ``v`` to the refcnt of every segment.

        Each result must stay in [1, 65534] and above the references attached clones hold
        (``RefcntError`` otherwise, nothing changed).  Returns the first segment's new count.
        """
        self._valid()
        v = check_count(v, "v", lo=-REFCNT_MAX, hi=REFCNT_MAX)
        mb = self.domain.state.mb
        for h in self._seg_handles():
            cur, clones = int(mb[h]["refcnt"]), int(mb[h]["nb_indirect"])
            if not clones + 1 <= cur + v <= REFCNT_MAX:
                raise RefcntError(f"refcnt of segment {h}: {cur} + {v} is outside "
                                  f"[{clones + 1}, {REFCNT_MAX}]")
        I.pktmbuf_refcnt_update(self._st, self.handle, v)
        return self.refcnt

    def _check_clone_room(self, handles) -> None:
        """Each buffer behind ``handles`` can take one more reference."""
        for h in handles:
            d = self._direct_of(h)
            if int(I.mbuf_refcnt_read(self._st, d)) >= REFCNT_MAX:
                raise RefcntError(f"mbuf {d} has the maximum refcnt")

    def clone(self, pool=None, *, lcore: int | None = None) -> "Mbuf":
        """An indirect copy sharing this packet's data, with mbufs from ``pool`` (default: ours;
        an open PktmbufPool of this domain)."""
        self._valid()
        pool = self._pool_arg(pool)
        lc = check_lcore(lcore)
        segs = self._seg_handles()
        self._check_clone_room(segs)
        if pool._available_to(lc) < len(segs):   # refuse before taking any (all or nothing)
            raise PoolExhausted(f"pool {pool.name!r} has too few mbufs for a clone of "
                                f"{len(segs)} segments")
        h = int(I.pktmbuf_clone(self._st, pool.id, lc, self.handle))
        if h < 0:
            raise PoolExhausted(f"pool {pool.name!r} has too few mbufs for the clone", h)
        return Mbuf._new(self.domain, h, pool.id)

    def attach(self, m) -> "Mbuf":
        """Make this (direct, refcnt 1, single-segment) mbuf an indirect view of ``m``'s first
        segment.  ``m`` must be another buffer: attaching an mbuf to itself (or to a clone of
        itself) is refused."""
        self._valid()
        src = self._other(m, "m")
        mm = self._m()
        if int(mm["ol_flags"]) & F_NOT_DIRECT or int(mm["refcnt"]) != 1:
            raise InvalidArgument("attach needs a direct mbuf with refcnt 1")
        if int(mm["nb_segs"]) != 1 or int(mm["next"]) != NULL:
            raise InvalidArgument("attach needs a single-segment mbuf")
        if self._direct_of(src.handle) == self.handle:
            raise InvalidArgument("cannot attach an mbuf to its own buffer")
        self._check_clone_room([src.handle])
        rc = int(I.pktmbuf_attach(self._st, self.handle, src.handle))
        raise_for(rc)
        return self

    def detach(self, *, lcore: int | None = None) -> "Mbuf":
        """Give an indirect mbuf its own (empty) buffer back; no-op on a direct one.  The
        packet's ``pkt_len`` loses the bytes this segment no longer holds."""
        self._valid()
        lc = check_lcore(lcore)
        m = self._m()
        if not int(m["ol_flags"]) & F_INDIRECT:
            return self
        old = int(m["data_len"])
        I.pktmbuf_detach(self._st, lc, self.handle)
        m["pkt_len"] = max(0, int(m["pkt_len"]) - old)
        return self

    def copy(self, pool=None, off: int = 0, length: int | None = None, *,
             lcore: int | None = None) -> "Mbuf":
        """A deep copy of bytes [off, off + length) into new mbufs of ``pool`` (an open
        PktmbufPool of this domain; default: ours).  ``length`` is clamped to the data after
        ``off``; ``OutOfRange`` if ``off > pkt_len``."""
        self._valid()
        pool = self._pool_arg(pool)
        off = check_count(off, "off", lo=0)
        pkt_len = int(self._m()["pkt_len"])
        if off > pkt_len:
            raise OutOfRange(f"offset {off} is beyond pkt_len {pkt_len}", E_RANGE)
        length = pkt_len - off if length is None else min(check_count(length, "length", lo=0),
                                                          pkt_len - off)
        lc = check_lcore(lcore)
        mb = self.domain.state.mb
        held = sum(int(mb[h]["data_len"]) for h in self._seg_handles())
        if held - off < length:        # before taking any mbuf: a refused copy changes nothing
            raise SanityCheckError(f"mbuf {self.handle}: its segments hold {held} bytes, "
                                   f"fewer than pkt_len {pkt_len}", E_FAULT)
        room = pool.data_room - pool.headroom
        if length and room <= 0:
            raise InvalidArgument(f"pool {pool.name!r} has no data room for a copy", E_INVAL)
        need = 1 if length == 0 else -(-length // room)
        if need > MAX_SEGS:
            raise ChainTooLong(f"the copy would need {need} segments (more than 65535)", E_OVERFLOW)
        if pool._available_to(lc) < need:        # refuse before taking any (all or nothing)
            raise PoolExhausted(f"pool {pool.name!r} has too few mbufs for a copy of "
                                f"{length} bytes ({need} mbufs)")
        h = int(D.pktmbuf_copy(self._st, pool.id, lc, self.handle, off, length))
        if h == E_INVAL:
            raise InvalidArgument(f"pool {pool.name!r} has no data room for a copy", h)
        if h == E_OVERFLOW:
            raise ChainTooLong("the copy would need more than 65535 segments", h)
        if h == E_FAULT:
            raise SanityCheckError(f"mbuf {self.handle}: its segments hold fewer bytes than "
                                   f"pkt_len", h)
        if h == E_RANGE:   # pragma: no cover - checked above
            raise OutOfRange(f"offset {off} is beyond pkt_len", h)
        if h < 0:
            raise PoolExhausted(f"pool {pool.name!r} has too few mbufs for the copy", h)
        return Mbuf._new(self.domain, h, pool.id)

    # -- checks and release ----------------------------------------------------------------
    def check(self, header: bool = True) -> None:
        """``rte_mbuf_sanity_check``: raise ``SanityCheckError`` with the reason on failure."""
        header = check_flag(header, "header")
        if self._stale():
            self._raise(E_BADF)
        rc = int(E.py_mbuf_check(*self.domain._args, self.handle, header))
        if rc != 0:
            raise SanityCheckError(f"mbuf {self.handle}: {CHECK_REASONS.get(rc, rc)}")

    def raw_check(self) -> None:
        if self._stale():
            self._raise(E_BADF)
        rc = int(mbuf_raw_check(self._st, self.handle))
        if rc != 0:
            raise SanityCheckError(f"mbuf {self.handle}: {CHECK_REASONS.get(rc, rc)}")

    def free(self, *, lcore: int | None = None) -> None:
        """Free the whole packet (every segment)."""
        self._valid(freeing=True)
        self.domain.free_bulk(np.array([self.handle], np.int32), lcore=lcore)

    def free_seg(self, *, lcore: int | None = None) -> None:
        """Free this segment alone (``rte_pktmbuf_free_seg``): its ``next`` is not followed,
        so the rest of a chain is yours to free (e.g. ``for s in m.segments(): s.free_seg()``).
        Checked as every call is: a segment the application no longer holds a reference to --
        freed, or kept only by clones -- raises ``DoubleFree``."""
        self._valid(freeing=True)
        lc = check_lcore(lcore)
        rc = int(E.py_free_seg(*self.domain._args, lc, self.handle))
        if rc < 0:
            self._raise(rc, freeing=True)

    def dump(self, dump_len: int = 64) -> str:
        """``rte_pktmbuf_dump``: header fields of every segment and a hex dump of its data
        (at most ``dump_len`` bytes in all)."""
        self._valid()
        left = check_count(dump_len, "dump_len", lo=0)
        lines = []
        h = self._m()
        lines.append(f"dump mbuf at handle {self.handle}, pool {int(h['pool'])}, "
                     f"buf_addr {int(h['buf_addr']):#x}, buf_iova {int(h['buf_iova']):#x}, "
                     f"buf_len {int(h['buf_len'])}")
        lines.append(f"  pkt_len={int(h['pkt_len'])}, ol_flags={int(h['ol_flags']):#x}, "
                     f"nb_segs={int(h['nb_segs'])}, port={int(h['port'])}, "
                     f"ptype={int(h['packet_type']):#x}")
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
        offset, nbytes = _check_dyn(offset, nbytes)
        return int(mbuf_dynfield_read(self._st, self.handle, offset, nbytes))

    def set_dynfield(self, offset: int, nbytes: int, value: int) -> None:
        """Write the ``nbytes``-byte unsigned ``value`` (it must fit) at ``offset``."""
        self._valid()
        offset, nbytes = _check_dyn(offset, nbytes)
        value = check_uint(value, "value", 8 * nbytes)
        mbuf_dynfield_write(self._st, self.handle, offset, nbytes, np.uint64(value))

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
            ind = ", indirect" if int(m["ol_flags"]) & F_INDIRECT else ""
            return (f"Mbuf({self.handle}, pkt_len={int(m['pkt_len'])}, nb_segs={int(m['nb_segs'])}, "
                    f"refcnt={int(m['refcnt'])}{ind})")
        except Exception:  # pragma: no cover
            return f"Mbuf({self.handle})"
