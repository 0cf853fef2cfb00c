"""memif from Python: the :class:`Memif` interface (:mod:`.memif`) and the ``net_memif`` port
(:mod:`.port`)."""
