"""Lock-free rings of object indices (``rte_ring`` semantics): the kernels in
:mod:`pktbuf.buf.ring.kernels`.  The facade is :class:`pktbuf.Ring` (:mod:`pktbuf.buf.ring.api`)."""
