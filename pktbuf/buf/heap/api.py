"""An ``rte_malloc``-style heap whose ``free`` zeroes the block before taking the heap lock,
with a per-lcore cache of small freed blocks in front of it.

:class:`Heap` is the facade; the kernels (``heap_malloc``, ``heap_zmalloc``, ``heap_calloc``,
``heap_realloc``, ``heap_free``, ``heap_get_stats``...) are in :mod:`pktbuf.buf.heap.kernels` and
take ``heap.state`` (a block: :data:`~pktbuf.buf.heap.layout.HEAP`), so ``@njit`` code -- several
threads at once -- can call them.  Addresses are plain integers (virtual addresses in this
process); :meth:`Heap.view` turns a block into a NumPy array.

::

    h = Heap(64 << 20)              # 64 MiB
    p = h.zmalloc(1500)             # reads as zeros, no memset needed
    h.view(p)[:4] = (1, 2, 3, 4)
    p = h.realloc(p, 9000)
    h.free(p)                       # zeroed outside the lock, then merged under it
    q = h.malloc(64)                # small: freed into this thread's cache ...
    h.free(q)
    h.malloc(64) == q               # ... and handed out again without the heap lock

Each Python thread uses its own lcore id (:func:`pktbuf.lcore.facade_lcore`, or ``lcore=``);
the blocks its cache holds go back to the shared heap when the thread ends, on
:meth:`Heap.flush_cache`, when some allocation would otherwise fail, and on :meth:`Heap.close`.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from ...errors import (E_ALREADY, E_BADF, E_NOMEM, DoubleFree, InvalidArgument,
                       InvalidHandle, OutOfMemory, SanityCheckError, check_count, check_flag,
                       error_for)
from ...shm import Region
from .audit import heap_find_elem, heap_get_stats, heap_malloc_validate, heap_validate
from .kernels import (heap_cache_flush, heap_init, heap_lcore_free, heap_lcore_malloc,
                      heap_lcore_zmalloc, heap_realloc)
from .layout import (CACHE_BYTES_DEFAULT, CACHE_LARGE_DEFAULT, CACHE_MAX_DEFAULT,
                     ELEM_DTYPE, ELEM_FREE, GRAIN, H_CACHE_BYTES, H_CACHE_GRAINS,
                     H_CACHE_LARGE, H_ZERO_IN_LOCK, HEAP, MAX_GRAINS, STAT_NAMES,
                     VALIDATE_REASONS)
from ...lcore import LCORE_ANY, check_lcore

__all__ = ["Heap", "HEAP", "ELEM_DTYPE", "GRAIN", "STAT_NAMES"]


class _ThreadCaches(threading.local):
    """Per thread and heap: the lcores whose caches this thread filled through the facade,
    each with a guard that flushes that cache when the thread's locals die (thread exit)."""

    def __init__(self):
        self.guards: dict[int, _FlushGuard] = {}


class _FlushGuard:
    __slots__ = ("heap", "lcore")

    def __init__(self, heap: "Heap", lcore: int):
        self.heap = weakref.ref(heap)
        self.lcore = lcore

    def __del__(self):
        h = self.heap()
        if h is not None and not h.closed:
            heap_cache_flush(h.state, self.lcore)


