"""The port table: DPDK's ``rte_eth_devices`` for compiled code.

One block lists every open port of a domain: its kind (which driver's kernels serve it), its
queue counts and the address of each queue's block.  The dispatching burst kernels
(:mod:`pktbuf.ethdev.burst`) take this table and a port id, as ``rte_eth_rx_burst`` takes a
port id, so one compiled loop serves any mix of port types.  The table also holds the address
of the domain its ports' pools belong to, so a loop needs only the table.
"""
from __future__ import annotations

import numpy as np

from ..block import Layout
# the kinds and limits live below the drivers, which stamp their ports with them
from ..drivers.common.kinds import (K_AF_PACKET, K_AF_XDP, K_MEMIF, K_NONE, K_PCAP,  # noqa: F401
                                    K_RING, K_VHOST, K_VIRTIO_USER, KIND_NAMES, MAX_PORTS,
                                    MAX_QUEUES)

# table header words (hdr)
H_DOM = 0               # address of the domain block
H_WORDS = 8

# per-port words (port[p, :])
P_KIND = 0
P_NB_RX = 1
P_NB_TX = 2
P_WORDS = 8

ETHDEV = Layout("ethdev", [
    ("hdr", np.int64, H_WORDS),
    ("port", np.int64, MAX_PORTS, (P_WORDS,)),
    ("rxq", np.int64, MAX_PORTS, (MAX_QUEUES,)),     # queue block addresses
    ("txq", np.int64, MAX_PORTS, (MAX_QUEUES,)),
])
