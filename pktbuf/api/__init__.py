"""The Pythonic facade over the kernels: one module per facade class family.

:mod:`.domain` (:class:`~pktbuf.Domain`), :mod:`.pools` (:class:`~pktbuf.Mempool`,
:class:`~pktbuf.PktmbufPool`), :mod:`.mbuf` (:class:`~pktbuf.Mbuf`), :mod:`.ring`
(:class:`~pktbuf.Ring`), :mod:`.memif` (:class:`~pktbuf.Memif`), :mod:`.heap`
(:class:`~pktbuf.Heap`), :mod:`.pagepool` (:class:`~pktbuf.PageArena`,
:class:`~pktbuf.PagePool`), :mod:`.dynfield` (the dynamic-field registry of a domain).
Import the classes from :mod:`pktbuf`.  Every facade validates its arguments and raises from
:mod:`pktbuf.errors` before any kernel runs; calls go to kernels through :mod:`._fastcall`.
"""
