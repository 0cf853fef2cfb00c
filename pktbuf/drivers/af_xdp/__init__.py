"""``net_af_xdp``: a Linux interface queue as a port, through an AF_XDP socket whose UMEM is a
pktbuf pool's data region.

Kernels only (the socket, UMEM and XDP program set-up is the facade's,
:mod:`pktbuf.drivers.af_xdp.api.port`): the queue blocks (:mod:`.layout`), the shared-ring index arithmetic
(:mod:`.ring`), UMEM address <-> mbuf mapping (:mod:`.umem`), the Rx burst with the fill-ring
refill (:mod:`.rx`) and the Tx burst with the completion-ring drain (:mod:`.tx`).
"""
