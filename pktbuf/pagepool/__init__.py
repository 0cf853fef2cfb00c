"""Linux's page pool over a page arena: the arena kernels (:mod:`.arena`) and the page pool
kernels (:mod:`.kernels`).  The facades are :class:`pktbuf.PageArena` and
:class:`pktbuf.PagePool` (:mod:`pktbuf.api.pagepool`)."""
