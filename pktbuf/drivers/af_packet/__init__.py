"""``net_af_packet``: a Linux interface as a port, through TPACKET_V3 mmap rings.

Kernels only (the socket set-up is the facade's, :mod:`pktbuf.drivers.af_packet.api`): the queue
layouts (:mod:`.layout`), the Rx burst over the V3 block ring (:mod:`.rx`), the Tx burst over
the fixed-frame Tx ring (:mod:`.tx`); the system calls they make are in :mod:`pktbuf.syscalls`.
"""
