"""pcap and pcapng capture files as a port: Rx replays a file into mbufs, Tx writes mbufs to a
file, both in bursts (``pcap_rx_burst`` / ``pcap_tx_burst``), with DPDK ``net_pcap``'s model.
See docs/pcap.md."""
