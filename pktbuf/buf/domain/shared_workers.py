"""Worker processes of a :class:`~pktbuf.SharedDomain`: warming the kernels and spawning.

Several processes compiling the same cached Numba function at once can corrupt Numba's cache,
so the primary compiles (or loads) the kernels workers use before it starts any
(:meth:`_Workers.warm`), then starts each with multiprocessing's ``spawn`` method, attached to
the domain (:meth:`_Workers.spawn`).  These are methods :class:`~pktbuf.SharedDomain` inherits.
"""
from __future__ import annotations

import multiprocessing

import numpy as np

from ...lcore import LCORE_ANY
from ..mempool.peers import slot_cas, slot_load, slot_store
from .domain import Domain
from .pools import Mempool, PktmbufPool
from ..ring.api import Ring
from .shared_header import LC_WORDS


class _Workers:
    """Warming and spawning workers of a :class:`~pktbuf.SharedDomain` (a mixin)."""

    def warm(self, extra=None) -> None:
        """Compile (or load from the cache) the kernels that attached processes use, here,
        before starting them: several processes compiling the same cached function at once can
        corrupt Numba's cache.  ``extra`` (a callable) warms the workers' own kernels.
        :meth:`spawn` calls it."""
        if not self._warmed:
            warm_kernels()
            self._warmed = True
        if extra is not None:
            extra()

    def spawn(self, target, args=(), *, lcore: int | None = None, warm=None,
              daemon: bool = True):
        """Start ``target(sd, *args)`` in a new process (multiprocessing's ``spawn`` method)
        attached to this domain, with ``lcore`` (default: the lowest free id); it detaches
        when ``target`` returns or raises.  Warms the kernels first (:meth:`warm`; ``warm``
        is passed on as ``extra``).  ``target`` must be picklable (a module-level function).
        Returns the started ``multiprocessing.Process``."""
        self._open()
        self.warm(warm)
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=_worker_main,
                        args=(type(self), self.name, lcore, target, tuple(args)),
                        daemon=daemon, name=f"pktbuf-worker-{self.name}")
        p.start()
        return p


def _worker_main(cls, name, lcore, target, args):
    """A spawned worker: attach to the domain (``cls`` is the :class:`~pktbuf.SharedDomain`
    class, passed by reference so that this module need not import the one that uses it),
    run ``target``, detach."""
    sd = cls.attach(name, lcore=lcore)
    try:
        return target(sd, *args)
    finally:
        sd.detach()


def warm_kernels() -> None:
    """Run each facade path a worker uses once, on a small private domain."""
    d = Domain(max_objects=4096, max_ring_slots=8192, max_data_bytes=1 << 22)
    pool = PktmbufPool(64, 8, domain=d, name="warm")
    mp = Mempool(16, 64, 4, domain=d, name="warm-objs")
    try:
        for lc in (1, LCORE_ANY):
            h = pool.alloc_bulk(12, lcore=lc)
            pool.free_bulk(h, lcore=lc)
            o = mp.get_bulk(6, lcore=lc)
            mp.put_bulk(o, lcore=lc)
        m = pool.alloc(lcore=1)
        m.append_bytes(b"x")
        m.tobytes()
        pool.free_bulk([m.handle], lcore=1)
        pool.cache_flush(1)
        pool.audit(), pool.avail_count, pool.in_use_count
        mp.audit()
        r = Ring(16, shared=True)
        a = np.arange(4, dtype=np.int32)
        r.enqueue_bulk(a), r.enqueue_burst(a), r.dequeue_bulk(4), r.dequeue_burst(8)
        len(r), r.free_count
        r.close()
        t = np.zeros(LC_WORDS, np.int64)
        slot_cas(t, 0, 0, 1), slot_load(t, 0), slot_store(t, 0, 0)
    finally:
        mp.close(force=True)
        pool.close(force=True)
