"""The software distributor for plain Python: :class:`Distributor`.

    dist = Distributor(pool, workers=2)               # DPDK's common key, 128-entry RETA
    k = dist.distribute(mbufs)                        # mbufs[:k] handed over; mbufs[k:] yours
    got = dist.worker_burst(0, 32)                    # worker 0's packets

For a single-queue port whose traffic is spread over workers: one thread or process receives
and distributes, each worker takes its own ring.  Compiled loops call the kernels of
:mod:`pktbuf.net.distrib` (:mod:`pktbuf.kernels`) with :attr:`Distributor.state`.  ``shared=True``
puts the distributor in a memfd (``fd``, ``nbytes``) that a worker process maps with
:meth:`Distributor.attach`; the mbufs themselves must then live in a domain both processes map
(docs/rss.md, "Distributor").
"""
from __future__ import annotations

import os

import numpy as np

from .kernels import (distributor_burst, distributor_return_burst,
                      distributor_returned_pkts, distributor_ring_count,
                      distributor_worker_burst, distributor_worker_done)
from .layout import (BURST_MAX, D_HASH, D_L4, D_MAGIC, D_RING_SIZE, D_STOP, D_WORKERS,
                     DISTRIB, MAGIC, MAX_WORKERS, W_DEQ, W_DONE, W_ENQ, W_FULL, W_RET,
                     W_RETD)
from ...errors import InvalidArgument, check_count, check_flag
from ...buf.ring.kernels import RING_F_SC_DEQ, RING_F_SP_ENQ, RING_HDR_WORDS, ring_init
from ...shm import Region
from ..rss.api import Rss, domain_state

__all__ = ["Distributor"]


