"""What several drivers share: the port-kind ids (:mod:`.kinds`) and, in :mod:`.api`, the
:class:`Port` base class, device-argument parsing and Linux interface queries."""
