"""Error codes returned by kernels, and the exceptions the facade raises for them.

Kernels never raise: they return a count or 0 on success and a negative code from this table on
failure (the values are Linux errno numbers, as DPDK uses them).  The facade validates its
arguments first, then maps any code a kernel still returns to an exception with
:func:`raise_for`.  Every exception pktbuf raises is defined here and derives from
:class:`PktbufError`; the ones caused by bad arguments also derive from :class:`ValueError`.

The second half of the module holds the argument checks every facade shares
(:func:`check_count`, :func:`check_handle`, :func:`check_handles`, ...).  They follow
``operator.index``: integers and NumPy integers pass, ``bool``, ``float``, ``str`` and ``None``
do not, and every value is range-checked before it reaches a kernel -- so a kernel only ever
sees Python ints that fit its arguments and arrays of the one dtype and layout it was compiled
for (a new dtype or layout would compile a new specialisation and, through the facade's direct
entry points, be misread).

=============  ======  =======================================================

# ---------------------------------------------------------------------------------------------
code           value   meaning
=============  ======  =======================================================

# ---------------------------------------------------------------------------------------------
``E_OK``         0     success
``E_NOENT``     -2     pool exhausted: not enough free objects (``-ENOENT`` as in DPDK)
``E_BADF``      -9     not a handle of a live object of this domain
``E_NOMEM``    -12     no memory for the request (heap / region exhausted)
``E_FAULT``    -14     an object failed its sanity check (corrupt descriptor)
``E_BUSY``     -16     objects still in use (destroy with objects in flight), or taken
``E_EXIST``    -17     exists with other parameters (dynamic field or flag names)
``E_INVAL``    -22     invalid argument
``E_NOSPC``    -28     no room: append beyond tailroom, prepend beyond headroom
``E_RANGE``    -34     out of range: adj/trim/read beyond the data, refcnt overflow/underflow
``E_NOSYS``    -38     a path called through the call table is not installed in this process
                       (no domain created or attached yet: :mod:`pktbuf.calltable`)
``E_OVERFLOW`` -75     chain would exceed 65535 segments
``E_ALREADY``  -114    object already free (double free)
=============  ======  =======================================================

# ---------------------------------------------------------------------------------------------
"""
from __future__ import annotations

import math
import numbers
import operator

import numpy as np

E_OK = 0
E_NOENT = -2
E_BADF = -9
E_NOMEM = -12
E_FAULT = -14
E_BUSY = -16
E_EXIST = -17
E_INVAL = -22
E_NOSPC = -28
E_RANGE = -34
E_NOSYS = -38
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


class UseAfterFree(DoubleFree):
    """An mbuf the application freed was used again -- read, written, wrapped in an
    ``Mbuf`` -- while it is in its pool or only clones still hold its buffer.  The same
    refusal as :class:`DoubleFree` (whose handlers still catch it), named for what happened:
    no free was attempted."""


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


class DynExists(PktbufError, ValueError):
    """A dynamic mbuf field or flag of that name exists with other parameters (EEXIST)."""
    code = E_EXIST


class DynBusy(Busy):
    """The requested dynamic-field offset or flag bit is taken, or no room is left."""


class NoSuchRule(PktbufError, KeyError):
    """A route or rule to delete that is not in the table (``rte_lpm_delete``'s miss)."""
    code = E_NOENT


class NoSuchKey(PktbufError, KeyError):
    """A key that is not in the exact-match table (``rte_hash``'s ``-ENOENT``)."""
    code = E_NOENT


class DynNotFound(PktbufError, KeyError):
    """No dynamic field or flag of that name is registered (ENOENT)."""
    code = E_NOENT


# (memif's exceptions are appended below this line)


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, InvalidHandle, DoubleFree, PoolExhausted,
                                      OutOfMemory, NoRoom, OutOfRange, ChainTooLong,
                                      SanityCheckError, Busy, DynExists)}


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

_I32 = np.dtype(np.int32)
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


