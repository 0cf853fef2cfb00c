"""Buffer libraries: rings, mempools, mbufs, page pools and the heap (DPDK's ``lib/ring``,
``lib/mempool``, ``lib/mbuf``, ``rte_malloc``; Linux's ``page_pool``), and the buffer domain that
holds them for Python (:mod:`pktbuf.buf.domain`)."""
