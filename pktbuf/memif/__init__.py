"""memif: DPDK-compatible shared-memory packet interface (both roles, copy and zero-copy).

The facade is :class:`pktbuf.Memif` (:mod:`pktbuf.api.memif`).  Kernels for your own ``@njit``
loops: :func:`memif_rx_burst`, :func:`memif_tx_burst`, :func:`memif_link_up`
(:mod:`.datapath`), :func:`memif_rx_wait`, :func:`memif_link_wait` (:mod:`.poll`); also in
:mod:`pktbuf.kernels`.

Modules: :mod:`.proto` (messages), :mod:`.layout` (shared-memory layout), :mod:`.control`
(socket and handshake), :mod:`.device` (one interface's control plane: memory, queues,
connect and teardown), :mod:`.peermem` (peer regions between guard pages), :mod:`.queue`
(kernel queue state), :mod:`.validate` (peer data checks), :mod:`.datapath` (the bursts) over
:mod:`.rx_copy`, :mod:`.tx_copy`, :mod:`.zerocopy` and :mod:`.burst`, :mod:`.poll`
(interrupt waits).  docs/memif.md states the wire facts they rely on.
"""
from __future__ import annotations

_LAZY = {
    "MemifQueue": "pktbuf.memif.queue",
    "memif_rx_burst": "pktbuf.memif.datapath",
    "memif_tx_burst": "pktbuf.memif.datapath",
    "memif_link_up": "pktbuf.memif.datapath",
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
