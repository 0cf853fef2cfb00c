"""An ``rte_malloc``-style heap whose ``free`` zeroes the block before taking the heap lock.

:class:`Heap` is the facade; the kernels (``heap_malloc``, ``heap_zmalloc``, ``heap_calloc``,
``heap_realloc``, ``heap_free``, ``heap_get_stats``...) are in :mod:`pktbuf.heap.kernels` and
take ``heap.state`` (a block: :data:`~pktbuf.heap.layout.HEAP`), so ``@njit`` code -- several
threads at once -- can call them.  Addresses are plain integers (virtual addresses in this
process); :meth:`Heap.view` turns a block into a NumPy array.

::

    h = Heap(64 << 20)              # 64 MiB
    p = h.zmalloc(1500)             # reads as zeros, no memset needed
    h.view(p)[:4] = (1, 2, 3, 4)
    p = h.realloc(p, 9000)
    h.free(p)                       # zeroed outside the lock, then merged under it
"""
from __future__ import annotations

import numpy as np

from ..errors import (E_ALREADY, E_BADF, E_NOMEM, DoubleFree, InvalidArgument,
                      InvalidHandle, OutOfMemory, SanityCheckError, check_count, check_flag,
                      error_for)
from ..shm import Region
from ..heap.audit import heap_find_elem, heap_get_stats, heap_malloc_validate, heap_validate
from ..heap.kernels import (heap_calloc, heap_free, heap_init, heap_malloc, heap_realloc,
                           heap_zmalloc)
from ..heap.layout import (ELEM_DTYPE, ELEM_FREE, GRAIN, H_ZERO_IN_LOCK, HEAP, MAX_GRAINS,
                     STAT_NAMES, VALIDATE_REASONS)

__all__ = ["Heap", "HEAP", "ELEM_DTYPE", "GRAIN", "STAT_NAMES"]


class Heap:
    """A heap of ``size`` bytes (rounded up to 64) in a memfd region.

    ``zero_in_lock=True`` clears freed blocks inside the heap lock, as DPDK does, instead of
    before taking it (for comparisons).  ``region`` lets the heap manage an existing
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
                 region: Region | None = None, dirty: bool | None = None,
                 name: str = "pktbuf-heap"):
        self.region = None
        zero_in_lock = check_flag(zero_in_lock, "zero_in_lock")
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

    def malloc(self, size: int, align: int = 0) -> int:
        """Address of a block of at least ``size`` bytes (contents undefined)."""
        size, align = self._args(size, align)
        return self._result(int(heap_malloc(self.state, size, align)), f"malloc({size})")

    def zmalloc(self, size: int, align: int = 0) -> int:
        """As :meth:`malloc`, and the block reads as zeros."""
        size, align = self._args(size, align)
        return self._result(int(heap_zmalloc(self.state, size, align)), f"zmalloc({size})")

    def calloc(self, num: int, size: int, align: int = 0) -> int:
        num = check_count(num, "num", lo=1)
        size, align = self._args(size, align)
        if num * size > self._MAX_BYTES:
            raise OutOfMemory(f"calloc({num}, {size}): no heap holds {num * size} bytes", E_NOMEM)
        return self._result(int(heap_calloc(self.state, num, size, align)),
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

    def free(self, ptr: int) -> None:
        """Return a block; 0 is ignored.  ``InvalidHandle`` for an address that is not a block
        of this heap, ``DoubleFree`` for one already freed; the heap is unchanged then."""
        ptr = self._ptr(ptr)
        rc = int(heap_free(self.state, ptr))
        if rc < 0:
            self._raise_bad_ptr(ptr, rc, "free")

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
        """``rte_malloc_get_socket_stats`` fields: sizes in bytes, counts of elements."""
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
        """Unmap the heap's region (if the heap created it); every later call is refused."""
        if self.region is None:
            return
        if self._own_region:
            self.region.close()
        self.region = None

    def __repr__(self) -> str:
        if self.closed:
            return "Heap(closed)"
        s = self.stats()
        return (f"Heap(size={self.size}, free={s['heap_freesz_bytes']}, "
                f"alloc_count={s['alloc_count']}, zero_in_lock={self.zero_in_lock})")

