"""pcap files from Python: the ``net_pcap`` port (:mod:`.port`) and dpkt-shaped readers and
writers (:mod:`.file`)."""
