"""The drivers' shared facade: the ``Port`` base class and argument checks (:mod:`.port`), DPDK
device strings (:mod:`.devargs`), Linux interface queries (:mod:`.netif`)."""
