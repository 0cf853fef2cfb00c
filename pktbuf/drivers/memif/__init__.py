"""memif: DPDK-compatible shared-memory packet interface (both roles, copy and zero-copy).

The facade is :class:`pktbuf.Memif` (:mod:`pktbuf.drivers.memif.api.memif`).  Kernels for your own ``@njit``
loops, in :mod:`pktbuf.kernels`: ``memif_rx_burst``, ``memif_tx_burst``, ``memif_link_up``
(:mod:`.datapath`), ``memif_rx_wait``, ``memif_link_wait`` (:mod:`.poll`).

Modules: :mod:`.proto` (messages), :mod:`.layout` (shared-memory layout), :mod:`.control`
(socket and handshake), :mod:`.device` (one interface's control plane: memory, queues,
connect and teardown), :mod:`.peermem` (peer regions between guard pages), :mod:`.queue`
(kernel queue state), :mod:`.validate` (peer data checks), :mod:`.datapath` (the bursts) over
:mod:`.rx_copy`, :mod:`.tx_copy`, :mod:`.zerocopy` and :mod:`.burst`, :mod:`.poll`
(interrupt waits).  docs/memif.md states the wire facts they rely on.
"""
