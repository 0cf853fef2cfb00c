"""vhost-user back end: pktbuf as the device side of a virtio-net device (``net_vhost``).

The port is :class:`~pktbuf.drivers.vhost.api.port.VhostPort` (``net_vhost0,iface=PATH``).
Modules: :mod:`.proto` (messages, feature bits, size and fd checks), :mod:`.memory` (the memory
table, mapped between guard pages), :mod:`.layout` (split-ring layout, queue block, failure
codes), :mod:`.queue` (burst entry/exit, down/up), :mod:`.vring` (address translation, split
chain walking), :mod:`.packed` (packed-ring chains and used descriptors), :mod:`.rx` (guest Tx
-> pktbuf Rx) and :mod:`.tx` (pktbuf Tx -> guest Rx), split and packed, :mod:`.device`
(message handling, ring and link states), :mod:`.control` (the socket and its thread).
docs/vhost.md states the facts.
"""
