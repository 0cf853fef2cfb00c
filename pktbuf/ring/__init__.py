"""Lock-free rings of object indices (``rte_ring`` semantics): the kernels in
:mod:`pktbuf.ring.kernels`.  The facade is :class:`pktbuf.Ring` (:mod:`pktbuf.api.ring`)."""
