"""An ``rte_malloc``-style heap: the block layout (:mod:`.layout`) and the kernels
(:mod:`.kernels`).  The facade is :class:`pktbuf.Heap` (:mod:`pktbuf.api.heap`)."""
