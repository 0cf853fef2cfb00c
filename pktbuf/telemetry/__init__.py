"""DPDK-compatible telemetry: the v2 socket protocol of DPDK 22.11, so ``dpdk-telemetry.py``
and Telegraf's dpdk input read a pktbuf application.

:mod:`.server` (:class:`~pktbuf.telemetry.server.Telemetry`: socket, clients, dispatch and
the built-in commands), :mod:`.runtime` (EAL's runtime directory and the socket's bind rules),
:mod:`.encode` (DPDK's JSON, byte for byte), :mod:`.ethdev` and :mod:`.mempool` (the
``/ethdev/*`` and ``/mempool/*`` replies), :mod:`.commands` (pktbuf's own, ``/pktbuf/*``).
See docs/telemetry.md.
"""
