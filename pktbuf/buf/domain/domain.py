"""The domain facade: the arrays every pool lives in, pool bookkeeping and bulk free."""
from __future__ import annotations

import os
import threading

import numpy as np

from ...errors import (E_ALREADY, E_BADF, E_FAULT, E_NOMEM, InvalidArgument, InvalidHandle,
                       OutOfMemory, SharedDomainError, check_count, check_flag, check_handle,
                       check_handles, raise_for)
from ...lcore import check_lcore, facade_lcore, facade_local
from .dynfield import DynRegistry
from ..mbuf import layout as _mbuf_layout  # noqa: F401  (registers dom.mb)
from ..mbuf.free import install_free_paths
from ..mempool.layout import (CACHE_LINE_WORDS, CACHE_MAX_SIZE, CFG_DEBUG, DOMAIN, MAX_LCORE,
                              MAX_POOLS, STAT_WORDS)
from ...shm import PAGE, Window
from ..ring.kernels import RING_HDR_WORDS
from . import entry as E

__all__ = ["Domain", "default_domain", "set_debug"]

_I32 = np.dtype(np.int32)
_DEBUG_DEFAULT = os.environ.get("PKTBUF_DEBUG", "") not in ("", "0")


class _Ranges:
    """First-fit allocator of index ranges in [0, cap) (objects, ring slots)."""

    def __init__(self, cap: int, align: int = 1):
        self.cap = cap
        self.align = align
        self.free = [(0, cap)]   # sorted (start, length)

    def alloc(self, n: int) -> int | None:
        a = self.align
        for i, (s, ln) in enumerate(self.free):
            start = (s + a - 1) // a * a
            pad = start - s
            if ln - pad >= n:
                rest = []
                if pad:
                    rest.append((s, pad))
                if ln - pad - n:
                    rest.append((start + n, ln - pad - n))
                self.free[i:i + 1] = rest
                return start
        return None

    def release(self, start: int, n: int) -> None:
        self.free.append((start, n))
        self.free.sort()
        merged = []
        for s, ln in self.free:
            if merged and merged[-1][0] + merged[-1][1] == s:
                merged[-1] = (merged[-1][0], merged[-1][1] + ln)
            else:
                merged.append((s, ln))
        self.free = merged


