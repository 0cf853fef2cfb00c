"""pktbuf: DPDK-style packet buffers (mbufs, mempools, rings) for Python, JIT-compiled by Numba.

Two layers:

* **kernels** -- ``@njit(cache=True, nogil=True)`` functions over plain arrays, with DPDK's names
  (``pktmbuf_alloc_bulk``, ``pktmbuf_free_bulk``, ``mempool_get_bulk``...), callable from your
  own ``@njit`` code: ``from pktbuf.kernels import *``.
* **facade** -- classes with validation and exceptions for plain Python:
  :class:`PktmbufPool`, :class:`Mbuf`, :class:`Mempool`, :class:`Ring`, :class:`Domain`,
  :class:`Memif`, :class:`PagePool`, :class:`PageArena`, :class:`Heap`.

Importing ``pktbuf`` is cheap: submodules load on first use.
"""
from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "Domain": "pktbuf.api.domain",
    "default_domain": "pktbuf.api.domain",
    "set_debug": "pktbuf.api.domain",
    "Mempool": "pktbuf.api.pools",
    "PktmbufPool": "pktbuf.api.pools",
    "Mbuf": "pktbuf.api.mbuf",
    "Ring": "pktbuf.api.ring",
    "Memif": "pktbuf.api.memif",
    "Ports": "pktbuf.api.ethdev",
    "Telemetry": "pktbuf.api.telemetry.server",
    "RingPort": "pktbuf.api.ring_port",
    "MemifPort": "pktbuf.api.memif_port",
    "parse_devargs": "pktbuf.api.devargs",
    "PcapPort": "pktbuf.api.pcap",
    "AfPacketPort": "pktbuf.api.af_packet",
    "PcapReader": "pktbuf.api.pcap_file",
    "PcapWriter": "pktbuf.api.pcap_file",
    "pcap_reader": "pktbuf.api.pcap_file",
    "Heap": "pktbuf.api.heap",
    "PageArena": "pktbuf.api.pagepool",
    "PagePool": "pktbuf.api.pagepool",
    "Rss": "pktbuf.api.rss",
    "Distributor": "pktbuf.api.distributor",
    "SharedDomain": "pktbuf.api.shared",
    "PeerReport": "pktbuf.api.shared",
    "Region": "pktbuf.shm",
    "kernel": "pktbuf._jit",
    "LCORE_ANY": "pktbuf.lcore",
    "NULL": "pktbuf.mbuf.layout",
    "MBUF_DTYPE": "pktbuf.mbuf.layout",
}

from .errors import (AddressInUse, Busy, ChainTooLong, DoubleFree, DynBusy,  # noqa: E402
                     DynExists, DynNotFound, InvalidArgument, InvalidHandle, MemifDisconnected,
                     MemifError, MemifSocketError, NoRoom, OutOfMemory, OutOfRange, PktbufError,
                     NoSuchInterface, PcapError, PcapFormatError, PcapWriteError, PermissionDenied,
                     PoolExhausted, PortError, RefcntError, SanityCheckError, TelemetryError,
                     SharedDomainError, NoSuchDomain, LayoutMismatch, LcoreBusy, PeerDied)

__all__ = sorted(list(_LAZY) + ["PktbufError", "AddressInUse", "InvalidArgument", "InvalidHandle", "DoubleFree",
                                "PoolExhausted", "OutOfMemory", "NoRoom", "OutOfRange",
                                "RefcntError", "ChainTooLong", "SanityCheckError", "Busy",
                                "MemifError", "MemifDisconnected", "MemifSocketError",
                                "DynExists", "DynBusy", "DynNotFound",
                                "PcapError", "PcapFormatError", "PcapWriteError",
                                "PortError", "NoSuchInterface", "PermissionDenied",
                                "TelemetryError", "SharedDomainError", "NoSuchDomain",
                                "LayoutMismatch", "LcoreBusy", "PeerDied"])


def __getattr__(name):
    if name == "lcore":            # the submodule: pktbuf.lcore.bind(...)
        import importlib
        return importlib.import_module("pktbuf.lcore")
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'pktbuf' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
