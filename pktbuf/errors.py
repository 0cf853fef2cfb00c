"""Error codes returned by kernels, and the exceptions the facade raises for them.

Kernels never raise: they return a count or 0 on success and a negative code from this table on
failure (the values are Linux errno numbers, as DPDK uses them).  The facade validates its
arguments first, then maps any code a kernel still returns to an exception with
:func:`raise_for`.  Every exception derives from :class:`PktbufError`; the ones caused by bad
arguments also derive from :class:`ValueError`.

=============  ======  ==============================================================
code           value   meaning
=============  ======  ==============================================================
``E_OK``         0     success
``E_NOENT``     -2     pool exhausted: not enough free objects (``-ENOENT`` as in DPDK)
``E_BADF``      -9     not a handle of a live object of this domain
``E_NOMEM``    -12     no memory for the request (heap / region exhausted)
``E_FAULT``    -14     an object failed its sanity check (corrupt descriptor)
``E_BUSY``     -16     objects still in use (destroy with objects in flight)
``E_INVAL``    -22     invalid argument
``E_NOSPC``    -28     no room: append beyond tailroom, prepend beyond headroom
``E_RANGE``    -34     out of range: adj/trim/read beyond the data, refcnt overflow/underflow
``E_OVERFLOW`` -75     chain would exceed 65535 segments
``E_ALREADY``  -114    object already free (double free)
=============  ======  ==============================================================
"""
from __future__ import annotations

import operator

import numpy as np

E_OK = 0
E_NOENT = -2
E_BADF = -9
E_NOMEM = -12
E_FAULT = -14
E_BUSY = -16
E_INVAL = -22
E_NOSPC = -28
E_RANGE = -34
E_OVERFLOW = -75
E_ALREADY = -114


class PktbufError(Exception):
    """Base class of every pktbuf error.  ``code`` is the kernel error code, if any."""

    code = None

    def __init__(self, msg: str = "", code: int | None = None):
        super().__init__(msg)
        if code is not None:
            self.code = code


class InvalidArgument(PktbufError, ValueError):
    """A count, size or option is out of its valid range."""
    code = E_INVAL


class InvalidHandle(PktbufError, ValueError):
    """Not a handle of a live object in this domain (or NULL where an object is required)."""
    code = E_BADF


class DoubleFree(PktbufError, ValueError):
    """The object is already free (or would be freed more often than it is referenced)."""
    code = E_ALREADY


class PoolExhausted(PktbufError):
    """Not enough free objects; nothing was taken (all-or-nothing)."""
    code = E_NOENT


class OutOfMemory(PktbufError, MemoryError):
    """A heap or region could not satisfy the request."""
    code = E_NOMEM


class NoRoom(PktbufError, ValueError):
    """Append beyond the tailroom or prepend beyond the headroom."""
    code = E_NOSPC


class OutOfRange(PktbufError, ValueError):
    """An offset or length beyond the data, or a refcnt update out of [1, 65534]."""
    code = E_RANGE


class RefcntError(OutOfRange):
    """A reference-count update would underflow (below 1) or overflow."""


class ChainTooLong(PktbufError, ValueError):
    """Chaining would give a packet more than 65535 segments."""
    code = E_OVERFLOW


class SanityCheckError(PktbufError):
    """An object failed its sanity check; ``reason`` says which rule."""
    code = E_FAULT


class Busy(PktbufError):
    """The object is still in use (e.g. a pool with mbufs in flight)."""
    code = E_BUSY


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, InvalidHandle, DoubleFree, PoolExhausted,
                                      OutOfMemory, NoRoom, OutOfRange, ChainTooLong,
                                      SanityCheckError, Busy)}


def error_for(code: int, msg: str = "") -> PktbufError:
    """The exception for a negative kernel code."""
    cls = _BY_CODE.get(int(code), PktbufError)
    return cls(msg or f"error {code}", int(code))


def raise_for(code: int, msg: str = "") -> None:
    """Raise the exception for ``code`` if it is negative."""
    if code < 0:
        raise error_for(code, msg)


# ---------------------------------------------------------------------------------------------
# argument validation shared by the facades

def check_count(n, name: str = "n", *, lo: int = 0, hi: int | None = None) -> int:
    """An integer in [lo, hi]; bools, floats and out-of-range values raise InvalidArgument."""
    if isinstance(n, (bool, np.bool_)):
        raise InvalidArgument(f"{name} must be an integer, got {n!r}")
    try:
        v = operator.index(n)
    except TypeError:
        raise InvalidArgument(f"{name} must be an integer, got {type(n).__name__}") from None
    if v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise InvalidArgument(f"{name} must be in {rng}, got {v}")
    return v


_I32 = np.dtype(np.int32)


def check_handles(objs, name: str = "handles") -> np.ndarray:
    """A 1-d C-contiguous int32 array of handles (lists and other integer arrays are converted).

    Conversion never changes a value: anything outside int32 raises InvalidHandle.
    """
    if isinstance(objs, np.ndarray) and objs.dtype == _I32 and objs.ndim == 1 and objs.flags.c_contiguous:
        return objs
    a = np.asarray(objs)
    if a.ndim != 1:
        raise InvalidArgument(f"{name} must be a 1-d sequence, got shape {a.shape}")
    if a.size == 0:
        return np.empty(0, np.int32)
    if a.dtype.kind not in "iu":
        raise InvalidHandle(f"{name} must hold integers, got dtype {a.dtype}")
    if a.dtype != _I32:
        if a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max:
            raise InvalidHandle(f"{name} holds values outside int32")
        a = a.astype(np.int32)
    return np.ascontiguousarray(a)


# ---------------------------------------------------------------------------------------------
# memif

class MemifError(PktbufError):
    """Base class of the errors of a memif interface."""


class MemifDisconnected(MemifError):
    """The interface is not connected (closed, or ``wait_connected`` timed out)."""


class MemifSocketError(MemifError):
    """The interface's socket cannot be set up (address in use, no permission); ``errno`` is
    the system's error number."""

    def __init__(self, msg: str = "", errno: int | None = None):
        super().__init__(msg)
        self.errno = errno


class ProtocolError(MemifError):
    """A control message the peer sent breaks the memif protocol.

    ``reason`` is the DISCONNECT string sent back (DPDK 22.11's wording where it has one),
    ``detail`` what was wrong.
    """

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class AddressInUse(PktbufError, OSError):
    """Shared memory cannot be mapped at the address it must have in this process."""
    code = E_BUSY
