"""An ``rte_malloc``-style heap: the block layout (:mod:`.layout`), the element and free-list
primitives -- size classes, split, merge, dirty ranges (:mod:`.elem`) --, the heap lock and
its counted build (:mod:`.lock`), the per-lcore caches of small freed blocks (:mod:`.cache`),
the kernels that change the heap (:mod:`.kernels`: malloc, zmalloc, calloc, realloc, free and
their lcore versions) and the read-only
ones (:mod:`.audit`: pointer checks, statistics, the invariant audit; re-exported by
:mod:`.kernels`).  The facade is :class:`pktbuf.Heap` (:mod:`pktbuf.buf.heap.api`)."""
