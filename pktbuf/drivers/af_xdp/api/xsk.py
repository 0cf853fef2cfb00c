"""One AF_XDP socket set up for a port queue: its UMEM, its four rings, its bind.

The order is the kernel's (``net/xdp/xsk.c``, ``Documentation/networking/af_xdp.rst``):
``socket(AF_XDP, SOCK_RAW)``, ``XDP_UMEM_REG``, the fill and completion ring sizes, the Rx and
Tx ring sizes, ``XDP_MMAP_OFFSETS``, one ``mmap`` per ring (before ``bind``: kernels up to 6.1
refuse it after), then ``bind``.  The ring offsets are read from the kernel, never assumed.
Constants and struct layouts: ``linux/if_xdp.h``.
"""
from __future__ import annotations

import ctypes
import errno
import mmap
import os
import socket
import struct

from ....errors import Busy, InvalidArgument, NoSuchInterface, OutOfMemory, PermissionDenied, \
    PortError

__all__ = ["Xsk", "RingMap", "AF_XDP", "XDP_COPY", "XDP_ZEROCOPY", "XDP_USE_NEED_WAKEUP"]

AF_XDP = 44
SOL_XDP = 283
XDP_SHARED_UMEM = 1 << 0
XDP_COPY = 1 << 1
XDP_ZEROCOPY = 1 << 2
XDP_USE_NEED_WAKEUP = 1 << 3
XDP_MMAP_OFFSETS = 1
XDP_RX_RING = 2
XDP_TX_RING = 3
XDP_UMEM_REG = 4
XDP_UMEM_FILL_RING = 5
XDP_UMEM_COMPLETION_RING = 6
XDP_STATISTICS = 7
XDP_OPTIONS = 8
XDP_OPTIONS_ZEROCOPY = 1
XDP_UMEM_UNALIGNED_CHUNK_FLAG = 1
XDP_PGOFF_RX_RING = 0
XDP_PGOFF_TX_RING = 0x80000000
XDP_UMEM_PGOFF_FILL_RING = 0x100000000
XDP_UMEM_PGOFF_COMPLETION_RING = 0x180000000
SOL_SOCKET = 1
SO_BUSY_POLL = 46
SO_PREFER_BUSY_POLL = 69
SO_BUSY_POLL_BUDGET = 70
STAT_NAMES = ("rx_dropped", "rx_invalid_descs", "tx_invalid_descs", "rx_ring_full",
              "rx_fill_ring_empty_descs", "tx_ring_empty_descs")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.bind.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
_MAP_FAILED = ctypes.c_void_p(-1).value
MAP_POPULATE = 0x8000


def _oserr() -> OSError:
    e = ctypes.get_errno()
    return OSError(e, os.strerror(e))


class RingMap:
    """One mmap'ed ring: the addresses of its producer, consumer and flags words and of its
    descriptors, and its size (entries, a power of two)."""

    def __init__(self, fd: int, pgoff: int, offs: tuple, size: int, entry: int):
        prod, cons, desc, flags = offs
        self.len = desc + size * entry
        a = _libc.mmap(None, self.len, mmap.PROT_READ | mmap.PROT_WRITE,
                       mmap.MAP_SHARED | MAP_POPULATE, fd, pgoff)
        if a in (None, _MAP_FAILED):
            raise _oserr()
        self.addr = a
        self.producer, self.consumer = a + prod, a + cons
        self.flags, self.desc = a + flags, a + desc
        self.size = size

    def close(self) -> None:
        if self.addr:
            _libc.munmap(self.addr, self.len)
            self.addr = 0