class Heap:
    """A heap of ``size`` bytes (rounded up to 64) in a memfd region.

    Blocks of up to ``cache_max`` bytes (default 4 KiB) freed by a thread are kept, zeroed, in
    that thread's lcore cache and handed out again to that thread's next malloc of the same
    size, without the heap lock; so is the last freed block above that, up to ``cache_large``
    bytes (default 1 MiB; 0: none), one per lcore (see :mod:`pktbuf.buf.heap.cache`).
    ``cache=False`` turns the caches off.  Every call takes ``lcore=`` (default: the calling thread's id,
    :func:`pktbuf.lcore.facade_lcore`; ``LCORE_ANY`` bypasses the cache).

    ``zero_in_lock=True`` clears freed blocks inside the heap lock, as DPDK does, instead of
    before taking it, and has no caches: DPDK's design, kept for comparisons.  ``region`` lets the heap manage an existing
    :class:`~pktbuf.shm.Region` (its whole size); then ``dirty`` defaults to True -- its
    contents are unknown, so zmalloc clears what it hands out until it has been freed once.
    A fresh region is zero-filled by the kernel and starts clean.  Thread safe.

    Every call validates its arguments before a kernel runs: sizes, counts and alignments are
    integers (``InvalidArgument`` otherwise; larger than any heap can hold: ``OutOfMemory``),
    pointers are integers (``InvalidHandle`` otherwise, or when not a block of this heap).
    After :meth:`close` every call raises ``InvalidArgument``.
    """

    _MAX_BYTES = MAX_GRAINS * GRAIN

    def __init__(self, size: int | None = None, *, zero_in_lock: bool = False,
                 cache: bool | None = None, cache_max: int = CACHE_MAX_DEFAULT,
                 cache_large: int = CACHE_LARGE_DEFAULT,
                 region: Region | None = None, dirty: bool | None = None,
                 name: str = "pktbuf-heap"):
        self.region = None
        zero_in_lock = check_flag(zero_in_lock, "zero_in_lock")
        cache = (not zero_in_lock) if cache is None else check_flag(cache, "cache")
        if cache and zero_in_lock:
            raise InvalidArgument("cache=True needs zero_in_lock=False (cached blocks are "
                                  "cleared outside the lock)")
        cache_max = check_count(cache_max, "cache_max", lo=0, hi=CACHE_MAX_DEFAULT)
        cache_large = check_count(cache_large, "cache_large", lo=0, hi=MAX_GRAINS * GRAIN)
        if dirty is not None:
            dirty = check_flag(dirty, "dirty")
        if not isinstance(name, str):
            raise InvalidArgument(f"name must be a str, got {type(name).__name__}")
        if region is not None and not isinstance(region, Region):
            raise InvalidArgument(f"region must be a Region, got {type(region).__name__}")
        if region is None:
            size = check_count(size, "size", lo=1, hi=MAX_GRAINS * GRAIN)
            size = (size + GRAIN - 1) // GRAIN * GRAIN
            try:
                region = Region(size, name)
            except (OSError, ValueError) as e:
                raise OutOfMemory(f"cannot map a heap of {size} bytes ({e})", E_NOMEM) from None
            self._own_region = True
            dirty = bool(dirty)
        else:
            if region.closed:
                raise InvalidArgument("the region is closed")
            if size is not None and check_count(size, "size", lo=1) != region.size:
                raise InvalidArgument("size must be omitted (or equal region.size) with region=")
            if region.size % GRAIN or region.address % GRAIN:
                raise InvalidArgument("the region's size and address must be multiples of 64")
            size = region.size
            self._own_region = False
            dirty = True if dirty is None else bool(dirty)
        self.region = region
        self.size = size
        self.ngrains = size // GRAIN
        self.state = HEAP.create({"elems": self.ngrains})
        rc = heap_init(self.state, region.address, self.ngrains, dirty)
        if rc != 0:  # pragma: no cover - validated above
            raise InvalidArgument(f"heap_init failed ({rc})")
        self.state.ctl[H_ZERO_IN_LOCK] = 1 if zero_in_lock else 0
        self.state.ctl[H_CACHE_GRAINS] = cache_max // GRAIN if cache else 0
        self.state.ctl[H_CACHE_BYTES] = CACHE_BYTES_DEFAULT
        self.state.ctl[H_CACHE_LARGE] = cache_large // GRAIN if cache else 0
        self._threads = _ThreadCaches()

    def _open(self) -> None:
        if self.region is None or self.region.closed:
            raise InvalidArgument("the heap is closed")

    @property
    def closed(self) -> bool:
        return self.region is None or self.region.closed

    @property
    def zero_in_lock(self) -> bool:
        return bool(self.state.ctl[H_ZERO_IN_LOCK])

    @property
    def cache(self) -> bool:
        """Whether freed small blocks are kept in per-lcore caches."""
        return bool(self.state.ctl[H_CACHE_GRAINS] or self.state.ctl[H_CACHE_LARGE])

    @property
    def base(self) -> int:
        self._open()
        return self.region.address

    # -- allocation ---------------------------------------------------------------------------
    def _args(self, size, align):
        self._open()
        size = check_count(size, "size", lo=1)
        align = check_count(align, "align", lo=0)
        if align & (align - 1):
            raise InvalidArgument(f"align must be 0 or a power of two, got {align}")
        if size > self._MAX_BYTES or align > self._MAX_BYTES:
            raise OutOfMemory(f"no heap holds {size} bytes aligned to {align}", E_NOMEM)
        return size, align

    def _result(self, rc: int, what: str) -> int:
        if rc < 0:
            if rc == E_NOMEM:
                raise OutOfMemory(f"{what}: no free block large enough in this heap", rc)
            raise error_for(rc, f"{what}: error {rc}")
        return rc

    def _lcore(self, lcore) -> int:
        """The lcore of a call; remembers it so that the thread's exit flushes its cache."""
        lc = check_lcore(lcore)
        if lc != LCORE_ANY and self.cache:
            guards = self._threads.guards
            if lc not in guards:
                guards[lc] = _FlushGuard(self, lc)
        return lc

    def malloc(self, size: int, align: int = 0, *, lcore=None) -> int:
        """Address of a block of at least ``size`` bytes (contents undefined)."""
        size, align = self._args(size, align)
        lc = self._lcore(lcore)
        return self._result(int(heap_lcore_malloc(self.state, lc, size, align)),
                            f"malloc({size})")

    def zmalloc(self, size: int, align: int = 0, *, lcore=None) -> int:
        """As :meth:`malloc`, and the block reads as zeros."""
        size, align = self._args(size, align)
        lc = self._lcore(lcore)
        return self._result(int(heap_lcore_zmalloc(self.state, lc, size, align)),
                            f"zmalloc({size})")

    def calloc(self, num: int, size: int, align: int = 0, *, lcore=None) -> int:
        num = check_count(num, "num", lo=1)
        size, align = self._args(size, align)
        if num * size > self._MAX_BYTES:
            raise OutOfMemory(f"calloc({num}, {size}): no heap holds {num * size} bytes", E_NOMEM)
        lc = self._lcore(lcore)
        return self._result(int(heap_lcore_zmalloc(self.state, lc, num * size, align)),
                            f"calloc({num}, {size})")

    def realloc(self, ptr: int, size: int, align: int = 0) -> int:
        """Resize a block (``ptr`` 0 allocates); returns its address, which may have moved.
        On ``OutOfMemory`` the old block is untouched."""
        size, align = self._args(size, align)
        ptr = self._ptr(ptr)
        rc = int(heap_realloc(self.state, ptr, size, align))
        if rc in (E_BADF, E_ALREADY):
            self._raise_bad_ptr(ptr, rc, "realloc")
        return self._result(rc, f"realloc({size})")

    # -- freeing ------------------------------------------------------------------------------
    def _ptr(self, ptr) -> int:
        self._open()
        try:
            return check_count(ptr, "ptr", lo=0, hi=(1 << 63) - 1)
        except InvalidArgument as e:
            raise InvalidHandle(str(e)) from None

    def _raise_bad_ptr(self, ptr: int, rc: int, what: str):
        if rc == E_ALREADY:
            raise DoubleFree(f"{what}({ptr:#x}): the block is already free", rc)
        g, st = (int(x) for x in heap_find_elem(self.state, ptr))
        if st == ELEM_FREE and (ptr - self.base) % GRAIN == 0:
            raise DoubleFree(f"{what}({ptr:#x}): that memory is free (freed twice?)", E_ALREADY)
        if g < 0:
            raise InvalidHandle(f"{what}({ptr:#x}): not an address of this heap", rc)
        raise InvalidHandle(f"{what}({ptr:#x}): not the start of a block of this heap "
                            f"(it is inside the element at offset {g * GRAIN:#x})", rc)

    def free(self, ptr: int, *, lcore=None) -> None:
        """Return a block; 0 is ignored.  ``InvalidHandle`` for an address that is not a block
        of this heap, ``DoubleFree`` for one already freed (also while it sits in a cache); the
        heap is unchanged then."""
        ptr = self._ptr(ptr)
        lc = self._lcore(lcore)
        rc = int(heap_lcore_free(self.state, lc, ptr))
        if rc < 0:
            self._raise_bad_ptr(ptr, rc, "free")

    def flush_cache(self, lcore=LCORE_ANY) -> int:
        """Return the blocks held in ``lcore``'s cache (default: every lcore's) to the shared
        heap; the number of blocks.  Safe while other threads use the heap."""
        self._open()
        lc = check_lcore(lcore if lcore is not None else LCORE_ANY)
        return int(heap_cache_flush(self.state, lc))

    # -- inspection ---------------------------------------------------------------------------
    def usable_size(self, ptr: int) -> int:
        """Bytes usable in block ``ptr`` (``rte_malloc_validate``)."""
        ptr = self._ptr(ptr)
        rc = int(heap_malloc_validate(self.state, ptr))
        if rc < 0:
            self._raise_bad_ptr(ptr, rc, "usable_size")
        return rc

    def view(self, ptr: int, n: int | None = None) -> np.ndarray:
        """``n`` bytes (default: the usable size) of block ``ptr`` as a uint8 array view."""
        size = self.usable_size(ptr)
        n = size if n is None else check_count(n, "n", lo=0, hi=size)
        ptr = self._ptr(ptr)
        off = ptr - self.base
        return self.region.array[off:off + n]

    def offset(self, ptr: int) -> int:
        """``ptr`` as an offset in the region (what another process mapping it would use)."""
        return self._ptr(ptr) - self.base

    def stats(self) -> dict:
        """``rte_malloc_get_socket_stats`` fields: sizes in bytes, counts of elements; plus
        ``cached_bytes`` / ``cached_count``, what the lcore caches hold.  Cached blocks count as
        free (``heap_freesz_bytes``), not as allocated; ``free_count`` and
        ``greatest_free_size`` describe the shared heap's free elements."""
        self._open()
        out = np.zeros(len(STAT_NAMES), np.int64)
        heap_get_stats(self.state, out)
        return {k: int(v) for k, v in zip(STAT_NAMES, out)}

    def validate(self, check_zero: bool = False) -> None:
        """Check every invariant (call while no other thread uses the heap); raises
        ``SanityCheckError`` naming the broken rule.  ``check_zero`` also reads all free memory."""
        self._open()
        info = np.zeros(2, np.int64)
        rc = int(heap_validate(self.state, check_flag(check_zero, "check_zero"), info))
        if rc < 0:
            err = SanityCheckError(f"heap invalid: {VALIDATE_REASONS.get(int(info[0]), info[0])} "
                                   f"(grain {int(info[1])})", rc)
            err.reason = int(info[0])
            raise err

    def close(self) -> None:
        """Flush every lcore cache into the heap (on a region the heap does not own, the heap's
        memory is then left as if every block had been freed), then unmap the heap's region (if
        the heap created it); every later call is refused."""
        if self.region is None:
            return
        heap_cache_flush(self.state, LCORE_ANY)
        if self._own_region:
            self.region.close()
        self.region = None

    def __repr__(self) -> str:
        if self.closed:
            return "Heap(closed)"
        s = self.stats()
        return (f"Heap(size={self.size}, free={s['heap_freesz_bytes']}, "
                f"alloc_count={s['alloc_count']}, cached={s['cached_count']}, "
                f"zero_in_lock={self.zero_in_lock})")

