"""Port drivers (DPDK's ``drivers/net``): one folder per port type holding its kernels, its
control plane and, in ``api``, its facade -- memif, AF_PACKET, AF_XDP, pcap files and rings --
over the code they share (:mod:`pktbuf.drivers.common`)."""
