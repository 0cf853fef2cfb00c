"""Pool facades: :class:`Mempool` (fixed-size objects) and :class:`PktmbufPool` (mbufs)."""
from __future__ import annotations

import numpy as np

from ..errors import (E_ALREADY, E_BADF, Busy, InvalidArgument, PoolExhausted, check_count,
                      check_handles, error_for, raise_for)
from ..lcore import facade_lcore
from ..mbuf import raw as RAW
from ..mbuf.layout import DEFAULT_BUF_SIZE, HEADROOM, PRIV_ALIGN
from ..mempool import kernels as MK
from ..mempool.layout import (CACHE_MAX_SIZE, LCORE_ANY, MAX_LCORE, POOL_DTYPE, POOL_F_MBUF,
                              POOL_F_SC_GET, POOL_F_SP_PUT, POOL_F_USED, STAT_NAMES)
from ..shm import Region
from ..ring.kernels import ring_init
from . import _entry as E
from .domain import Domain, default_domain

__all__ = ["Mempool", "PktmbufPool"]

_CACHE_LINE = 64


def _ring_size_for(n: int) -> int:
    size = 2
    while size < n + 1:
        size <<= 1
    return size


class Mempool:
    """A pool of ``n`` fixed-size objects (``rte_mempool``) with per-lcore caches.

    Objects are ``int32`` handles; ``obj_view(h)`` is the object's ``elt_size`` bytes in the
    pool's shared region.  ``cache_size`` (0..512, at most ``n``) is the size of each lcore's
    cache; ``sp_put``/``sc_get`` make the ring single-producer/-consumer.
    Facade calls use the calling thread's lcore (see :mod:`pktbuf.lcore`) unless given one.
    """

    _is_mbuf = False

    def __init__(self, n: int, elt_size: int, cache_size: int = 0, *, domain: Domain | None = None,
                 sp_put: bool = False, sc_get: bool = False, name: str = "mempool"):
        n = check_count(n, "n", lo=1, hi=(1 << 31) - 2)
        elt_size = check_count(elt_size, "elt_size", lo=0 if self._is_mbuf else 1, hi=1 << 30)
        cache_size = check_count(cache_size, "cache_size", lo=0, hi=CACHE_MAX_SIZE)
        if cache_size > n:
            raise InvalidArgument(f"cache_size ({cache_size}) must not exceed n ({n})")
        self.domain = domain if domain is not None else default_domain()
        self.name = name
        self.n = n
        self.cache_size = cache_size
        self._closed = True
        stride = max(_CACHE_LINE, (elt_size + _CACHE_LINE - 1)
                     // _CACHE_LINE * _CACHE_LINE)
        self.elt_size = stride
        self.region = Region(stride * n, f"pktbuf-{name}", window=self.domain.window)
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
        self.domain.cache_len_view()[self.id] = 0
        ring_init(self.domain.ring_hdr_view(self.id),
                  st.ring_slots[self._ring_base:self._ring_base + ring_size], ring_size - 1, 0)
        p["flags"] = flags
        MK.mempool_populate(st, self.id, np.empty(n, np.int32))
        if self._is_mbuf:
            RAW.pktmbuf_pool_init(st, self.id)
        self._args = self.domain._args
        self._closed = False

    def _set_mbuf_fields(self, p) -> None:
        pass

    # -- ownership ---------------------------------------------------------------------------
    def owns(self, h: int) -> bool:
        return self.obj_base <= h < self.obj_base + self.n

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgument(f"pool {self.name!r} is closed")

    @staticmethod
    def _lcore(lcore) -> int:
        if lcore is None:
            return facade_lcore()
        lc = check_count(lcore, "lcore", lo=LCORE_ANY, hi=MAX_LCORE - 1)
        return lc

    # -- get/put -----------------------------------------------------------------------------
    def get_bulk(self, n: int, *, lcore: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """``n`` objects, all or nothing (``PoolExhausted`` if fewer are available)."""
        self._check_open()
        n = check_count(n, "n", lo=0, hi=self.n)
        out = self._out(out, n)
        rc = E.fast_get_bulk(*self._args, self.id, self._lcore(lcore), out, n)
        if rc < 0:
            raise PoolExhausted(f"pool {self.name!r}: fewer than {n} objects available", rc)
        return out[:n]

    def put_bulk(self, objs, *, lcore: int | None = None) -> None:
        """Return objects; each must be an object of this pool that is handed out, listed once.
        On a bad entry nothing is returned and ``InvalidHandle``/``DoubleFree`` is raised."""
        self._check_open()
        a = check_handles(objs, "objs")
        rc = E.fast_put_bulk(*self._args, self.id, self._lcore(lcore), a, a.size)
        if rc < 0:
            raise_for(rc, {E_BADF: f"an object is not from pool {self.name!r}",
                           E_ALREADY: "an object is already in the pool (double put)"}.get(rc, ""))

    def get(self, *, lcore: int | None = None) -> int:
        return int(self.get_bulk(1, lcore=lcore)[0])

    def put(self, obj: int, *, lcore: int | None = None) -> None:
        self.put_bulk(np.array([obj], np.int32), lcore=lcore)

    @staticmethod
    def _out(out, n):
        if out is None:
            return np.empty(n, np.int32)
        if not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.ndim == 1
                and out.flags.c_contiguous and out.flags.writeable and out.size >= n):
            raise InvalidArgument("out must be a writeable contiguous int32 array of at least n entries")
        return out

    def obj_view(self, h: int) -> np.ndarray:
        """The ``elt_size`` bytes of object ``h`` (a view into the shared region)."""
        h = int(h)
        if not self.owns(h):
            raise error_for(E_BADF, f"{h} is not an object of pool {self.name!r}")
        off = (h - self.obj_base) * self.elt_size
        return self.region.array[off:off + self.elt_size]

    # -- accounting --------------------------------------------------------------------------
    @property
    def avail_count(self) -> int:
        """Objects in the pool: ring plus every lcore cache (a snapshot)."""
        return int(E.py_counts(*self._args, self.id)[0])

    @property
    def in_use_count(self) -> int:
        return int(E.py_counts(*self._args, self.id)[1])

    def cache_flush(self, lcore: int | None = None) -> None:
        """Empty ``lcore``'s cache (default: this thread's) into the ring."""
        MK.mempool_cache_flush(self.domain.state, self.id, self._lcore(lcore))

    def cache_count(self, lcore: int | None = None) -> int:
        lc = self._lcore(lcore)
        return 0 if lc == LCORE_ANY else int(self.domain.cache_len_view()[self.id, lc])

    def stats(self) -> dict:
        """Statistics counters summed over lcores (DPDK's ``rte_mempool`` debug stats names)."""
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
        """Destroy the pool.  Raises ``Busy`` if objects are still handed out (unless ``force``)."""
        if self._closed:
            return
        st = self.domain.state
        for lc in range(MAX_LCORE):
            MK.mempool_cache_flush(st, self.id, lc)
        in_use = self.in_use_count
        if in_use and not force:
            raise Busy(f"pool {self.name!r} has {in_use} objects in use")
        st.pools[self.id]["flags"] = 0
        MK.mempool_depopulate(st, self.id)
        self.domain._unregister(self.id, self.obj_base, self.n, self._ring_base, self._ring_size)
        self._closed = True
        self.region.close()

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

    ``data_room`` is each mbuf's buffer size including headroom (DPDK's default 2176 =
    2048 + 128); ``priv_size`` (a multiple of 8) is an application area in front of each buffer;
    ``headroom`` (default 128) is where the data starts after a reset, capped at ``data_room``.
    Data rooms live in one memfd region (``pool.region``) so they can be shared with a peer.
    """

    _is_mbuf = True

    def __init__(self, n: int, cache_size: int = 256, data_room: int = DEFAULT_BUF_SIZE, *,
                 priv_size: int = 0, headroom: int = HEADROOM, domain: Domain | None = None,
                 sp_put: bool = False, sc_get: bool = False, name: str = "mbuf_pool"):
        self.data_room = check_count(data_room, "data_room", lo=0, hi=0xFFFF)
        self.priv_size = check_count(priv_size, "priv_size", lo=0, hi=0xFFFF)
        if self.priv_size % PRIV_ALIGN:
            raise InvalidArgument(f"priv_size must be a multiple of {PRIV_ALIGN}")
        self.headroom = min(check_count(headroom, "headroom", lo=0, hi=0xFFFF), self.data_room)
        n = check_count(n, "n", lo=1, hi=(1 << 31) - 2)
        cache_size = check_count(cache_size, "cache_size", lo=0, hi=CACHE_MAX_SIZE)
        super().__init__(n, self.priv_size + self.data_room, min(cache_size, n), domain=domain,
                         sp_put=sp_put, sc_get=sc_get, name=name)

    def _set_mbuf_fields(self, p) -> None:
        p["data_room"] = self.data_room
        p["headroom"] = self.headroom
        p["priv_size"] = self.priv_size

    # -- allocation --------------------------------------------------------------------------
    def alloc(self, *, lcore: int | None = None):
        """One reset mbuf (``rte_pktmbuf_alloc``) as an :class:`~pktbuf.api.mbuf.Mbuf`."""
        self._check_open()
        h = int(E.fast_alloc(*self._args, self.id, self._lcore(lcore)))
        if h < 0:
            raise PoolExhausted(f"pool {self.name!r} is empty", h)
        from .mbuf import Mbuf
        return Mbuf(self.domain, h)

    def alloc_bulk(self, n: int, *, lcore: int | None = None, out: np.ndarray | None = None,
                   raw: bool = False) -> np.ndarray:
        """``n`` reset mbuf handles (``rte_pktmbuf_alloc_bulk``), all or nothing.

        ``out`` (an int32 array of at least ``n``) avoids allocating the result array;
        ``raw=True`` skips the per-packet reset (``rte_mbuf_raw_alloc_bulk``).
        """
        self._check_open()
        n = check_count(n, "n", lo=0, hi=self.n)
        out = self._out(out, n)
        rc = E.fast_alloc_bulk(*self._args, self.id, self._lcore(lcore), out, n, raw)
        if rc < 0:
            raise PoolExhausted(f"pool {self.name!r}: fewer than {n} mbufs available", rc)
        return out[:n] if out.size != n else out

    def free_bulk(self, mbufs, *, lcore: int | None = None, staged: bool = False) -> None:
        """Free packets (of this or any other pool of the domain): see :meth:`Domain.free_bulk`."""
        self.domain.free_bulk(mbufs, lcore=lcore, staged=staged)

    get_bulk = alloc_bulk

    def put_bulk(self, objs, *, lcore: int | None = None) -> None:
        self.free_bulk(objs, lcore=lcore)

    def mbuf(self, h: int):
        """The :class:`~pktbuf.api.mbuf.Mbuf` for handle ``h`` (which must be allocated)."""
        from .mbuf import Mbuf
        return Mbuf(self.domain, h)

