"""The buffer domain from Python: :class:`~pktbuf.Domain` (the object table, pools, rings and
per-lcore caches of one process), :class:`~pktbuf.Mempool`, :class:`~pktbuf.PktmbufPool`,
:class:`~pktbuf.Mbuf` and :class:`~pktbuf.SharedDomain` (one domain mapped by several processes).

A facade package through and through: every module validates and raises; the kernels it calls
live in :mod:`pktbuf.buf.mempool` and :mod:`pktbuf.buf.mbuf`."""