def _index(v, name: str, exc) -> int:
    """``operator.index(v)``, refusing bools (``True`` is not the count 1) with ``exc``."""
    if isinstance(v, (bool, np.bool_)):
        raise exc(f"{name} must be an integer, got {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise exc(f"{name} must be an integer, got {type(v).__name__}") from None


def cli_number(kind=int, lo=None, hi=None, *, power_of_two: bool = False):
    """An ``argparse`` ``type=`` for a command-line number: ``kind`` (int or float) in
    ``[lo, hi]`` (None: unbounded), a power of two if asked.  A bad value becomes argparse's
    one-line ``error: argument --x: ...`` and exit status 2 (a usage error)."""
    def parse(text: str):
        import argparse
        import math
        try:
            v = int(text) if kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if kind is float and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            rng = (f"{lo}..{hi}" if lo is not None and hi is not None
                   else f">= {lo}" if lo is not None else f"<= {hi}")
            raise argparse.ArgumentTypeError(f"{text} is out of range ({rng})")
        if power_of_two and (v < 1 or v & (v - 1)):
            raise argparse.ArgumentTypeError(f"{text} is not a power of two")
        return v
    parse.__name__ = kind.__name__
    parse.kind, parse.lo, parse.hi = kind, lo, hi          # for the tests of the options
    return parse


def cli_list(kind=int, lo=None, hi=None):
    """An ``argparse`` ``type=`` for a comma-separated list of numbers, each checked as
    :func:`cli_number` does; at least one."""
    one = cli_number(kind, lo, hi)

    def parse(text: str):
        import argparse
        vals = [one(x.strip()) for x in text.split(",") if x.strip()]
        if not vals:
            raise argparse.ArgumentTypeError(f"{text!r}: give at least one value")
        return vals
    parse.__name__ = "list"
    parse.kind, parse.lo, parse.hi = kind, lo, hi
    return parse


def check_count(n, name: str = "n", *, lo: int = 0, hi: int | None = None) -> int:
    """An integer in [lo, hi] as a Python int; bools, floats, strings, None and out-of-range
    values raise InvalidArgument."""
    v = _index(n, name, InvalidArgument)
    if v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise InvalidArgument(f"{name} must be in {rng}, got {v}")
    return v


def check_uint(v, name: str, bits: int) -> int:
    """An unsigned integer of ``bits`` bits (a 16-, 32- or 64-bit descriptor field)."""
    return check_count(v, name, lo=0, hi=(1 << bits) - 1)


def check_flag(v, name: str) -> bool:
    """A bool (``True``/``False``, NumPy bools, or the integers 0 and 1) as a Python bool.

    Kernels are compiled for a bool there: anything else would compile a new specialisation.
    """
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    try:
        i = operator.index(v)
    except TypeError:
        raise InvalidArgument(f"{name} must be a bool, got {type(v).__name__}") from None
    if i not in (0, 1):
        raise InvalidArgument(f"{name} must be a bool, got {i}")
    return bool(i)


def check_timeout(t, name: str = "timeout") -> float | None:
    """A wait's limit: ``None`` (or ``inf``) waits for ever and comes back as None; otherwise a
    real number of seconds >= 0 as a float (0: do not wait).  Negative numbers, NaN, bools and
    anything not a number raise InvalidArgument: ``poll(2)`` takes a negative limit as "for
    ever" and ``select`` refuses it, so no meaning is guessed."""
    if t is None:
        return None
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real):
        raise InvalidArgument(f"{name} must be a number of seconds or None, got {t!r}")
    v = float(t)
    if math.isnan(v) or v < 0:
        raise InvalidArgument(f"{name} must be >= 0 seconds or None, got {t!r}")
    return None if math.isinf(v) else v


def check_handle(h, name: str = "handle") -> int:
    """One handle (an int32 index, or an object with ``__index__`` such as an Mbuf) as a
    Python int; anything else -- None, floats, strings, bools, values outside int32 -- raises
    InvalidHandle.  Whether it names a live object is the caller's check."""
    v = _index(h, name, InvalidHandle)
    if not _I32_MIN <= v <= _I32_MAX:
        raise InvalidHandle(f"{name} {v} is outside int32")
    return v


