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

MAX_PORTS = 32          # RTE_MAX_ETHPORTS's default
MAX_QUEUES = 64         # per direction and port

# port kinds: which driver's kernels a burst dispatches to (0 = no port at this id)
K_NONE = 0
K_MEMIF = 1
K_RING = 2
K_AF_PACKET = 3
K_PCAP = 4
K_AF_XDP = 5
KIND_NAMES = {K_MEMIF: "net_memif", K_RING: "net_ring", K_AF_PACKET: "net_af_packet",
              K_PCAP: "net_pcap", K_AF_XDP: "net_af_xdp"}

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
