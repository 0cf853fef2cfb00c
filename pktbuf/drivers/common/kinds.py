"""Port kinds: which driver's kernels a burst on a port dispatches to, and the port table's
limits.  Below every driver, so that a driver's facade can stamp its ports with its kind without
importing the port table above it (:mod:`pktbuf.ethdev.layout`)."""
from __future__ import annotations

MAX_PORTS = 32          # RTE_MAX_ETHPORTS's default
MAX_QUEUES = 64         # per direction and port

# 0 = no port at this id
K_NONE = 0
K_MEMIF = 1
K_RING = 2
K_AF_PACKET = 3
K_PCAP = 4
K_AF_XDP = 5
K_VHOST = 6
K_VIRTIO_USER = 7
KIND_NAMES = {K_MEMIF: "net_memif", K_RING: "net_ring", K_AF_PACKET: "net_af_packet",
              K_PCAP: "net_pcap", K_AF_XDP: "net_af_xdp",
              K_VHOST: "net_vhost", K_VIRTIO_USER: "net_virtio_user"}