class Distributor:
    """Spread packets over ``workers`` rings by RSS (``rss``: an :class:`Rss`; default
    ``Rss(queues=workers)``, whose redirection table must name only workers ``< workers``).

    ``use_mbuf_hash``: take each packet's hash from the mbuf (``RTE_MBUF_F_RX_RSS_HASH`` set
    by a port or by :meth:`Rss.hash_bulk`; without the flag the packet goes to ``reta[0]``)
    instead of hashing it here.  ``ring_size``: slots per worker ring, a power of two (holds
    ``ring_size - 1`` packets).
    """

    def __init__(self, domain, workers: int, *, rss: Rss | None = None, ring_size: int = 1024,
                 use_mbuf_hash: bool = False, shared: bool = False):
        self.domain, self._dom = domain_state(domain)
        nw = check_count(workers, "workers", lo=1, hi=MAX_WORKERS)
        size = check_count(ring_size, "ring_size", lo=2, hi=1 << 20)
        if size & (size - 1):
            raise InvalidArgument(f"ring_size must be a power of two, got {size}")
        use_mbuf_hash = check_flag(use_mbuf_hash, "use_mbuf_hash")
        shared = check_flag(shared, "shared")
        if rss is None:
            rss = Rss(queues=nw)
        elif not isinstance(rss, Rss):
            raise InvalidArgument(f"rss must be an Rss, got {type(rss).__name__}")
        if int(rss.reta.max()) >= nw:
            raise InvalidArgument(f"the redirection table names worker {int(rss.reta.max())}; "
                                  f"this distributor has {nw} (make the Rss with queues={nw})")
        self.rss = rss
        self.state = DISTRIB.create({"reta": rss.reta.size, "slots": nw * size,
                                     "rslots": nw * size}, shared=shared,
                                    name="pktbuf-distributor")
        d = self.state
        d.lut[:] = rss.table
        d.reta[:] = rss.reta
        for w in range(nw):
            for hdr, slots in ((d.hdr, d.slots), (d.rhdr, d.rslots)):
                rc = ring_init(hdr[w * RING_HDR_WORDS:(w + 1) * RING_HDR_WORDS],
                               slots[w * size:(w + 1) * size], size - 1,
                               RING_F_SP_ENQ | RING_F_SC_DEQ)
                if rc != 0:  # pragma: no cover - arguments were validated above
                    raise InvalidArgument(f"ring_init failed ({rc})")
        d.cfg[D_WORKERS] = nw
        d.cfg[D_RING_SIZE] = size
        d.cfg[D_HASH] = 0 if use_mbuf_hash else 1
        d.cfg[D_L4] = 1 if rss.l4 else 0
        d.cfg[D_MAGIC] = MAGIC
        self.workers = nw
        self.ring_size = size
        self._closed = False
        self._retired: set[int] = set()

    # -- sharing -----------------------------------------------------------------------------
    @property
    def fd(self) -> int:
        """The memfd of a ``shared=True`` distributor (pass it to the worker process)."""
        fd = getattr(self.state.memory, "fd", None)
        if fd is None:
            raise InvalidArgument("this distributor is not shared (make it with shared=True)")
        return fd

    @property
    def nbytes(self) -> int:
        return self.state.memory.size

    @classmethod
    def attach(cls, domain, fd: int, nbytes: int, *, pid: int | None = None) -> "Distributor":
        """The distributor another process made with ``shared=True`` (its ``fd`` and
        ``nbytes``), for this process's workers: ``fd`` is this process's descriptor, or,
        with ``pid``, the number of process ``pid``'s (opened through ``/proc/<pid>/fd``; a
        worker started with ``spawn`` has no inherited descriptors).  Its header and
        configuration are checked before use."""
        fd = check_count(fd, "fd", lo=0, hi=(1 << 31) - 1)
        nbytes = check_count(nbytes, "nbytes", lo=1, hi=1 << 40)
        if pid is not None:
            pid = check_count(pid, "pid", lo=1, hi=(1 << 31) - 1)
            try:
                own = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
            except OSError as e:
                raise InvalidArgument(f"cannot open process {pid}'s fd {fd} ({e.strerror})") \
                    from None
            try:
                return cls.attach(domain, own, nbytes)
            finally:
                os.close(own)
        try:
            if os.fstat(fd).st_size < nbytes:
                raise InvalidArgument(f"fd {fd} holds fewer than {nbytes} bytes")
            region = Region.attach(fd, nbytes, "pktbuf-distributor-peer")
        except (OSError, ValueError) as e:
            raise InvalidArgument(f"cannot map a distributor from fd {fd} ({e})") from None
        st = DISTRIB.attach(region)
        cfg = st.cfg
        nw, size = int(cfg[D_WORKERS]), int(cfg[D_RING_SIZE])
        if (int(cfg[D_MAGIC]) != MAGIC or not 1 <= nw <= MAX_WORKERS or size < 2
                or size & (size - 1) or st.slots.size != nw * size
                or st.rslots.size != nw * size or st.reta.size < 1
                or st.reta.size & (st.reta.size - 1) or int(st.reta.max()) >= nw):
            raise InvalidArgument(f"fd {fd} does not hold a valid distributor")
        self = cls.__new__(cls)
        self.domain, self._dom = domain_state(domain)
        self.rss = None
        self.state = st
        self.workers = nw
        self.ring_size = size
        self._closed = False
        self._retired = set()
        return self

    # -- data path -----------------------------------------------------------------------------
    def distribute(self, mbufs) -> int:
        """Hand the packets of ``mbufs`` (an int32 array of handles, at most 1024) to their
        workers.  Returns ``k``: ``mbufs[:k]`` (reordered in place when some were refused)
        are now the workers'; ``mbufs[k:]`` were refused because their worker's ring was
        full and are still the caller's."""
        self._open()
        if not (isinstance(mbufs, np.ndarray) and mbufs.dtype == np.int32 and mbufs.ndim == 1):
            raise InvalidArgument("mbufs must be a 1-d int32 array of handles (it is "
                                  "reordered in place)")
        if mbufs.size > BURST_MAX:
            raise InvalidArgument(f"at most {BURST_MAX} packets per call, got {mbufs.size}")
        a = self.domain.handles(mbufs, "mbufs")
        if (a == -1).any():
            raise InvalidArgument("mbufs holds a NULL handle (-1)")
        Rss._check(self._dom, a)
        return int(distributor_burst(self._dom, self.state, mbufs, mbufs.size))

    def worker_burst(self, worker: int, n: int = 32) -> np.ndarray:
        """Up to ``n`` packets from ``worker``'s ring (handles, now the caller's)."""
        self._open()
        w = self._worker(worker)
        n = check_count(n, "n", lo=0, hi=1 << 20)
        out = np.empty(n, np.int32)
        k = int(distributor_worker_burst(self.state, w, out, n))
        return out[:k]

    def worker_done(self, worker: int, n: int) -> None:
        """Worker ``worker`` has finished with ``n`` more packets (freed or passed on): with
        what it took, the distributor knows how many it holds (``stats()``'s ``in_hand``)."""
        self._open()
        distributor_worker_done(self.state, self._worker(worker),
                                check_count(n, "n", lo=0, hi=1 << 40))

    def return_burst(self, worker: int, mbufs) -> int:
        """Worker ``worker`` hands ``mbufs`` (int32 handles) back to the distributing side
        (``returned()``), as a pipeline's way to its Tx stage; returns ``k``: ``mbufs[:k]``
        went, the rest are still the worker's (its return ring was full)."""
        self._open()
        w = self._worker(worker)
        a = self.domain.handles(mbufs, "mbufs")
        if (a == -1).any():
            raise InvalidArgument("mbufs holds a NULL handle (-1)")
        Rss._check(self._dom, a)
        return int(distributor_return_burst(self.state, w, a, a.size))

    def returned(self, n: int = 32) -> np.ndarray:
        """The distributing side: up to ``n`` packets the workers handed back (every worker's
        return ring in turn)."""
        self._open()
        n = check_count(n, "n", lo=0, hi=1 << 20)
        out = np.empty(n, np.int32)
        return out[:int(distributor_returned_pkts(self.state, out, n))]

    def pending(self, worker: int) -> int:
        """Packets waiting in ``worker``'s ring."""
        return int(distributor_ring_count(self.state, self._worker(worker)))

    def stats(self) -> list[dict]:
        """Per worker: ``enqueued`` (handed to its ring), ``ring_full`` (refused, left with
        the caller), ``dequeued`` (taken by the worker), ``done`` (finished with, as the worker
        reports, returned ones included), ``in_hand`` (dequeued - done), ``pending`` (in the
        ring now), ``returned`` (handed back by the worker), ``collected`` (of those, taken by
        the distributing side)."""
        st, wst = self.state.st, self.state.wst
        return [{"enqueued": int(st[w, W_ENQ]), "ring_full": int(st[w, W_FULL]),
                 "dequeued": int(wst[w, W_DEQ]), "done": int(wst[w, W_DONE]),
                 "returned": int(wst[w, W_RET]), "collected": int(st[w, W_RETD]),
                 "in_hand": int(wst[w, W_DEQ] - wst[w, W_DONE]), "pending": self.pending(w)}
                for w in range(self.workers)]

    # -- stopping the workers ---------------------------------------------------------------
    def request_stop(self) -> None:
        """Tell the workers to finish (a word they read with :attr:`stop_requested`)."""
        self._open()
        self.state.cfg[D_STOP] = 1

    @property
    def stop_requested(self) -> bool:
        return bool(self.state.cfg[D_STOP])

    # -- a worker that died --------------------------------------------------------------------
    def retire(self, worker: int) -> None:
        """Send ``worker``'s flows to the other live workers from the next burst on (its
        redirection-table entries are spread over them round robin).  Call it from the
        distributing thread, between bursts.  InvalidArgument if no worker would be left."""
        self._open()
        w = self._worker(worker)
        self._retired.add(w)
        live = [x for x in range(self.workers) if x not in self._retired]
        if not live:
            self._retired.discard(w)
            raise InvalidArgument("retiring the last live worker")
        reta = self.state.reta
        k = 0
        for i in range(reta.size):
            if int(reta[i]) in self._retired:
                reta[i] = live[k % len(live)]
                k += 1

    def reclaim(self, worker: int) -> int:
        """Free the packets left in the ring of ``worker``, which must be dead (its ring has
        one consumer: taking it over while that consumer runs would corrupt it).  Returns how
        many; they count as done, so ``in_hand`` is then what the dead worker held itself."""
        self._open()
        w = self._worker(worker)
        n = 0
        while True:
            got = self.worker_burst(w, 256)
            if got.size == 0:
                return n
            self.domain.free_bulk(got)
            self.worker_done(w, got.size)
            n += got.size

    def _worker(self, worker) -> int:
        return check_count(worker, "worker", lo=0, hi=self.workers - 1)

    def _open(self) -> None:
        if self._closed:
            raise InvalidArgument("the distributor is closed")

    # -- teardown ---------------------------------------------------------------------------------
    def drain(self) -> int:
        """Free every packet still in the workers' rings and in their return rings (call when
        no worker runs any more); returns how many."""
        self._open()
        n = sum(self.reclaim(w) for w in range(self.workers))
        while True:
            got = self.returned(256)
            if got.size == 0:
                return n
            self.domain.free_bulk(got)
            n += got.size

    def close(self) -> None:
        """Drain the rings (their packets go back to their pools) and release the memory."""
        if self._closed:
            return
        self.drain()
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"Distributor(workers={self.workers}, ring_size={self.ring_size})"
