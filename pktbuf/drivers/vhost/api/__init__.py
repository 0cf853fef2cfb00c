"""vhost from Python: the ``net_vhost`` port (:mod:`.port`)."""
