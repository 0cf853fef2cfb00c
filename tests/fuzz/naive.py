"""A deliberately plain model of pktbuf's packet facade: DPDK's mbuf semantics and the
facade's rules for refusing a call, in dictionaries and bytearrays.

It is the reference of the facade fuzz (test_facade_fuzz.py).  For every call it either
predicts the result -- every descriptor field of every allocated mbuf, every byte of every
pool's region -- or names the exception the facade must raise, in which case nothing may
change.  Which free handles an allocation returns is the one thing it does not predict (that
is the mempool's business, modelled in tests/core/naive.py); the fuzz reports them.

Semantics, as DPDK defines them (lib/mbuf/rte_mbuf.h, rte_mbuf.c) and pktbuf implements them:

* a descriptor holds ``refcnt`` references; ``nb_ind`` of them belong to indirect mbufs
  (clones) attached to its buffer, the rest to the application;
* freeing a packet drops one reference on every segment of its chain; the last reference
  of a segment detaches it (if indirect: its own buffer back, one reference less on the
  direct mbuf, which is freed at zero), resets ``next``/``nb_segs`` and returns it;
* ``pkt_len`` and ``nb_segs`` are meaningful in the first segment only (``chain`` sets the
  tail's ``pkt_len`` to its ``data_len`` and leaves its ``nb_segs``).

The facade's rules (pktbuf/buf/domain/mbuf.py): a handle is usable if it is an allocated mbuf of
a live pool whose application references (``refcnt - nb_ind``) are at least one; a free may
drop at most that many references per segment; an Mbuf object additionally belongs to its
domain and to its pool's generation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pktbuf import (ChainTooLong, DoubleFree, InvalidArgument, InvalidHandle, NoRoom, OutOfRange,
                    PoolExhausted, RefcntError, SanityCheckError)

NULL = -1
REFCNT_MAX = 0xFFFE
MAX_SEGS = 0xFFFF
F_EXTERNAL = 1 << 61
F_INDIRECT = 1 << 62
F_NOT_DIRECT = F_EXTERNAL | F_INDIRECT
PORT_INVALID = 0xFFFF
# what attach and copy carry over (DPDK's __rte_pktmbuf_copy_hdr: not timesync, not ol_flags)
HEADER = ("port", "vlan_tci", "vlan_tci_outer", "tx_offload", "hash", "hash_hi",
          "packet_type")
SETTABLE = {"port": 16, "ol_flags": 64, "packet_type": 32, "vlan_tci": 16,
            "vlan_tci_outer": 16, "hash": 32, "hash_hi": 32, "tx_offload": 64, "timesync": 16}


class Refused(Exception):
    """The facade must raise ``exc`` (and change nothing)."""

    def __init__(self, exc, why=""):
        super().__init__(f"{exc.__name__}: {why}")
        self.exc = exc


@dataclass
class Desc:
    pool: "PoolM"
    alloc: bool = False
    refcnt: int = 1
    nb_ind: int = 0
    next: int = NULL
    nb_segs: int = 1
    pkt_len: int = 0
    data_len: int = 0
    data_off: int = 0
    buf_len: int = 0
    owner: int = NULL           # handle whose buffer this segment uses (itself if direct)
    direct: int = NULL          # for an indirect mbuf: the direct one (== owner)
    ol_flags: int = 0
    priv_size: int = 0
    port: int = PORT_INVALID
    packet_type: int = 0
    vlan_tci: int = 0
    vlan_tci_outer: int = 0
    hash: int = 0
    hash_hi: int = 0
    tx_offload: int = 0
    timesync: int = 0


@dataclass(repr=False)
class PoolM:
    dom: "DomM"
    facade: object              # the PktmbufPool
    id: int
    base: int
    n: int
    data_room: int
    headroom: int
    priv: int
    elt: int
    gen: int
    region: bytearray = field(repr=False, default=None)
    open: bool = True

    def buf_off(self, h: int) -> int:
        return (h - self.base) * self.elt + self.priv

    def __repr__(self) -> str:
        return f"PoolM({self.facade.name!r}, id={self.id}, gen={self.gen}, open={self.open})"

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


class DomM:
    def __init__(self, facade):
        self.facade = facade
        self.pools: dict[int, PoolM] = {}     # live pools by id
        self.desc: dict[int, Desc] = {}       # every descriptor of a live pool
        self.gens: dict[int, int] = {}

    def add_pool(self, facade_pool) -> PoolM:
        p = facade_pool
        pid = p.id
        self.gens[pid] = self.gens.get(pid, 0) + 1
        pm = PoolM(self, p, pid, p.obj_base, p.n, p.data_room, p.headroom, p.priv_size,
                   p.elt_size, self.gens[pid], bytearray(p.region.size))
        self.pools[pid] = pm
        for h in range(pm.base, pm.base + pm.n):
            self.desc[h] = Desc(pm, data_off=pm.headroom, buf_len=pm.data_room, owner=h,
                                priv_size=pm.priv)
        return pm

    def drop_pool(self, pm: PoolM) -> None:
        pm.open = False
        del self.pools[pm.id]
        for h in range(pm.base, pm.base + pm.n):
            del self.desc[h]

    # -- queries ---------------------------------------------------------------------------
    def segs(self, h: int) -> list[int]:
        out = []
        while h != NULL and len(out) < MAX_SEGS:
            out.append(h)
            h = self.desc[h].next
        return out

    def app_refs(self, h: int) -> int:
        d = self.desc[h]
        return d.refcnt - d.nb_ind

    def status(self, h) -> type | None:
        """The exception a raw-int handle gets from the facade's status rule, or None."""
        d = self.desc.get(h) if isinstance(h, int) else None
        if d is None or h < 0:
            return InvalidHandle
        if not d.alloc or d.refcnt - d.nb_ind < 1:
            return DoubleFree
        return None

    def require(self, h) -> Desc:
        exc = self.status(h)
        if exc:
            raise Refused(exc, f"status of {h}")
        return self.desc[h]

    def seg_bytes(self, s: int) -> bytes:
        d = self.desc[s]
        o = self.desc[d.owner].pool
        off = o.buf_off(d.owner) + d.data_off
        return bytes(o.region[off:off + d.data_len])

    def packet_bytes(self, h: int) -> bytes:
        return b"".join(self.seg_bytes(s) for s in self.segs(h))

    def write(self, s: int, at: int, data: bytes) -> None:
        """Bytes written at offset ``at`` of segment ``s``'s buffer."""
        d = self.desc[s]
        o = self.desc[d.owner].pool
        off = o.buf_off(d.owner) + at
        assert 0 <= at and at + len(data) <= d.buf_len
        o.region[off:off + len(data)] = data

    def free_count(self, pm: PoolM) -> int:
        return sum(1 for h in range(pm.base, pm.base + pm.n) if not self.desc[h].alloc)

    def linked(self) -> set[int]:
        """Handles some allocated mbuf's ``next`` points at (segments inside a chain)."""
        return {d.next for d in self.desc.values() if d.alloc and d.next != NULL}

    # -- allocation --------------------------------------------------------------------------
    def alloc(self, h: int, pm: PoolM, raw: bool = False) -> None:
        d = self.desc[h]
        assert d.pool is pm and not d.alloc, f"{h} handed out twice or from the wrong pool"
        d.alloc = True
        if not raw:
            self._reset(h)

    def _reset(self, h: int) -> None:
        d = self.desc[h]
        d.next, d.nb_segs = NULL, 1
        d.data_off = d.pool.headroom
        d.port, d.ol_flags, d.packet_type = PORT_INVALID, 0, 0
        d.pkt_len = d.data_len = 0
        d.vlan_tci = d.vlan_tci_outer = 0
        d.tx_offload = 0

    # -- release ---------------------------------------------------------------------------
    def _detach(self, h: int) -> None:
        d = self.desc[h]
        md = d.direct
        pm = d.pool
        d.priv_size, d.owner, d.buf_len = pm.priv, h, pm.data_room
        d.data_off, d.data_len, d.ol_flags, d.direct = pm.headroom, 0, 0, NULL
        m = self.desc[md]
        m.nb_ind -= 1
        m.refcnt -= 1
        if m.refcnt == 0:
            m.next, m.nb_segs, m.refcnt = NULL, 1, 1
            m.alloc = False

    def _prefree(self, s: int) -> None:
        d = self.desc[s]
        if d.refcnt != 1:
            d.refcnt -= 1
            return
        if d.ol_flags & F_NOT_DIRECT:
            self._detach(s)
        d.next, d.nb_segs = NULL, 1
        d.alloc = False

    def free_packet(self, h: int) -> None:
        s = h
        while s != NULL:
            nxt = self.desc[s].next
            self._prefree(s)
            s = nxt

    def free_check(self, handles: list[int]) -> None:
        """The dry run of a bulk free (raw ints, -1 = NULL): raises Refused or returns."""
        count: dict[int, int] = {}
        for h in handles:
            if h == NULL:
                continue
            d = self.desc.get(h)
            if d is None or h < 0:
                raise Refused(InvalidHandle, f"{h} is not an mbuf")
            if not d.alloc:
                raise Refused(DoubleFree, f"{h} is free")
            n = 0
            s = h
            while s != NULL:
                ds = self.desc.get(s)
                if ds is None:
                    raise Refused(SanityCheckError, "chain leaves the live pools")
                if not ds.alloc:
                    raise Refused(DoubleFree, f"segment {s} is free")
                n += 1
                if n > MAX_SEGS:
                    raise Refused(SanityCheckError, "loop")
                count[s] = count.get(s, 0) + 1
                s = ds.next
        for s, k in count.items():
            if k > self.app_refs(s):
                raise Refused(DoubleFree, f"{s} freed {k} times, {self.app_refs(s)} held")

    def free_bulk(self, handles: list[int]) -> None:
        self.free_check(handles)
        for h in handles:
            if h != NULL:
                self.free_packet(h)

    def free_seg(self, h: int) -> None:
        self.require(h)
        self._prefree(h)

    # -- data ------------------------------------------------------------------------------
    def append(self, h: int, n: int) -> tuple[int, int]:
        """(segment, offset in its buffer) of the added bytes."""
        self.require(h)
        if n > 0xFFFF:
            raise Refused(NoRoom)
        last = self.segs(h)[-1]
        ld = self.desc[last]
        if n > ld.buf_len - ld.data_off - ld.data_len:
            raise Refused(NoRoom)
        at = ld.data_off + ld.data_len
        ld.data_len += n
        self.desc[h].pkt_len += n
        return last, at

    def prepend(self, h: int, n: int) -> tuple[int, int]:
        d = self.require(h)
        if n > 0xFFFF or n > d.data_off:
            raise Refused(NoRoom)
        d.data_off -= n
        d.data_len += n
        d.pkt_len += n
        return h, d.data_off

    def adj(self, h: int, n: int) -> None:
        d = self.require(h)
        if n > 0xFFFF or n > d.data_len:
            raise Refused(OutOfRange)
        d.data_off += n
        d.data_len -= n
        d.pkt_len -= n

    def trim(self, h: int, n: int) -> None:
        self.require(h)
        if n > 0xFFFF:
            raise Refused(OutOfRange)
        ld = self.desc[self.segs(h)[-1]]
        if n > ld.data_len:
            raise Refused(OutOfRange)
        ld.data_len -= n
        self.desc[h].pkt_len -= n

    def read(self, h: int, off: int, length: int) -> bytes:
        """What ``read`` returns, following the kernel's walk (a packet whose segments hold
        fewer bytes than pkt_len fails with SanityCheckError when the walk runs out)."""
        d = self.require(h)
        if off + length > d.pkt_len:
            raise Refused(OutOfRange)
        if off + length <= d.data_len:
            return self.seg_bytes(h)[off:off + length]
        seg = h
        while off >= self.desc[seg].data_len:
            nxt = self.desc[seg].next
            if nxt == NULL:
                break
            off -= self.desc[seg].data_len
            seg = nxt
        if off + length <= self.desc[seg].data_len:
            return self.seg_bytes(seg)[off:off + length]
        out = b""
        while len(out) < length:
            if seg == NULL:
                raise Refused(SanityCheckError)
            out += self.seg_bytes(seg)[off:][:length - len(out)]
            off = 0
            seg = self.desc[seg].next
        return out

    def chain(self, h: int, t: int) -> None:
        self.require(h)
        self.require(t)
        mine = self.segs(h)
        if t in mine or h in self.segs(t):
            raise Refused(InvalidArgument, "chain to itself")
        if self.app_refs(h) != 1 or self.app_refs(mine[-1]) != 1:
            raise Refused(InvalidArgument, "shared packet")
        dh, dt = self.desc[h], self.desc[t]
        if dh.nb_segs + dt.nb_segs > MAX_SEGS:
            raise Refused(ChainTooLong)
        self.desc[mine[-1]].next = t
        dh.nb_segs += dt.nb_segs
        dh.pkt_len += dt.pkt_len
        dt.pkt_len = dt.data_len

    def linearize(self, h: int) -> None:
        d = self.require(h)
        if d.next == NULL:
            return
        if self.app_refs(h) != 1:
            raise Refused(InvalidArgument, "shared")
        rest = self.segs(h)[1:]
        extra = sum(self.desc[s].data_len for s in rest)
        if extra > d.buf_len - d.data_off - d.data_len:
            raise Refused(NoRoom)
        at = d.data_off + d.data_len
        for s in rest:
            b = self.seg_bytes(s)
            self.write(h, at, b)
            at += len(b)
            self._prefree(s)
        d.data_len += extra
        d.next, d.nb_segs = NULL, 1

    # -- references ------------------------------------------------------------------------
    def refcnt_update(self, h: int, v: int) -> None:
        self.require(h)
        for s in self.segs(h):
            ds = self.desc[s]
            if not ds.nb_ind + 1 <= ds.refcnt + v <= REFCNT_MAX:
                raise Refused(RefcntError)
        for s in self.segs(h):
            self.desc[s].refcnt += v

    def refcnt_set(self, h: int, v: int) -> None:
        d = self.require(h)
        if not 1 <= v <= REFCNT_MAX:
            raise Refused(InvalidArgument)
        if v < d.nb_ind + 1:
            raise Refused(RefcntError)
        d.refcnt = v

    def direct_of(self, h: int) -> int:
        d = self.desc[h]
        return d.direct if d.ol_flags & F_INDIRECT else h

    def _attach(self, mi: int, m: int) -> None:
        a, src = self.desc[mi], self.desc[m]
        md = self.direct_of(m)
        self.desc[md].refcnt += 1
        self.desc[md].nb_ind += 1
        a.priv_size, a.owner, a.buf_len = src.priv_size, src.owner, src.buf_len
        a.direct = md
        a.ol_flags = src.ol_flags | F_INDIRECT
        for f in HEADER:
            setattr(a, f, getattr(src, f))
        a.data_off, a.data_len = src.data_off, src.data_len
        a.next, a.pkt_len, a.nb_segs = NULL, a.data_len, 1

    def pool_arg(self, pool, pools_by_facade) -> PoolM:
        pm = pools_by_facade.get(id(pool))
        if pm is None or pm.dom is not self or not pm.open:
            raise Refused(InvalidArgument, "pool argument")
        return pm

    def clone(self, h: int, pm: PoolM, new: list[int] | None) -> int:
        """Check (``new`` None) or apply (``new``: the handles the facade took, in chain
        order) a clone of packet ``h`` from pool ``pm``."""
        self.require(h)
        segs = self.segs(h)
        for s in segs:
            if self.desc[self.direct_of(s)].refcnt >= REFCNT_MAX:
                raise Refused(RefcntError)
        if self.free_count(pm) < len(segs):
            raise Refused(PoolExhausted)
        if new is None:
            return NULL
        assert len(new) == len(segs)
        for i, (s, c) in enumerate(zip(segs, new)):
            self.alloc(c, pm)
            self._attach(c, s)
            if i:
                self.desc[new[i - 1]].next = c
        self.desc[new[0]].nb_segs = len(segs)
        self.desc[new[0]].pkt_len = self.desc[h].pkt_len
        return new[0]

    def attach(self, mi: int, m: int) -> None:
        a = self.require(mi)
        self.require(m)
        if a.ol_flags & F_NOT_DIRECT or a.refcnt != 1:
            raise Refused(InvalidArgument, "attach needs a direct mbuf with refcnt 1")
        if a.nb_segs != 1 or a.next != NULL:
            raise Refused(InvalidArgument, "single segment")
        if self.direct_of(m) == mi:
            raise Refused(InvalidArgument, "own buffer")
        if self.desc[self.direct_of(m)].refcnt >= REFCNT_MAX:
            raise Refused(RefcntError)
        self._attach(mi, m)

    def detach(self, h: int) -> None:
        d = self.require(h)
        if not d.ol_flags & F_INDIRECT:
            return
        old = d.data_len
        self._detach(h)
        d.pkt_len = max(0, d.pkt_len - old)

    def copy(self, h: int, pm: PoolM, off: int, length, new: list[int] | None) -> int:
        d = self.require(h)
        if off > d.pkt_len:
            raise Refused(OutOfRange)
        length = d.pkt_len - off if length is None else min(length, d.pkt_len - off)
        have = sum(self.desc[s].data_len for s in self.segs(h))
        if have - off < length:
            raise Refused(SanityCheckError)
        room = pm.data_room - pm.headroom
        if length and room <= 0:
            raise Refused(InvalidArgument, "no data room")
        need = 1 if length == 0 else -(-length // room)
        if need > MAX_SEGS:
            raise Refused(ChainTooLong)
        if self.free_count(pm) < need:
            raise Refused(PoolExhausted)
        if new is None:
            return NULL
        data = self.packet_bytes(h)[off:off + length]
        assert len(new) == need, (new, need)
        for i, c in enumerate(new):
            self.alloc(c, pm)
            chunk = data[i * room:(i + 1) * room]
            dc = self.desc[c]
            self.write(c, dc.data_off, chunk)
            dc.data_len = len(chunk)
            if i:
                self.desc[new[i - 1]].next = c
        head = self.desc[new[0]]
        for f in HEADER:
            setattr(head, f, getattr(d, f))
        head.ol_flags = d.ol_flags & ~F_NOT_DIRECT
        head.nb_segs = need
        head.pkt_len = length
        return new[0]

    def set_fields(self, h: int, fields: dict) -> None:
        d = self.require(h)
        for k, v in fields.items():
            bits = SETTABLE.get(k)
            if bits is None or not isinstance(v, int) or isinstance(v, bool) \
                    or not 0 <= v < (1 << bits):
                raise Refused(InvalidArgument, k)
        if "ol_flags" in fields and (fields["ol_flags"] ^ d.ol_flags) & F_NOT_DIRECT:
            raise Refused(InvalidArgument, "kind bits")
        for k, v in fields.items():
            setattr(d, k, v)

    # -- pools -----------------------------------------------------------------------------
    def close_check(self, pm: PoolM, force: bool) -> None:
        in_use = pm.n - self.free_count(pm)
        if in_use and not force:
            from pktbuf import Busy
            raise Refused(Busy)
        if not in_use:
            return
        lo, hi = pm.base, pm.base + pm.n
        for h, d in self.desc.items():
            if not d.alloc:
                continue
            inside = lo <= h < hi
            refs = [d.next] + ([d.direct] if d.ol_flags & F_INDIRECT else [])
            for r in refs:
                if r != NULL and (lo <= r < hi) != inside:
                    from pktbuf import Busy
                    raise Refused(Busy, "linked to another pool")