def check_handles(objs, name: str = "handles", *, item=None) -> np.ndarray:
    """A 1-d C-contiguous writeable int32 array of handles.

    Lists, tuples and arrays of other integer dtypes, byte orders or layouts are converted
    (to a new array: the caller's is never modified); conversion never changes a value --
    anything outside int32 raises InvalidHandle, and so do floats, bools and strings.
    Sequences of objects (e.g. :class:`~pktbuf.Mbuf`) are converted element by element with
    ``item`` (default :func:`check_handle`).  A 2-d (or 0-d) input raises InvalidArgument.
    """
    if (isinstance(objs, np.ndarray) and objs.dtype == _I32 and objs.ndim == 1
            and objs.flags.c_contiguous and objs.flags.writeable):
        return objs
    if isinstance(objs, (str, bytes, bytearray, memoryview)) or objs is None:
        raise InvalidArgument(f"{name} must be a 1-d sequence of handles, got {type(objs).__name__}")
    if isinstance(objs, (list, tuple)):
        # element by element: NumPy would turn [h, True] into [h, 1] without a word
        conv = item or check_handle
        out = np.empty(len(objs), np.int32)
        for i, x in enumerate(objs):
            if isinstance(x, (list, tuple, np.ndarray)):
                raise InvalidArgument(f"{name} must be a 1-d sequence of handles")
            out[i] = conv(x)
        return out
    try:
        a = np.asarray(objs)
    except (ValueError, TypeError) as e:   # ragged nested sequences and the like
        raise InvalidArgument(f"{name} must be a 1-d sequence of handles ({e})") from None
    if a.ndim != 1:
        raise InvalidArgument(f"{name} must be a 1-d sequence, got shape {a.shape}")
    if a.size == 0:
        return np.empty(0, np.int32)
    if a.dtype.kind == "O":
        conv = item or check_handle
        return np.array([conv(x) for x in a.tolist()], np.int32)
    if a.dtype.kind not in "iu":
        raise InvalidHandle(f"{name} must hold integers, got dtype {a.dtype}")
    if a.dtype != _I32:
        if int(a.min()) < _I32_MIN or int(a.max()) > _I32_MAX:
            raise InvalidHandle(f"{name} holds values outside int32")
        return a.astype(np.int32)          # a new, contiguous, native, writeable array
    return np.array(a, np.int32)           # copy: read-only or not contiguous


# ---------------------------------------------------------------------------------------------
# ports

class PortError(PktbufError, OSError):
    """A port cannot be opened or configured: the system refused (the message says what)."""


class NoSuchInterface(PortError):
    """The network interface a port names does not exist (in the caller's network namespace)."""


class PermissionDenied(PortError, PermissionError):
    """The system refused for lack of privilege (an ``AF_PACKET`` socket needs
    ``CAP_NET_RAW``)."""


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


# ---------------------------------------------------------------------------------------------
# shared domains (several processes, docs/multiprocess.md)

class SharedDomainError(PktbufError):
    """A shared domain cannot be created, attached to or used as asked."""


class NoSuchDomain(SharedDomainError, LookupError):
    """No shared domain of that name (no process serves it), or a passed fd that is not one,
    or one whose creator has closed it."""
    code = E_NOENT


class LayoutMismatch(SharedDomainError):
    """The shared domain was made by a pktbuf with another layout version: its memory cannot
    be read by this one."""
    code = E_INVAL


class LcoreBusy(SharedDomainError, Busy):
    """The lcore id asked for is held by another process attached to the domain."""


class PeerDied(SharedDomainError):
    """A process attached to the shared domain died without detaching.  ``pids`` lists the
    dead ones; :meth:`pktbuf.SharedDomain.reap` reports what they held and frees their lcores."""

    def __init__(self, msg: str = "", pids=()):
        super().__init__(msg)
        self.pids = tuple(pids)


# ---------------------------------------------------------------------------------------------
# telemetry

class TelemetryError(PktbufError):
    """The telemetry socket cannot be set up (no runtime directory, a path too long for a unix
    socket, every ``:N`` suffix taken); ``errno`` is the system's error number, if any."""

    def __init__(self, msg: str = "", errno: int | None = None):
        super().__init__(msg)
        self.errno = errno


# ---------------------------------------------------------------------------------------------
# pcap

class PcapError(PktbufError):
    """Base class of the errors of a capture file (pcap, pcapng) or a pcap port."""


class PcapFormatError(PcapError, ValueError):
    """A capture file breaks its format (bad magic, truncated record, bad block length,
    unknown link type...).  ``path``: the file; ``offset``: where in it (or None); ``reason``:
    what was wrong.  Every packet before the offending record was delivered."""

    def __init__(self, reason: str, path=None, offset: int | None = None):
        where = f"{path}: " if path is not None else ""
        at = f" (at offset {offset})" if offset is not None else ""
        super().__init__(f"{where}{reason}{at}")
        self.path = path
        self.offset = offset
        self.reason = reason


class PcapWriteError(PcapError, OSError):
    """Writing a capture file failed (disk full, I/O error); ``errno`` is the system's error
    number.  The records that were buffered when it failed are lost (counted in ``oerrors``)."""

    def __init__(self, msg: str = "", errno: int | None = None):
        PcapError.__init__(self, msg)
        self.errno = errno


# ---------------------------------------------------------------------------------------------
# vhost-user

class VhostError(PktbufError):
    """A vhost-user port cannot work: its socket cannot be created or reached."""
