"""A domain in shared memory that other processes attach to: :class:`SharedDomain`.

The process that creates the domain (the *primary*, DPDK's word) owns its allocators: it
creates every pool and ring, each under a name.  Other processes (*secondaries*) attach by the
domain's name or by a passed fd, map the same memory at the same addresses, claim an lcore id
that no other attached process holds, and find pools and rings by name.  See
``docs/multiprocess.md`` for the design, the windows a killed process cannot be survived in,
and what :meth:`SharedDomain.reap` reports about a dead one.

This module holds the class, its creation, attachment, detach and close, and the pools and
rings by name.  The rest it inherits: the header's layout, the socket that serves it and the
registry (:mod:`pktbuf.buf.domain.shared_header`), the lcore table (:mod:`pktbuf.buf.domain.shared_lcores`),
peer liveness, reaping and reclaim (:mod:`pktbuf.buf.domain.shared_peers`, with :class:`PeerReport`)
and warming and spawning workers (:mod:`pktbuf.buf.domain.shared_workers`).
"""
from __future__ import annotations

import os
import socket
import threading

import numpy as np

from ...errors import Busy, InvalidArgument, LayoutMismatch, NoSuchDomain, check_count
from ...lcore import LCORE_ANY, MAX_LCORE, set_auto_floor
from ..mempool import kernels as MK
from ..mempool.layout import DOMAIN, MAX_POOLS, POOL_F_USED
from ...shm import Region, Window
from .domain import Domain
from .pools import Mempool, PktmbufPool
from ..ring.api import Ring
from .shared_header import (E_FREE, E_LIVE, HDR_WORDS, HEADER_SIZE, K_POOL, K_REGION, K_RING,
                            K_TABLES,
                            LAYOUT_VERSION, MAGIC, MAX_ENTRIES, ST_CLOSED, ST_LIVE, W_BASE,
                            W_DOMSIG, W_MAGIC, W_PRIMARY, W_PRIMARY_START, W_STATE, W_VERSION,
                            W_WSIZE, _HeaderChannel, _sock_addr)
from .shared_lcores import _LcoreTable
from .shared_peers import PeerReport, _PeerWatch, _alive, _starttime
from .shared_workers import _Workers

__all__ = ["SharedDomain", "PeerReport", "LAYOUT_VERSION"]


