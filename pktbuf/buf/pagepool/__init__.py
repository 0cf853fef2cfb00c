"""Linux's page pool over a page arena: the arena kernels (:mod:`.arena`), the pool's layout and
constants (:mod:`.layout`), a page entering and leaving a pool (:mod:`.pages`), allocation
(:mod:`.alloc`), returning pages (:mod:`.recycle`) and accounting and shutdown (:mod:`.kernels`,
which re-exports every public pool kernel and constant).  The facades are
:class:`pktbuf.PageArena` and :class:`pktbuf.PagePool` (:mod:`pktbuf.buf.pagepool.api`)."""
