"""The AF_XDP port from Python: the port (:mod:`.port`), the XSK socket (:mod:`.xsk`), the XDP
program (:mod:`.bpf`) and attaching or sharing it (:mod:`.program`)."""