class SharedDomain(_HeaderChannel, _LcoreTable, _PeerWatch, _Workers):
    """A :class:`~pktbuf.Domain` in shared memory, created by one process and attached to by
    others.

    Primary::

        sd = pktbuf.SharedDomain.create("fwd0")
        pool = sd.pktmbuf_pool("mbufs", 4096)
        ring = sd.create_ring("to-worker1", 1024, sp=True, sc=True)
        p = sd.spawn(worker_main, args=(1,))        # warms the kernels, starts with "spawn"

    Worker (``worker_main(sd, *args)`` runs attached; or attach by hand)::

        sd = pktbuf.SharedDomain.attach("fwd0")     # claims a free lcore id, binds this thread
        pool, ring = sd.pool("mbufs"), sd.ring("to-worker1")
        ...
        sd.detach()

    ``domain`` is the :class:`~pktbuf.Domain` (its ``state`` is what kernels take); ``lcore``
    the id this process claimed, bound to the thread that created or attached.  Only the
    primary creates pools and rings (also after workers attached: they find new ones by name);
    a secondary that tries gets :class:`~pktbuf.errors.SharedDomainError`.
    """

    # -- creation / attachment ---------------------------------------------------------------
    def __init__(self):
        raise InvalidArgument("use SharedDomain.create(name) or SharedDomain.attach(name)")

    @classmethod
    def create(cls, name: str, *, max_objects: int = 1 << 20, max_ring_slots: int = 1 << 21,
               max_data_bytes: int = 4 << 30, lcore: int = 0) -> "SharedDomain":
        """Create the domain and serve it under ``name``; this process becomes its primary
        and claims lcore ``lcore`` (bound to the calling thread)."""
        addr = _sock_addr(name)
        lcore = check_count(lcore, "lcore", lo=0, hi=MAX_LCORE - 1)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            listener.bind(addr)
        except OSError:
            listener.close()
            raise Busy(f"a shared domain named {name!r} exists already (its socket "
                       f"@{addr[1:]} is taken)") from None
        self = cls.__new__(cls)
        try:
            self._init_common(name, primary=True)
            self.domain = Domain(max_objects, max_ring_slots, max_data_bytes=max_data_bytes,
                                 shared=True)
            self.header = Region(HEADER_SIZE, f"pktbuf-shdom-{name}")
            self._map_header()
            w = self._hdr
            w[W_VERSION] = LAYOUT_VERSION
            w[W_DOMSIG] = DOMAIN.signature
            w[W_BASE] = self.domain.window.base
            w[W_WSIZE] = self.domain.window.size
            w[W_PRIMARY] = self.pid
            w[W_PRIMARY_START] = _starttime(self.pid) or 0
            mem = self.domain.state.memory
            self._set_entry(0, K_TABLES, name, -1, 0, mem.fd, mem.size, 0)
            self._objs[0] = self.domain
            w[W_STATE] = ST_LIVE
            w[W_MAGIC] = MAGIC
            self.domain._close_guard = self._pool_closing
            self._claim_lcores(lcore)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        listener.listen(16)
        self._server = threading.Thread(target=self._serve, name=f"pktbuf-domain-{name}",
                                        daemon=True)
        self._server.start()
        return self

    @classmethod
    def attach(cls, name: str | None = None, *, fd: int | None = None,
               lcore: int | None = None) -> "SharedDomain":
        """Attach to the shared domain ``name`` (or the one whose header memfd is ``fd``).

        Claims ``lcore`` (default: the lowest id no attached process holds) for this process
        and binds the calling thread to it; other threads of this process use ``LCORE_ANY``.
        Raises :class:`~pktbuf.errors.NoSuchDomain` when there is no such domain,
        :class:`~pktbuf.errors.LayoutMismatch` when it was made by another layout version,
        :class:`~pktbuf.AddressInUse` when its address range is taken in this process,
        :class:`~pktbuf.errors.LcoreBusy` when ``lcore`` is held by a live process and
        :class:`~pktbuf.errors.PeerDied` when it is held by a dead one not yet reaped.
        """
        if (name is None) == (fd is None):
            raise InvalidArgument("give the domain's name or its header fd, not both")
        if lcore is not None:
            lcore = check_count(lcore, "lcore", lo=0, hi=MAX_LCORE - 1)
        self = cls.__new__(cls)
        self._init_common(name, primary=False)
        if name is not None:
            self._addr = _sock_addr(name)
            hfd = self._ask(b"HELLO")
        else:
            fd = check_count(fd, "fd", lo=0, hi=(1 << 31) - 1)
            hfd = os.dup(fd)
        try:
            self._attach_header(hfd)
        except BaseException:
            self._close_io()
            raise
        try:
            w = self._hdr
            self.name = self._entry_name(0) or name
            window = Window.attach(int(w[W_BASE]), int(w[W_WSIZE]))
            tfd = self._fetch(0)
            tables = Region.attach(tfd, int(self._ent[0]["size"]), window=window, offset=0)
            self._check_inode(0, tables.fd)
            self.domain = Domain._attached(window, DOMAIN.attach(tables))
            self._objs[0] = self.domain
            self._claim_lcores(lcore)
        except BaseException:
            self._close_io()
            raise
        return self

    def _init_common(self, name, primary: bool):
        self.name = name
        self.primary = primary
        self.pid = os.getpid()
        self.lcore = LCORE_ANY
        self._lcores: list[int] = []
        self._binding = None
        self._floor = None
        self._addr = None
        self._listener = None
        self._server = None
        self._lock = threading.RLock()
        self._objs: dict[int, object] = {}     # entry index -> pool / ring / domain (mapped)
        self._pidfds: dict[int, int] = {}
        self._closed = False
        self._warmed = False
        self.header = None

    def _attach_header(self, hfd: int):
        try:
            size = os.fstat(hfd).st_size
        except OSError as e:
            os.close(hfd)
            raise NoSuchDomain(f"fd {hfd} is not a shared domain ({e.strerror})") from None
        if size < HDR_WORDS * 8:
            os.close(hfd)
            raise NoSuchDomain("the fd is not a pktbuf shared domain (too small)")
        probe = np.frombuffer(os.pread(hfd, 24, 0), np.int64)
        if probe.size < 3 or int(probe[W_MAGIC]) != MAGIC:
            os.close(hfd)
            raise NoSuchDomain("the fd is not a pktbuf shared domain (no magic)")
        if int(probe[W_VERSION]) != LAYOUT_VERSION or int(probe[W_DOMSIG]) != DOMAIN.signature:
            os.close(hfd)
            raise LayoutMismatch(
                f"the shared domain has layout version {int(probe[W_VERSION])} (domain "
                f"signature {int(probe[W_DOMSIG]):#x}); this pktbuf reads version "
                f"{LAYOUT_VERSION} (signature {DOMAIN.signature:#x}): run the same pktbuf in "
                "every process")
        if size < HEADER_SIZE:
            os.close(hfd)
            raise LayoutMismatch("the shared domain's header is smaller than this version's")
        self.header = Region.attach(hfd, HEADER_SIZE, "pktbuf-shdom-peer")
        self._map_header()
        w = self._hdr
        if int(w[W_STATE]) != ST_LIVE:
            raise NoSuchDomain("the shared domain has been closed by its creator")
        if not _alive(int(w[W_PRIMARY]), int(w[W_PRIMARY_START])):
            raise NoSuchDomain(f"the shared domain's creator (pid {int(w[W_PRIMARY])}) has "
                               "died")

    # -- pools and rings by name -----------------------------------------------------------
    def _add_pool(self, name, make):
        self._open()
        with self._lock:
            i = self._new_entry(name)
            pool = make()
            self._base[:, pool.id, :] = 0
            self._lost[pool.id] = 0
            r = pool.region
            self._set_entry(i, K_POOL, name, pool.id, self.domain.generation(pool.id), r.fd,
                            r.size, r.address - self.domain.window.base)
            self._objs[i] = pool
            return pool

    def pktmbuf_pool(self, name: str, n: int, cache_size: int | None = None, **kw) -> PktmbufPool:
        """Create a :class:`~pktbuf.PktmbufPool` in the domain under ``name`` (primary only;
        ``kw`` as for PktmbufPool)."""
        return self._add_pool(name, lambda: PktmbufPool(n, cache_size, domain=self.domain,
                                                        name=name, **kw))

    def mempool(self, name: str, n: int, elt_size: int, cache_size: int = 0, **kw) -> Mempool:
        """Create a :class:`~pktbuf.Mempool` in the domain under ``name`` (primary only)."""
        return self._add_pool(name, lambda: Mempool(n, elt_size, cache_size, domain=self.domain,
                                                    name=name, **kw))

    def create_ring(self, name: str, count: int, *, sp: bool = False, sc: bool = False,
                    exact: bool = True) -> Ring:
        """Create a shared :class:`~pktbuf.Ring` under ``name`` (primary only).  Prefer
        ``sp=True, sc=True`` rings, one per producer/consumer pair: a process killed inside a
        multi-producer or multi-consumer call breaks the ring for everyone (see
        docs/multiprocess.md); a single-producer/-consumer ring has no such window."""
        self._open()
        with self._lock:
            i = self._new_entry(name)
            ring = Ring(count, sp=sp, sc=sc, exact=exact, shared=True, name=f"pktbuf-{name}")
            self._set_entry(i, K_RING, name, -1, 0, ring.fd, ring.nbytes, -1)
            self._objs[i] = ring
            return ring

    def add_region(self, name: str, region: Region) -> None:
        """Register ``region`` (a :class:`~pktbuf.shm.Region`: a memfd, such as the memory of
        a table block made with ``shared=True``) under ``name`` (primary only), so that every
        attached process can map it with :meth:`region`.  The domain keeps a reference to it
        while it is open; the library that made it says what its bytes mean (see
        ``pktbuf.Lpm(..., domain=)``)."""
        if not isinstance(region, Region) or getattr(region, "fd", None) is None:
            raise InvalidArgument("add_region takes a memfd Region (a block made with "
                                  f"shared=True), got {type(region).__name__}")
        self._open()
        with self._lock:
            i = self._new_entry(name)
            self._set_entry(i, K_REGION, name, -1, 0, region.fd, region.size, -1)
            self._objs[i] = region

    def region(self, name: str) -> Region:
        """The region registered as ``name`` (mapped into this process on first use, at an
        address of its own: a region holds no pointers)."""
        return self._lookup(name, K_REGION, "region")

    def pool(self, name: str) -> Mempool:
        """The pool registered as ``name`` (mapped into this process on first use)."""
        return self._lookup(name, K_POOL, "pool")

    def ring(self, name: str) -> Ring:
        """The ring registered as ``name`` (mapped into this process on first use)."""
        return self._lookup(name, K_RING, "ring")

    def names(self) -> dict:
        """``{"pools": [...], "rings": [...], "regions": [...]}``: what the domain has
        registered."""
        out = {"pools": [], "rings": [], "regions": []}
        key = {K_POOL: "pools", K_RING: "rings", K_REGION: "regions"}
        for i in range(1, MAX_ENTRIES):
            e = self._ent[i]
            if int(e["state"]) == E_LIVE and int(e["kind"]) in key:
                out[key[int(e["kind"])]].append(self._entry_name(i))
        return out

    def _lookup(self, name, kind, what):
        self._open()
        with self._lock:
            i = self._find(name, kind) if isinstance(name, str) else None
            if i is None:
                raise InvalidArgument(f"no {what} named {name!r} in shared domain {self.name!r}")
            obj = self._objs.get(i)
            e = self._ent[i]
            if obj is not None:
                return obj
            fd = self._fetch(i)
            try:
                self._check_inode(i, fd)
            except BaseException:
                os.close(fd)
                raise
            if kind == K_RING:
                obj = Ring.attach(fd, int(e["size"]))
            elif kind == K_REGION:
                obj = Region.attach(fd, int(e["size"]), f"pktbuf-{name}")
            else:
                pid = int(e["pool"])
                region = Region.attach(fd, int(e["size"]), f"pktbuf-{name}",
                                       window=self.domain.window, offset=int(e["offset"]))
                obj = Mempool._adopt(self.domain, pid, name, region)
                self.domain._gens[pid] = int(e["gen"])
            self._objs[i] = obj
            return obj

    def _pool_closing(self, pool) -> None:
        """Called by a pool of this domain before it closes (primary): refused while other
        processes are attached (they may hold its mbufs and have its memory mapped)."""
        if not self._closed:
            others = [p for p, _ in self._owners() if p != self.pid]
            if others:
                raise Busy(f"pool {pool.name!r} of shared domain {self.name!r} cannot close "
                           f"while processes {sorted(set(others))} are attached")
        with self._lock:
            for i, o in list(self._objs.items()):
                if o is pool:
                    self._ent[i]["state"] = E_FREE
                    del self._objs[i]

    @property
    def header_fd(self) -> int:
        """The header memfd: pass it to a process that attaches with ``attach(fd=...)``."""
        self._open()
        return self.header.fd

    # -- teardown --------------------------------------------------------------------------
    def _open(self):
        if self._closed:
            raise InvalidArgument(f"shared domain {self.name!r} is detached/closed")

    def _close_io(self):
        self._addr = None
        if self.header is not None:
            self.header.close()
            self.header = None

    def detach(self) -> None:
        """Leave the domain (a secondary): flush this process's lcore caches into the
        pools, give up its lcore ids, unmap what it mapped.  Mbufs it still holds stay
        allocated (they are the application's)."""
        if self._closed:
            return
        if self.primary:
            raise InvalidArgument("the primary closes the domain (close()), it does not detach")
        st = self.domain.state
        for p in range(MAX_POOLS):
            if int(st.pools[p]["flags"]) & POOL_F_USED and int(st.pools[p]["cache_size"]):
                for lc in self._lcores:
                    MK.mempool_cache_flush(st, p, lc)
        self._drop_binding()
        self._release_lcores()
        for o in list(self._objs.values()):
            if isinstance(o, (Mempool, Ring)):
                o.close()
        self._objs.clear()
        self._closed = True
        self._close_io()

    def _drop_binding(self):
        if self._floor is not None:
            set_auto_floor(self._floor)
            self._floor = None
        if self._binding is not None:
            try:
                self._binding.release()
            except InvalidArgument:
                pass                      # another thread: the binding dies with its thread
            self._binding = None

    def close(self, *, force: bool = False) -> None:
        """Close the domain (the primary): refused (Busy) while other processes are
        attached and alive, unless ``force``; dead ones are reaped first.  Closes every
        registered pool (with ``force``) and ring and stops serving the name."""
        if self._closed:
            return
        if not self.primary:
            raise InvalidArgument("a secondary detaches (detach()); only the primary closes")
        if self.dead_peers():
            self.reap()
        alive = [p for p, d in self.peers().items() if d["alive"]]
        if alive and not force:
            raise Busy(f"processes {alive} are still attached to shared domain {self.name!r}")
        self._hdr[W_STATE] = ST_CLOSED
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        self._closed = True
        for i, o in sorted(self._objs.items()):
            if isinstance(o, Mempool):
                o.close(force=force)
            elif isinstance(o, Ring):
                o.close()
        self._objs.clear()
        self._drop_binding()
        self._release_lcores()
        self._close_io()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.primary:
            self.close(force=exc[0] is not None)
        else:
            self.detach()

    def __repr__(self) -> str:
        role = "primary" if self.primary else "secondary"
        state = "closed" if self._closed else f"lcore={self.lcore}"
        return f"SharedDomain({self.name!r}, {role}, {state})"
