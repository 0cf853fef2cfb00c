"""Pool facades: :class:`Mempool` (fixed-size objects) and :class:`PktmbufPool` (mbufs)."""
from __future__ import annotations

import numpy as np

from ...errors import (E_ALREADY, E_BADF, Busy, InvalidArgument, OutOfMemory, PoolExhausted,
                       check_count, check_flag, error_for, raise_for)
from ...lcore import check_lcore, facade_lcore, facade_local
from ..mbuf import raw as RAW
from ..mbuf.layout import DEFAULT_BUF_SIZE, F_INDIRECT, HEADROOM, NULL, PRIV_ALIGN
from ..mempool.layout import OBJ_ALLOC
from ..mempool import kernels as MK
from ..mempool.layout import (CACHE_LINE_WORDS, CACHE_MAX_SIZE, LCORE_ANY, MAX_LCORE, POOL_DTYPE, POOL_F_MBUF,
                              POOL_F_SC_GET, POOL_F_SP_PUT, POOL_F_USED, STAT_NAMES)
from ...shm import PAGE, Region
from ..ring.kernels import RING_HDR_WORDS, ring_count_at, ring_init
from . import entry as E
from .domain import Domain, default_domain
from .mbuf import Mbuf

__all__ = ["Mempool", "PktmbufPool"]

_CACHE_LINE = 64
_I32 = np.dtype(np.int32)
DEFAULT_CACHE_SIZE = 256   # PktmbufPool's cache when none is given (clamped to small pools)


def _ring_size_for(n: int) -> int:
    size = 2
    while size < n + 1:
        size <<= 1
    return size


