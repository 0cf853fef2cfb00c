"""Lock-free rings of object indices (``rte_ring`` semantics).

:class:`Ring` is the Python facade; the kernels in :mod:`pktbuf.buf.ring.kernels` take the ring's two
arrays (``ring.hdr``, ``ring.slots``) and can be called from a user's own ``@njit`` code.
A ring created with ``shared=True`` lives in a memfd region; another process maps it with
:meth:`Ring.attach` and both sides use the same lock-free protocol.
"""
from __future__ import annotations

import os

import numpy as np

from ...errors import InvalidArgument, check_count, check_flag, check_handle, check_handles
from ...shm import Region
from . import kernels as K
from .kernels import (RING_F_EXACT_SZ, RING_F_SC_DEQ, RING_F_SP_ENQ, RING_HDR_WORDS, RING_MAGIC,
                      RING_SZ_MASK)

__all__ = ["Ring", "RING_F_SP_ENQ", "RING_F_SC_DEQ", "RING_F_EXACT_SZ"]

_HDR_BYTES = RING_HDR_WORDS * 4


def _size_for(count: int) -> int:
    size = 1
    while size < count:
        size <<= 1
    return size


class Ring:
    """A ring of int32 objects.

    With ``exact=True`` (the default, DPDK's ``RING_F_EXACT_SZ``) the ring holds exactly
    ``count`` objects and its slot array is the next power of two.  With ``exact=False`` it
    follows ``rte_ring_create``: ``count`` must be a power of two and the ring holds
    ``count - 1``.  ``sp``/``sc`` select single-producer / single-consumer mode for the
    unprefixed calls (``enqueue_bulk`` etc.).  ``shared=True`` places the ring in a memfd region
    that other processes can :meth:`attach`.

    Every call validates its arguments before a kernel runs (``InvalidArgument`` for bad
    counts, flags and arrays, ``InvalidHandle`` for objects that are not int32 integers); after
    :meth:`close` every data-path call raises ``InvalidArgument``.
    """

    def __init__(self, count: int, *, sp: bool = False, sc: bool = False, exact: bool = True,
                 shared: bool = False, name: str = "pktbuf-ring"):
        self.region = None
        self.hdr = self.slots = None
        count = check_count(count, "count", lo=1, hi=RING_SZ_MASK - 1)
        sp, sc = check_flag(sp, "sp"), check_flag(sc, "sc")
        exact, shared = check_flag(exact, "exact"), check_flag(shared, "shared")
        if not isinstance(name, str):
            raise InvalidArgument(f"name must be a str, got {type(name).__name__}")
        if exact:
            size, capacity = _size_for(count), count
        elif count & (count - 1) or count < 2:
            raise InvalidArgument(f"count must be a power of two >= 2 without exact=True, got {count}")
        else:
            size, capacity = count, count - 1
        flags = (RING_F_SP_ENQ if sp else 0) | (RING_F_SC_DEQ if sc else 0) | (RING_F_EXACT_SZ if exact else 0)
        if shared:
            self.region = Region(_HDR_BYTES + 4 * size, name)
            self._bind(self.region.array)
        else:
            self.hdr = np.zeros(RING_HDR_WORDS, np.uint32)
            self.slots = np.zeros(size, np.int32)
        rc = K.ring_init(self.hdr, self.slots, capacity, flags)
        if rc != 0:  # pragma: no cover - arguments were validated above
            raise InvalidArgument(f"ring_init failed ({rc})")

    def _bind(self, buf: np.ndarray) -> None:
        self.hdr = buf[:_HDR_BYTES].view(np.uint32)
        self.slots = buf[_HDR_BYTES:].view(np.int32)

    @classmethod
    def attach(cls, fd: int, size_bytes: int) -> "Ring":
        """Map a shared ring created by another process (``ring.fd``, ``ring.nbytes``).

        The header is checked before use: magic, size equal to the mapping, a power-of-two
        size with its mask, a capacity that fits.  (Both processes then share the header:
        as with DPDK's multi-process rings, they trust each other not to rewrite it.)
        """
        fd = check_count(fd, "fd", lo=0, hi=(1 << 31) - 1)
        size_bytes = check_count(size_bytes, "size_bytes", lo=_HDR_BYTES + 4,
                                 hi=_HDR_BYTES + 4 * (RING_SZ_MASK + 1))
        if (size_bytes - _HDR_BYTES) % 4:
            raise InvalidArgument(f"size_bytes ({size_bytes}) is not a ring's size")
        try:   # the file must hold the mapping and be sealed against shrinking (else SIGBUS)
            import fcntl
            big_enough = os.fstat(fd).st_size >= size_bytes
            sealed = fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK
        except OSError as e:
            raise InvalidArgument(f"fd {fd} is not a ring's memory ({e})") from None
        if not (big_enough and sealed):
            raise InvalidArgument(f"fd {fd} is smaller than {size_bytes} bytes or not sealed "
                                  f"against shrinking")
        self = cls.__new__(cls)
        self.hdr = self.slots = None
        try:
            self.region = Region.attach(fd, size_bytes, "pktbuf-ring-peer")
        except (OSError, ValueError) as e:
            self.region = None
            raise InvalidArgument(f"cannot map a ring from fd {fd} ({e})") from None
        self._bind(self.region.array)
        size = self.slots.size
        ok = (int(self.hdr[K.H_MAGIC]) == RING_MAGIC and int(self.hdr[K.H_SIZE]) == size
              and size & (size - 1) == 0 and int(self.hdr[K.H_MASK]) == size - 1
              and 1 <= int(self.hdr[K.H_CAPACITY]) <= size)
        if not ok:
            self.hdr = self.slots = None
            self.region.close()
            self.region = None
            raise InvalidArgument("the mapped memory does not hold a pktbuf ring of that size")
        return self

    def _open(self) -> None:
        if self.hdr is None:
            raise InvalidArgument("the ring is closed")

    # -- description ---------------------------------------------------------------------
    @property
    def fd(self) -> int:
        self._open()
        if self.region is None:
            raise InvalidArgument("not a shared ring")
        return self.region.fd

    @property
    def nbytes(self) -> int:
        self._open()
        return _HDR_BYTES + 4 * self.slots.size

    @property
    def size(self) -> int:
        self._open()
        return int(self.hdr[K.H_SIZE])

    @property
    def capacity(self) -> int:
        self._open()
        return int(self.hdr[K.H_CAPACITY])

    @property
    def flags(self) -> int:
        self._open()
        return int(self.hdr[K.H_FLAGS])

    def __len__(self) -> int:
        self._open()
        return int(K.ring_count(self.hdr))

    count = property(__len__, doc="Objects in the ring (snapshot).")

    @property
    def free_count(self) -> int:
        self._open()
        return int(K.ring_free_count(self.hdr))

    def empty(self) -> bool:
        return len(self) == 0

    def full(self) -> bool:
        return self.free_count == 0

    # -- data path -----------------------------------------------------------------------
    def enqueue_bulk(self, objs) -> int:
        """Enqueue all of ``objs`` or nothing; returns ``len(objs)`` or 0."""
        self._open()
        objs = check_handles(objs, "objs")
        return int(K.ring_enqueue_bulk(self.hdr, self.slots, objs, objs.size))

    def enqueue_burst(self, objs) -> int:
        """Enqueue as many of ``objs`` as fit; returns how many (a prefix of ``objs``)."""
        self._open()
        objs = check_handles(objs, "objs")
        return int(K.ring_enqueue_burst(self.hdr, self.slots, objs, objs.size))

    def enqueue(self, obj: int) -> bool:
        """Enqueue one object; False if the ring is full."""
        return self.enqueue_bulk(np.array([check_handle(obj, "obj")], np.int32)) == 1

    def dequeue_bulk(self, n: int) -> np.ndarray:
        """Dequeue exactly ``n`` objects, or return an empty array if fewer are there."""
        self._open()
        n = check_count(n, "n")
        if n > self.capacity:
            return np.empty(0, np.int32)
        out = np.empty(n, np.int32)
        got = int(K.ring_dequeue_bulk(self.hdr, self.slots, out, n))
        return out[:got]

    def dequeue_burst(self, n: int) -> np.ndarray:
        """Dequeue up to ``n`` objects."""
        self._open()
        n = min(check_count(n, "n"), self.capacity)
        out = np.empty(n, np.int32)
        got = int(K.ring_dequeue_burst(self.hdr, self.slots, out, n))
        return out[:got]

    def dequeue(self):
        """Dequeue one object, or None if the ring is empty."""
        out = self.dequeue_bulk(1)
        return int(out[0]) if out.size else None

    def close(self) -> None:
        """Release the ring (unmap a shared one); every later call raises InvalidArgument."""
        self.hdr = self.slots = None
        if self.region is not None:
            self.region.close()
            self.region = None

    def __repr__(self) -> str:
        if self.hdr is None:
            return "Ring(closed)"
        return f"Ring(capacity={self.capacity}, count={len(self)}, flags={self.flags:#x})"
