"""memif: DPDK-compatible shared-memory packet interface (both roles, copy and zero-copy).

Facade: :class:`Memif` (``Memif.client(...)`` / ``Memif.server(...)``).  Kernels for your own
``@njit`` loops: :func:`memif_rx_burst`, :func:`memif_tx_burst`, :func:`memif_link_up`
(:mod:`.datapath`) and the idle strategies :func:`backoff_idle`, :func:`memif_rx_wait`
(:mod:`.poll`).

Modules: :mod:`.proto` (messages), :mod:`.layout` (shared-memory layout), :mod:`.control`
(socket and handshake), :mod:`.queue` (kernel queue state), :mod:`.validate` (peer data checks),
:mod:`.datapath` (bursts, over :mod:`.rx_copy`, :mod:`.tx_copy`, :mod:`.zerocopy`,
:mod:`.burst`), :mod:`.poll` (idle/interrupt), :mod:`.interface` (the facade).
"""
from __future__ import annotations

_LAZY = {
    "Memif": "pktbuf.memif.interface",
    "MemifDisconnected": "pktbuf.memif.interface",
    "MemifQueue": "pktbuf.memif.queue",
    "ProtocolError": "pktbuf.memif.proto",
    "memif_rx_burst": "pktbuf.memif.datapath",
    "memif_tx_burst": "pktbuf.memif.datapath",
    "memif_link_up": "pktbuf.memif.datapath",
    "backoff_new": "pktbuf.memif.poll",
    "backoff_idle": "pktbuf.memif.poll",
    "backoff_reset": "pktbuf.memif.poll",
    "memif_rx_wait": "pktbuf.memif.poll",
    "memif_link_wait": "pktbuf.memif.poll",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'pktbuf.memif' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