class Mempool:
    """A pool of ``n`` fixed-size objects (``rte_mempool``) with per-lcore caches.

    Objects are ``int32`` handles; ``obj_view(h)`` is the object's ``elt_size`` bytes in the
    pool's shared region.  ``cache_size`` (0..512, at most ``n``, as DPDK 26.07 requires) is the
    size of each lcore's cache; ``sp_put``/``sc_get`` make the ring single-producer/-consumer.
    Facade calls use the calling thread's lcore (see :mod:`pktbuf.lcore`) unless given one.
    A get of more objects than the pool has raises ``PoolExhausted``, as any get the pool
    cannot satisfy (DPDK: ``-ENOENT``); a negative count ``InvalidArgument``.
    """

    _is_mbuf = False

    def __init__(self, n: int, elt_size: int, cache_size: int = 0, *, domain: Domain | None = None,
                 sp_put: bool = False, sc_get: bool = False, name: str = "mempool"):
        self._closed = True
        n = check_count(n, "n", lo=1, hi=(1 << 31) - 2)
        elt_size = check_count(elt_size, "elt_size", lo=0 if self._is_mbuf else 1, hi=1 << 30)
        cache_size = check_count(cache_size, "cache_size", lo=0, hi=CACHE_MAX_SIZE)
        if cache_size > n:
            raise InvalidArgument(f"cache_size ({cache_size}) must not exceed n ({n})")
        sp_put = check_flag(sp_put, "sp_put")
        sc_get = check_flag(sc_get, "sc_get")
        if not isinstance(name, str):
            raise InvalidArgument(f"name must be a str, got {type(name).__name__}")
        if domain is not None and not isinstance(domain, Domain):
            raise InvalidArgument(f"domain must be a Domain, got {type(domain).__name__}")
        self.domain = domain if domain is not None else default_domain()
        self.name = name
        self.n = n
        self.cache_size = cache_size
        self._closed = True
        stride = max(_CACHE_LINE, (elt_size + _CACHE_LINE - 1)
                     // _CACHE_LINE * _CACHE_LINE)
        self.elt_size = stride
        try:
            # a guard page after every pool's data: running off its last buffer faults
            # instead of writing into the next pool's first one
            self.region = Region(stride * n, f"pktbuf-{name}", window=self.domain.window,
                                 guard=PAGE)
        except (OSError, ValueError) as e:
            raise OutOfMemory(f"cannot map {n} objects of {stride} bytes ({e})") from None
        ring_size = _ring_size_for(n)
        try:
            self.id, self.obj_base, self._ring_base = self.domain._register(self, n, ring_size)
        except BaseException:
            self.region.close()
            raise
        self._ring_size = ring_size
        st = self.domain.state
        st.pools[self.id] = np.zeros((), POOL_DTYPE)     # nothing left of an earlier pool
        p = st.pools[self.id]
        flags = POOL_F_USED | (POOL_F_SP_PUT if sp_put else 0) | (POOL_F_SC_GET if sc_get else 0)
        if self._is_mbuf:
            flags |= POOL_F_MBUF
        p["size"] = n
        p["obj_base"] = self.obj_base
        p["cache_size"] = cache_size
        p["ring_base"] = self._ring_base
        p["ring_size"] = ring_size
        p["elt_size"] = stride
        p["region_addr"] = self.region.address
        p["region_size"] = self.region.size
        self._set_mbuf_fields(p)
        self.domain.stats_view()[self.id] = 0
        # the whole line of each lcore's cache: its length and its busy word
        st.cache_len.reshape(-1, MAX_LCORE, CACHE_LINE_WORDS)[self.id] = 0
        ring_init(self.domain.ring_hdr_view(self.id),
                  st.ring_slots[self._ring_base:self._ring_base + ring_size], ring_size - 1, 0)
        p["flags"] = flags
        MK.mempool_populate(st, self.id, np.empty(n, np.int32))
        if self._is_mbuf:
            RAW.pktmbuf_pool_init(st, self.id)
        self._args = self.domain._args
        self._state = self.domain.state
        self._addr = self._state.address     # for the entry points that take it (entry.py)
        self._bind_fast_paths()
        self._closed = False

    @classmethod
    def _adopt(cls, domain: Domain, pid: int, name: str, region: Region) -> "Mempool":
        """The facade of pool ``pid`` of an attached shared domain, created by another process
        (its description is read from the pool table; ``region`` is its data, mapped here at
        the creator's address).  Closing it only unmaps it here."""
        p = domain.state.pools[pid]
        if int(p["flags"]) & POOL_F_MBUF:
            cls = PktmbufPool
        self = cls.__new__(cls)
        self.domain, self.name, self.region, self.id = domain, name, region, pid
        self.n = int(p["size"])
        self.cache_size = int(p["cache_size"])
        self.elt_size = int(p["elt_size"])
        self.obj_base = int(p["obj_base"])
        self._ring_base = int(p["ring_base"])
        self._ring_size = int(p["ring_size"])
        if cls._is_mbuf:
            self.data_room = int(p["data_room"])
            self.headroom = int(p["headroom"])
            self.priv_size = int(p["priv_size"])
        self._args = domain._args
        self._state = domain.state
        self._addr = self._state.address
        self._bind_fast_paths()
        self._adopted = True
        self._closed = False
        domain._pools[pid] = self
        return self

    def _set_mbuf_fields(self, p) -> None:
        pass

    def _bind_fast_paths(self) -> None:
        if self._is_mbuf:
            # PktmbufPool.free_bulk is Domain.free_bulk: bound here, a facade call skips one
            # Python call layer (~80 ns); the class keeps the method for its documentation
            self.free_bulk = self.domain.free_bulk

    # -- ownership ---------------------------------------------------------------------------
    def owns(self, h: int) -> bool:
        return self.obj_base <= h < self.obj_base + self.n

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgument(f"pool {self.name!r} is closed")

    _lcore = staticmethod(check_lcore)

    def _count_out(self, n, out, what: str) -> tuple[int, np.ndarray]:
        """The count and result array of a get: types first, then a count beyond the pool
        size is exhaustion (as in DPDK), then the room in ``out``."""
        n = check_count(n, "n", lo=0)
        if out is not None:
            self._out_ok(out)
        if n > self.n:
            raise PoolExhausted(f"pool {self.name!r} has {self.n} {what} in all, fewer than {n}")
        return n, self._out(out, n)

    # -- get/put -----------------------------------------------------------------------------
    def get_bulk(self, n: int, *, lcore: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """``n`` objects, all or nothing (``PoolExhausted`` if fewer are available)."""
        self._check_open()
        n, out = self._count_out(n, out, "objects")
        rc = E.fast_get_bulk(*self._args, self.id, self._lcore(lcore), out, n)
        if rc < 0:
            raise PoolExhausted(f"pool {self.name!r}: fewer than {n} objects available", rc)
        return out[:n]

    def put_bulk(self, objs, *, lcore: int | None = None) -> None:
        """Return objects; each must be an object of this pool that is handed out, listed once.
        On a bad entry nothing is returned and ``InvalidHandle``/``DoubleFree`` is raised."""
        self._check_open()
        a = self.domain.handles(objs, "objs")
        rc = E.fast_put_bulk(*self._args, self.id, self._lcore(lcore), a, a.size)
        if rc < 0:
            raise_for(rc, {E_BADF: f"an object is not from pool {self.name!r}",
                           E_ALREADY: "an object is already in the pool (double put)"}.get(rc, ""))

    def get(self, *, lcore: int | None = None) -> int:
        return int(self.get_bulk(1, lcore=lcore)[0])

    def put(self, obj: int, *, lcore: int | None = None) -> None:
        self.put_bulk(np.array([self.domain.handle(obj, "obj")], np.int32), lcore=lcore)

    @staticmethod
    def _out_ok(out) -> None:
        if not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.ndim == 1
                and out.flags.c_contiguous and out.flags.writeable):
            raise InvalidArgument("out must be a writeable contiguous 1-d int32 array")

    @classmethod
    def _out(cls, out, n):
        if out is None:
            return np.empty(n, np.int32)
        cls._out_ok(out)
        if out.size < n:
            raise InvalidArgument(f"out has {out.size} entries, fewer than n ({n})")
        return out

    def obj_view(self, h: int) -> np.ndarray:
        """The ``elt_size`` bytes of object ``h`` (a view into the shared region)."""
        self._check_open()
        h = self.domain.handle(h, "h")
        if not self.owns(h):
            raise error_for(E_BADF, f"{h} is not an object of pool {self.name!r}")
        off = (h - self.obj_base) * self.elt_size
        return self.region.array[off:off + self.elt_size]

    # -- accounting --------------------------------------------------------------------------
    @property
    def avail_count(self) -> int:
        """Objects in the pool: ring plus every lcore cache (a snapshot)."""
        self._check_open()
        return int(E.py_counts(*self._args, self.id)[0])

    @property
    def in_use_count(self) -> int:
        self._check_open()
        return int(E.py_counts(*self._args, self.id)[1])

    def _available_to(self, lc: int) -> int:
        """Objects a get through lcore ``lc`` can take (the ring plus that lcore's cache): a
        sequence of gets of that many in all succeeds if no other thread takes objects."""
        n = int(ring_count_at(self.domain.state.ring_hdr, self.id * RING_HDR_WORDS))
        if 0 <= lc < MAX_LCORE and self.cache_size:
            n += int(self.domain.cache_len_view()[self.id, lc])
        return n

    def cache_flush(self, lcore: int | None = None) -> None:
        """Empty ``lcore``'s cache (default: this thread's) into the ring.  The thread that
        uses that lcore must not be using the pool meanwhile (caches are unlocked, as in
        DPDK)."""
        self._check_open()
        MK.mempool_cache_flush(self.domain.state, self.id, self._lcore(lcore))

    def cache_count(self, lcore: int | None = None) -> int:
        self._check_open()
        lc = self._lcore(lcore)
        return 0 if lc == LCORE_ANY else int(self.domain.cache_len_view()[self.id, lc])

    def stats(self) -> dict:
        """Statistics counters summed over lcores (DPDK's ``rte_mempool`` debug stats names)."""
        self._check_open()
        rows = self.domain.stats_view()[self.id, :, :len(STAT_NAMES)].sum(axis=0)
        return {k: int(v) for k, v in zip(STAT_NAMES, rows)}

    def audit(self) -> int:
        """Check every object is in the pool exactly once or handed out; returns the free count.

        Raises ``PktbufError`` describing the violation otherwise.  Call it while no other
        thread uses the pool.
        """
        self._check_open()
        rc = int(E.py_audit(*self._args, self.id, np.empty(self.n, np.uint8)))
        if rc < 0:
            raise error_for(rc, f"pool {self.name!r} failed its audit: "
                                + ("an object is missing, foreign or present twice" if rc != E_BADF
                                   else "an object's state disagrees with where it is"))
        return rc

    # -- life cycle --------------------------------------------------------------------------
    def close(self, *, force: bool = False) -> None:
        """Destroy the pool.  Raises ``Busy`` if objects are still handed out (unless ``force``).

        Even with ``force``, an mbuf pool is not closed (``Busy``) while mbufs of other pools
        are chained to its mbufs or attached to their buffers, or its mbufs to theirs: closing
        it would leave them pointing at unmapped memory, or strand the other pools' mbufs.
        Handles and :class:`~pktbuf.Mbuf` objects of a closed pool are refused from then on
        (an Mbuf also after the pool id is reused: it records the pool's generation).
        """
        if self._closed:
            return
        force = check_flag(force, "force")
        if getattr(self, "_adopted", False):     # another process's pool: unmap it here only
            self.domain._unregister(self.id, self.obj_base, self.n, self._ring_base,
                                    self._ring_size)
            self._closed = True
            self.region.close()
            return
        if self.domain._close_guard is not None:
            self.domain._close_guard(self)
        st = self.domain.state
        in_use = self.in_use_count          # (objects in lcore caches count as available)
        if in_use and not force:
            raise Busy(f"pool {self.name!r} has {in_use} objects in use")
        if in_use and self._is_mbuf:
            self._check_no_foreign_links()
        # refused calls above change nothing; from here on the pool goes away
        for lc in range(MAX_LCORE):
            MK.mempool_cache_flush(st, self.id, lc)
        st.pools[self.id]["flags"] = 0
        MK.mempool_depopulate(st, self.id)
        self.domain._unregister(self.id, self.obj_base, self.n, self._ring_base, self._ring_size)
        self._closed = True
        self.region.close()

    def _check_no_foreign_links(self) -> None:
        """Busy if an allocated mbuf of another pool links to (``next``) or uses the buffer of
        (``direct``) one of ours, or one of ours to one of theirs."""
        mb = self.domain.state.mb
        lo, hi = self.obj_base, self.obj_base + self.n

        def refs(d, inside: bool) -> bool:
            alloc = d["state"] == OBJ_ALLOC
            nxt = d["next"]
            dr = np.where((d["ol_flags"] & np.uint64(F_INDIRECT)) != 0, d["direct"], NULL)
            if inside:      # points into [lo, hi)
                hit = ((nxt >= lo) & (nxt < hi)) | ((dr >= lo) & (dr < hi))
            else:           # points somewhere outside [lo, hi)
                hit = ((nxt != NULL) & ((nxt < lo) | (nxt >= hi))) | \
                      ((dr != NULL) & ((dr < lo) | (dr >= hi)))
            return bool((alloc & hit).any())

        if refs(mb[lo:hi], inside=False):
            raise Busy(f"pool {self.name!r}: some of its mbufs are chained to or attached to "
                       f"mbufs of other pools; free them first")
        for p in self.domain.pools:
            if p is not self and getattr(p, "_is_mbuf", False):
                if refs(mb[p.obj_base:p.obj_base + p.n], inside=True):
                    raise Busy(f"pool {self.name!r}: mbufs of pool {p.name!r} are chained to or "
                               f"attached to its mbufs; free them first")

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close(force=exc[0] is not None)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"avail={self.avail_count}"
        return f"{type(self).__name__}({self.name!r}, id={getattr(self, 'id', None)}, n={self.n}, {state})"


class PktmbufPool(Mempool):
    """A pool of packet mbufs (``rte_pktmbuf_pool_create``).

    ``cache_size`` is each lcore's cache: by default ``DEFAULT_CACHE_SIZE`` (256), or ``n``
    for pools smaller than that; an explicit value must be at most ``n`` (``InvalidArgument``
    otherwise, as DPDK 26.07 refuses it).

    ``data_room`` is each mbuf's buffer size including headroom (DPDK's default 2176 =
    2048 + 128); ``priv_size`` (a multiple of 8) is an application area in front of each buffer;
    ``headroom`` (default 128) is where the data starts after a reset, capped at ``data_room``.
    Data rooms live in one memfd region (``pool.region``) so they can be shared with a peer.
    """

    _is_mbuf = True

    def __init__(self, n: int, cache_size: int | None = None, data_room: int = DEFAULT_BUF_SIZE,
                 *, priv_size: int = 0, headroom: int = HEADROOM, domain: Domain | None = None,
                 sp_put: bool = False, sc_get: bool = False, name: str = "mbuf_pool"):
        self._closed = True
        self.data_room = check_count(data_room, "data_room", lo=0, hi=0xFFFF)
        self.priv_size = check_count(priv_size, "priv_size", lo=0, hi=0xFFFF)
        if self.priv_size % PRIV_ALIGN:
            raise InvalidArgument(f"priv_size must be a multiple of {PRIV_ALIGN}")
        self.headroom = min(check_count(headroom, "headroom", lo=0, hi=0xFFFF), self.data_room)
        n = check_count(n, "n", lo=1, hi=(1 << 31) - 2)
        if cache_size is None:        # the default, DEFAULT_CACHE_SIZE, lowered for small pools
            cache_size = min(DEFAULT_CACHE_SIZE, n)
        # an explicit size is checked by Mempool: at most n (DPDK refuses more with EINVAL)
        super().__init__(n, self.priv_size + self.data_room, cache_size, domain=domain,
                         sp_put=sp_put, sc_get=sc_get, name=name)

    def _set_mbuf_fields(self, p) -> None:
        p["data_room"] = self.data_room
        p["headroom"] = self.headroom
        p["priv_size"] = self.priv_size

    # -- allocation --------------------------------------------------------------------------
    def alloc(self, *, lcore: int | None = None):
        """One reset mbuf (``rte_pktmbuf_alloc``) as an :class:`~pktbuf.buf.domain.mbuf.Mbuf`."""
        self._check_open()
        h = int(E.fast_alloc(self._addr, self.id, self._lcore(lcore)))
        if h < 0:
            raise PoolExhausted(f"pool {self.name!r} is empty", h)
        return Mbuf._new(self.domain, h, self.id)

    def alloc_bulk(self, n: int, *, lcore: int | None = None, out: np.ndarray | None = None,
                   raw: bool = False) -> np.ndarray:
        """``n`` reset mbuf handles (``rte_pktmbuf_alloc_bulk``), all or nothing.

        ``out`` (an int32 array of at least ``n``) avoids allocating the result array;
        ``raw=True`` skips the per-packet reset (``rte_mbuf_raw_alloc_bulk``).
        """
        # the usual call -- an int count the pool can hold, the thread's lcore, a plain int32
        # result array or none -- is checked here in a few O(1) tests; anything else takes
        # the general argument checks below (which raise)
        if (type(n) is int and 0 <= n <= self.n and lcore is None and not self._closed
                and (raw is False or raw is True)
                and (out is None or (type(out) is np.ndarray and out.dtype is _I32
                                     and out.ndim == 1 and out.size >= n
                                     and out.flags.carray))):
            if out is None:
                out = np.empty(n, np.int32)
            lc = facade_local.lc
            if lc is None:
                lc = facade_lcore()
        else:
            self._check_open()
            n, out = self._count_out(n, out, "mbufs")
            raw = check_flag(raw, "raw")
            lc = self._lcore(lcore)
        fc = E.fast_alloc_bulk
        rc = (fc.entry or fc)(self._addr, self.id, lc, out, n, raw)    # see FastCall.entry
        if rc < 0:
            raise PoolExhausted(f"pool {self.name!r}: fewer than {n} mbufs available", rc)
        return out[:n] if out.size != n else out

    def free_bulk(self, mbufs, *, lcore: int | None = None, staged: bool = False) -> None:
        """Free packets (of this or any other pool of the domain): see :meth:`Domain.free_bulk`
        (the one path: its usual call is one compiled call there)."""
        self.domain.free_bulk(mbufs, lcore=lcore, staged=staged)

    get_bulk = alloc_bulk

    def put_bulk(self, objs, *, lcore: int | None = None) -> None:
        self.free_bulk(objs, lcore=lcore)

    def mbuf(self, h: int):
        """The :class:`~pktbuf.buf.domain.mbuf.Mbuf` for handle ``h`` (which must be allocated)."""
        return Mbuf(self.domain, h)