class Xsk:
    """An AF_XDP socket with its rings mapped; :meth:`register_umem` then :meth:`bind`."""

    def __init__(self):
        self.sock = None
        self.rings: dict[str, RingMap] = {}
        try:
            self.sock = socket.socket(AF_XDP, socket.SOCK_RAW, 0)
        except OSError as e:
            raise xsk_error(e, "socket(AF_XDP)") from None
        self.fd = self.sock.fileno()

    def register_umem(self, addr: int, length: int, chunk: int, headroom: int) -> None:
        """``XDP_UMEM_REG`` in unaligned-chunk mode: ``length`` bytes at ``addr`` (page
        aligned), frames of ``chunk`` bytes starting anywhere, ``headroom`` bytes reserved in
        front of the kernel's 256-byte XDP headroom."""
        reg = struct.pack("QQIII4x", addr, length, chunk, headroom,
                          XDP_UMEM_UNALIGNED_CHUNK_FLAG)
        self._set(XDP_UMEM_REG, reg, "XDP_UMEM_REG")

    def _set(self, opt: int, val, what: str) -> None:
        try:
            self.sock.setsockopt(SOL_XDP, opt, val)
        except OSError as e:
            raise xsk_error(e, what) from None

    def map_rings(self, fill: int, comp: int, rx: int, tx: int) -> None:
        """Size the four rings (entries; powers of two) and map them."""
        for opt, n, what in ((XDP_UMEM_FILL_RING, fill, "XDP_UMEM_FILL_RING"),
                             (XDP_UMEM_COMPLETION_RING, comp, "XDP_UMEM_COMPLETION_RING"),
                             (XDP_RX_RING, rx, "XDP_RX_RING"), (XDP_TX_RING, tx, "XDP_TX_RING")):
            self._set(opt, struct.pack("i", n), what)
        try:
            o = struct.unpack("16Q", self.sock.getsockopt(SOL_XDP, XDP_MMAP_OFFSETS, 128))
        except OSError as e:
            raise xsk_error(e, "XDP_MMAP_OFFSETS") from None
        spec = (("rx", XDP_PGOFF_RX_RING, o[0:4], rx, 16),
                ("tx", XDP_PGOFF_TX_RING, o[4:8], tx, 16),
                ("fill", XDP_UMEM_PGOFF_FILL_RING, o[8:12], fill, 8),
                ("comp", XDP_UMEM_PGOFF_COMPLETION_RING, o[12:16], comp, 8))
        for name, pgoff, offs, n, entry in spec:
            try:
                self.rings[name] = RingMap(self.fd, pgoff, offs, n, entry)
            except OSError as e:
                raise xsk_error(e, f"mmap of the {name} ring") from None

    def busy_poll(self, budget: int) -> None:
        """``SO_PREFER_BUSY_POLL``, ``SO_BUSY_POLL`` 20 us and ``SO_BUSY_POLL_BUDGET`` (as
        DPDK's ``busy_budget``)."""
        for opt, v, what in ((SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL"),
                             (SO_BUSY_POLL, 20, "SO_BUSY_POLL"),
                             (SO_BUSY_POLL_BUDGET, budget, "SO_BUSY_POLL_BUDGET")):
            try:
                self.sock.setsockopt(SOL_SOCKET, opt, v)
            except OSError as e:
                raise xsk_error(e, what) from None

    def bind(self, ifindex: int, queue: int, flags: int) -> None:
        sa = struct.pack("HHIII", AF_XDP, flags, ifindex, queue, 0)
        if _libc.bind(self.fd, sa, len(sa)) != 0:
            raise _oserr()

    def zerocopy(self) -> bool:
        """Whether the kernel bound the socket in zero-copy mode (``XDP_OPTIONS``)."""
        o = struct.unpack("I", self.sock.getsockopt(SOL_XDP, XDP_OPTIONS, 4))[0]
        return bool(o & XDP_OPTIONS_ZEROCOPY)

    def statistics(self) -> dict:
        """``XDP_STATISTICS``: cumulative counters of the socket (zeros once closed)."""
        if self.sock is None:
            return dict.fromkeys(STAT_NAMES, 0)
        try:
            v = struct.unpack("6Q", self.sock.getsockopt(SOL_XDP, XDP_STATISTICS, 48))
        except OSError:
            return dict.fromkeys(STAT_NAMES, 0)
        return dict(zip(STAT_NAMES, v))

    def close(self) -> None:
        for r in self.rings.values():
            r.close()
        self.rings = {}
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def xsk_error(e: OSError, what: str, where: str = "") -> Exception:
    """The pktbuf exception for an ``OSError`` of the socket set-up."""
    at = f" on {where!r}" if where else ""
    msg = f"net_af_xdp: {what}{at}: {e.strerror}"
    if e.errno in (errno.EPERM, errno.EACCES):
        return PermissionDenied(msg + " (AF_XDP needs CAP_NET_RAW, and CAP_BPF + "
                                "CAP_NET_ADMIN for the XDP program; or root)")
    if e.errno == errno.EAFNOSUPPORT:
        return PortError(msg + " (the kernel has no AF_XDP: CONFIG_XDP_SOCKETS)")
    if e.errno == errno.ENOBUFS:
        return OutOfMemory(msg + " (the UMEM is over RLIMIT_MEMLOCK: raise it, or run with "
                           "CAP_IPC_LOCK)")
    if e.errno == errno.ENOMEM:
        return OutOfMemory(msg)
    if e.errno in (errno.ENODEV, errno.ENXIO):
        return NoSuchInterface(msg)
    if e.errno == errno.EBUSY:
        return Busy(msg)
    if e.errno == errno.EINVAL:
        return InvalidArgument(msg + " (EINVAL)")
    return PortError(msg)