class Domain:
    """The descriptor table and the pool, ring, cache and statistics arrays of a set of pools.

    Mbuf handles are indices into this domain's table, so one ``free_bulk`` call can return
    mbufs of several pools.  Most programs need one domain: :func:`default_domain`.
    Every array is reserved at its maximum size and committed lazily; ``max_objects`` bounds the
    total number of objects (mbufs) of all pools, ``max_ring_slots`` the total ring size.

    ``max_data_bytes`` bounds the data rooms of all its pools together (address space only:
    the domain reserves one window for its tables and every pool's data, so each address it
    stores has a fixed place; nothing is committed until used).  ``shared=True`` puts the tables
    in a memfd, so another process can map the domain at the same address.

    ``state`` is the domain handle to pass to kernels (``dom``).
    """

    def __init__(self, max_objects: int = 1 << 22, max_ring_slots: int = 1 << 23, *,
                 max_data_bytes: int = 16 << 30, shared: bool = False,
                 debug: bool | None = None):
        max_objects = check_count(max_objects, "max_objects", lo=1, hi=(1 << 31) - 1)
        max_ring_slots = check_count(max_ring_slots, "max_ring_slots", lo=2, hi=1 << 31)
        if debug is not None:
            debug = check_flag(debug, "debug")
        max_data_bytes = check_count(max_data_bytes, "max_data_bytes", lo=0, hi=1 << 46)
        counts = {"obj": max_objects, "ring_slots": max_ring_slots}
        tables = DOMAIN.place(counts)[1]
        # one window: the tables, a guard page, then every pool's data rooms
        try:
            self.window = Window(tables + PAGE + max_data_bytes)
        except OSError as e:
            raise OutOfMemory(f"cannot reserve {tables + max_data_bytes:#x} bytes of address "
                              f"space for a domain ({e.strerror}): lower max_objects or "
                              "max_data_bytes") from None
        self.state = DOMAIN.create(counts, shared=shared, window=self.window, offset=0,
                                   name="pktbuf-domain")
        self.window.reserve(PAGE, offset=tables)      # guard between tables and data
        self._objs = _Ranges(max_objects)
        self._rings = _Ranges(max_ring_slots, align=16)
        self._pools: dict[int, object] = {}
        # generation of each pool id: +1 every time the id is registered, so an Mbuf that
        # recorded (pool id, generation) can tell that its pool was closed, even after the id
        # and the handle range were reused by a new pool
        self._gens = [0] * MAX_POOLS
        self._lock = threading.Lock()
        self.debug = _DEBUG_DEFAULT if debug is None else debug
        self._args = (self.state,)
        self._addr = self.state.address  # for the entry points that take it (entry.py)
        self._tls = threading.local()   # per-thread scratch for the free dry run
        self.dyn = DynRegistry()        # dynamic mbuf fields and flags
        self._close_guard = None        # set by a SharedDomain: may a pool close now?
        install_free_paths()            # what the free kernels call through the call table

    @classmethod
    def _attached(cls, window: Window, state) -> "Domain":
        """The facade of a domain another process created, whose window and tables this
        process has mapped at the same addresses (:class:`pktbuf.SharedDomain` does it).
        Pools are not created here: the creator's allocators own the object and ring ranges."""
        self = cls.__new__(cls)
        self.window = window
        self.state = state
        self._objs = self._rings = None
        self._pools = {}
        self._gens = [0] * MAX_POOLS
        self._lock = threading.Lock()
        self._args = (state,)
        self._addr = state.address
        self._tls = threading.local()
        self.dyn = DynRegistry()
        self._close_guard = None
        install_free_paths()
        return self

    # -- configuration ---------------------------------------------------------------------
    @property
    def debug(self) -> bool:
        """Kernels of this domain run their sanity checks (cost: a few checks per call)."""
        return bool(self.state.cfg[CFG_DEBUG])

    @debug.setter
    def debug(self, on: bool) -> None:
        self.state.cfg[CFG_DEBUG] = 1 if check_flag(on, "debug") else 0

    # shaped views of the flat arrays, for inspection
    def ring_hdr_view(self, pid: int) -> np.ndarray:
        pid = check_count(pid, "pid", lo=0, hi=MAX_POOLS - 1)
        return self.state.ring_hdr[pid * RING_HDR_WORDS:(pid + 1) * RING_HDR_WORDS]

    def cache_len_view(self) -> np.ndarray:
        """int32[MAX_POOLS, MAX_LCORE]: objects in each lcore cache of each pool."""
        return self.state.cache_len.reshape(MAX_POOLS, MAX_LCORE, CACHE_LINE_WORDS)[:, :, 0]

    def cache_objs_view(self) -> np.ndarray:
        return self.state.cache_objs.reshape(MAX_POOLS, MAX_LCORE, CACHE_MAX_SIZE)

    def stats_view(self) -> np.ndarray:
        """int64[MAX_POOLS, MAX_LCORE + 1, STAT_WORDS]."""
        return self.state.stats.reshape(MAX_POOLS, MAX_LCORE + 1, STAT_WORDS)

    @property
    def pools(self) -> list:
        """Live pools, by id."""
        return [self._pools[k] for k in sorted(self._pools)]

    def pool_of(self, handle):
        """The pool object that owns ``handle`` (an mbuf or mempool object, or an Mbuf)."""
        h = self.handle(handle)
        if 0 <= h < self.state.mb.size:
            pid = int(self.state.mb[h]["pool"])
            p = self._pools.get(pid)
            if p is not None and p.owns(h):
                return p
        raise InvalidHandle(f"{h} is not an object of a live pool of this domain")

    def generation(self, pid: int) -> int:
        """How many times pool id ``pid`` has been registered in this domain."""
        return self._gens[check_count(pid, "pid", lo=0, hi=MAX_POOLS - 1)]

    # -- handle arguments --------------------------------------------------------------------
    def handle(self, h, name: str = "handle") -> int:
        """One handle argument as an int: an int (any integer type), or an :class:`Mbuf` of
        this domain that is still valid (not stale, not from another domain).  Anything else
        raises InvalidHandle.  Whether an int names a live mbuf is checked by the calls."""
        if type(h) is int and -0x80000000 <= h <= 0x7FFFFFFF:
            return h
        if getattr(h, "_is_mbuf_facade", False):
            h._check_domain(self)
            h._valid()
            return h.handle
        return check_handle(h, name)

    def handles(self, objs, name: str = "handles"):
        """An array-of-handles argument as a 1-d contiguous int32 array (see
        :func:`pktbuf.errors.check_handles`); Mbuf elements are checked as :meth:`handle`
        does."""
        return check_handles(objs, name, item=lambda x: self.handle(x, name))

    # -- pool registration (used by the pool classes) -----------------------------------------
    def _register(self, pool, n: int, ring_size: int) -> tuple[int, int, int]:
        if self._objs is None:
            raise SharedDomainError("pools of a shared domain are created by the process that "
                                    "created the domain (SharedDomain.create); attached "
                                    "processes find them by name (SharedDomain.pool)")
        with self._lock:
            pid = next((i for i in range(MAX_POOLS) if i not in self._pools), None)
            if pid is None:
                raise InvalidArgument(f"a domain holds at most {MAX_POOLS} pools")
            base = self._objs.alloc(n)
            if base is None:
                raise InvalidArgument(f"no room for {n} more objects in this domain "
                                      f"(max_objects={self._objs.cap})")
            rbase = self._rings.alloc(ring_size)
            if rbase is None:
                self._objs.release(base, n)
                raise InvalidArgument(f"no room for a ring of {ring_size} slots in this domain")
            self._pools[pid] = pool
            self._gens[pid] += 1
            return pid, base, rbase

    def _unregister(self, pid: int, base: int, n: int, rbase: int, ring_size: int) -> None:
        with self._lock:
            self._pools.pop(pid, None)
            if self._objs is None:      # an attached process only forgets its mapping
                return
            self._objs.release(base, n)
            self._rings.release(rbase, ring_size)

    # -- bulk free across pools ------------------------------------------------------------
    def free_bulk(self, mbufs, *, lcore: int | None = None, staged: bool = False) -> None:
        """Free the packets in ``mbufs`` (handles; ``-1`` entries are skipped), of any pools.

        The whole array is validated first: an unknown handle raises ``InvalidHandle``, a double
        free (or an mbuf listed more often than it is referenced) ``DoubleFree``, a corrupt
        packet ``SanityCheckError`` -- and then nothing at all is freed.
        ``staged=True`` uses DPDK's staged algorithm instead of the run-grouped one.
        """
        if (type(mbufs) is np.ndarray and mbufs.dtype is _I32 and mbufs.ndim == 1
                and mbufs.flags.carray and lcore is None and staged is False):
            # the usual call: its arguments checked in O(1) here, the handles by the compiled
            # entry point, in O(n) for the usual array -- one compiled call in all
            fc = E.fast_free_bulk_simple
            lc = facade_local.lc
            if lc is None:
                lc = facade_lcore()
            rc = (fc.entry or fc)(self._addr, lc, mbufs, mbufs.size)
            if rc == 0:
                return
            if rc < 0:
                raise_for(rc, _free_msg(rc))
            a, lc = mbufs, facade_lcore()       # E.FREE_NEEDS_CHECK: the full check below
        else:
            a = self.handles(mbufs, "mbufs")
            lc = check_lcore(lcore)
            staged = check_flag(staged, "staged")
        scratch = getattr(self._tls, "scratch", None)
        if scratch is None:
            scratch = self._tls.scratch = np.empty(2048, np.int32)
        free = E.fast_free_bulk_staged if staged else E.fast_free_bulk
        rc = free(*self._args, lc, a, a.size, scratch)
        if rc == E_NOMEM:   # more segments than the scratch holds (long chains): size it
            scratch = np.empty(int(E.py_scratch_size(*self._args, a, a.size)), np.int32)
            rc = free(*self._args, lc, a, a.size, scratch)
        if rc < 0:
            raise_for(rc, _free_msg(rc))

    def __repr__(self) -> str:
        cap = self.state.mb.size if self._objs is None else self._objs.cap
        return f"Domain(pools={len(self._pools)}, max_objects={cap})"


def _free_msg(rc: int) -> str:
    return {E_BADF: "not an mbuf of a live pool of this domain",
            E_ALREADY: "double free: an mbuf is already free or listed more often than referenced",
            E_FAULT: "a packet failed its sanity check"}.get(rc, f"free failed ({rc})")


_default: Domain | None = None
_default_lock = threading.Lock()


def default_domain() -> Domain:
    """The process-wide domain that pools use unless given another."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Domain()
    return _default


def set_debug(on: bool = True) -> None:
    """Turn kernel sanity checks on or off for the default domain and every new domain.

    The switch is data, not a compile-time constant, so it takes effect immediately and never
    invalidates the compiled cache.  Also settable with the environment variable
    ``PKTBUF_DEBUG=1``.
    """
    global _DEBUG_DEFAULT
    _DEBUG_DEFAULT = bool(on)
    if _default is not None:
        _default.debug = on
