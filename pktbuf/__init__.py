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
    "Domain": "pktbuf.buf.domain.domain",
    "default_domain": "pktbuf.buf.domain.domain",
    "set_debug": "pktbuf.buf.domain.domain",
    "Mempool": "pktbuf.buf.domain.pools",
    "PktmbufPool": "pktbuf.buf.domain.pools",
    "Mbuf": "pktbuf.buf.domain.mbuf",
    "Ring": "pktbuf.buf.ring.api",
    "Memif": "pktbuf.drivers.memif.api.memif",
    "Ports": "pktbuf.ethdev.api",
    "Telemetry": "pktbuf.telemetry.server",
    "RingPort": "pktbuf.drivers.ring.api",
    "MemifPort": "pktbuf.drivers.memif.api.port",
    "VhostPort": "pktbuf.drivers.vhost.api.port",
    "VirtioUserPort": "pktbuf.drivers.virtio_user.api.port",
    "parse_devargs": "pktbuf.drivers.common.api.devargs",
    "PcapPort": "pktbuf.drivers.pcap.api.port",
    "AfPacketPort": "pktbuf.drivers.af_packet.api",
    "PcapReader": "pktbuf.drivers.pcap.api.file",
    "PcapWriter": "pktbuf.drivers.pcap.api.file",
    "pcap_reader": "pktbuf.drivers.pcap.api.file",
    "Heap": "pktbuf.buf.heap.api",
    "PageArena": "pktbuf.buf.pagepool.api",
    "PagePool": "pktbuf.buf.pagepool.api",
    "Rss": "pktbuf.net.rss.api",
    "Distributor": "pktbuf.net.distrib.api",
    "SharedDomain": "pktbuf.buf.domain.shared",
    "PeerReport": "pktbuf.buf.domain.shared",
    "Hash": "pktbuf.net.hash.api",
    "get_ptype": "pktbuf.net.ptype.api",
    "ptype_name": "pktbuf.net.ptype.api",
    "Lpm": "pktbuf.net.lpm.api",
    "Lpm6": "pktbuf.net.lpm.api",
    "Stage": "pktbuf.apps.stage.api",
    "StageError": "pktbuf.apps.stage.api",
    "Forwarder": "pktbuf.apps.fwd.forwarder",
    "Region": "pktbuf.shm",
    "kernel": "pktbuf._jit",
    "LCORE_ANY": "pktbuf.lcore",
    "NULL": "pktbuf.buf.mbuf.layout",
    "MBUF_DTYPE": "pktbuf.buf.mbuf.layout",
}

from .errors import (AddressInUse, Busy, ChainTooLong, DoubleFree, DynBusy,  # noqa: E402
                     DynExists, DynNotFound, InvalidArgument, InvalidHandle, MemifDisconnected,
                     MemifError, MemifSocketError, NoRoom, OutOfMemory, OutOfRange, PktbufError,
                     NoSuchInterface, PcapError, PcapFormatError, PcapWriteError, PermissionDenied,
                     PoolExhausted, PortError, RefcntError, SanityCheckError, TelemetryError,
                     SharedDomainError, NoSuchDomain, LayoutMismatch, LcoreBusy, PeerDied,
                     NoSuchRule, NoSuchKey, UseAfterFree, VhostError)

__all__ = sorted(list(_LAZY) + ["PktbufError", "AddressInUse", "InvalidArgument", "InvalidHandle", "DoubleFree",
                                "PoolExhausted", "OutOfMemory", "NoRoom", "OutOfRange",
                                "RefcntError", "ChainTooLong", "SanityCheckError", "Busy",
                                "MemifError", "MemifDisconnected", "MemifSocketError", "VhostError",
                                "DynExists", "DynBusy", "DynNotFound",
                                "PcapError", "PcapFormatError", "PcapWriteError",
                                "PortError", "NoSuchInterface", "PermissionDenied",
                                "TelemetryError", "SharedDomainError", "NoSuchDomain",
                                "LayoutMismatch", "LcoreBusy", "PeerDied", "NoSuchRule",
                                "NoSuchKey", "UseAfterFree"])


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
