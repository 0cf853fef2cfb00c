"""virtio-user front end: pktbuf as the driver side of a vhost-user virtio-net device
(``net_virtio_user``).

The port is :class:`~pktbuf.drivers.virtio_user.api.port.VirtioUserPort`
(``net_virtio_user0,path=PATH``).  Modules: :mod:`.layout` (the queue block, failure codes),
:mod:`.rings` (the ring memory this side owns and shares), :mod:`.tx` / :mod:`.rx` (the split
ring's driver side: post, reclaim, harvest, every used entry checked), :mod:`.packed`,
:mod:`.tx_packed` / :mod:`.rx_packed` (the same for packed rings), :mod:`.queue` (configuration,
mbufs held by a ring given back), :mod:`.client` (framing and checking of the back end's replies),
:mod:`.device` (the handshake and the socket thread).  The message formats, feature bits and
ring layouts come from the back end's package (:mod:`pktbuf.drivers.vhost.proto`,
:mod:`pktbuf.drivers.vhost.layout`).  docs/vhost.md states the facts.
"""
