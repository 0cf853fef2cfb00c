"""``net_ring``: a port whose queues are pktbuf rings of mbuf handles (DPDK's ring PMD)."""
