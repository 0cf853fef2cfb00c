"""``net_virtio_user``: pktbuf as the virtio front end of a vhost-user back end.

Device string as DPDK's ``net_virtio_user`` takes it: ``net_virtio_user0,path=/tmp/vhost.sock
[,server=1][,queues=N][,queue_size=N][,mrg_rxbuf=0|1][,in_order=0|1][,packed_vq=0|1]
[,event_idx=0|1][,indirect=0|1]``.
Client mode by default: the back end's socket must exist when the port opens.  ``server=1``
creates the socket (it must not exist) and waits for a back end.  Port Rx queue k is vring 2k,
Tx queue k vring 2k+1.  Packets move once the back end has acked DRIVER_OK and the link is UP
(:meth:`VirtioUserPort.wait_link_up`); before that, and after it goes down, bursts return 0.
Why it last went down: :attr:`VirtioUserPort.disconnect_reason`.

Zero copy: the memory table the back end maps is this port's ring memory and the data of the
domain's pools, so sent mbufs are the back end's to read until it hands them back (they are
freed at a later Tx burst or when the link goes down), and received frames are written into
mbufs posted in advance.  docs/vhost.md says where this differs from DPDK's virtio_user.
"""
from __future__ import annotations

import os

from ....errors import InvalidArgument, VhostError
from ...common.api.port import arg_bool, arg_int, check_devargs
from ...common.kinds import K_VIRTIO_USER
from ..device import VirtioUserDevice
from ...vhost.api.pairs import VringPairPort, check_socket_path
from ..layout import MAX_QUEUE_SIZE
from ..rx import virtio_user_rx_burst
from ..tx import virtio_user_tx_burst
from ..wait import virtio_user_rx_wait

__all__ = ["VirtioUserPort"]

ACCEPTED = ("path", "server", "queues", "queue_size", "mrg_rxbuf", "in_order", "packed_vq",
            "event_idx", "indirect")
MAX_QUEUE_PAIRS = 8


class VirtioUserPort(VringPairPort):
    """A virtio-user front end as a port: ``VirtioUserPort(path, pool, server=False,
    queues=1, queue_size=256, mrg_rxbuf=True, in_order=True, packed_vq=False)``;
    ``packed_vq=True`` asks for packed rings (used when the back end offers them, else split,
    as DPDK's front end does); ``event_idx=True`` offers VIRTIO_RING_F_EVENT_IDX (kicks then
    follow the back end's ``avail_event``, calls this side's ``used_event``; off by default,
    as DPDK's front end never offers it); ``indirect=True`` offers
    VIRTIO_RING_F_INDIRECT_DESC (a Tx packet of 2..16 descriptors then takes one ring slot
    pointing at a table)."""

    driver = "net_virtio_user"
    kind = K_VIRTIO_USER
    _tx_errors_counted = True     # packets from memory outside the table (QS_ERRORS)
    _rx_kernel = virtio_user_rx_burst
    _tx_kernel = virtio_user_tx_burst
    _wait_kernel = virtio_user_rx_wait

    def __init__(self, path: str, pool, *, server: bool = False, queues: int = 1,
                 queue_size: int = 256, mrg_rxbuf: bool = True, in_order: bool = True,
                 packed_vq: bool = False, event_idx: bool = False, indirect: bool = False,
                 name: str = "net_virtio_user0", port_id: int = 0,
                 mac: bytes | None = None):
        check_socket_path("net_virtio_user", "path", path, server, "remove the stale file")
        for k, v in (("queues", queues), ("queue_size", queue_size)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise InvalidArgument(f"{k} must be an int, got {v!r}")
        if not 1 <= queues <= MAX_QUEUE_PAIRS:
            raise InvalidArgument(f"queues must be 1..{MAX_QUEUE_PAIRS}, got {queues}")
        if not 2 <= queue_size <= MAX_QUEUE_SIZE or queue_size & (queue_size - 1):
            raise InvalidArgument(f"queue_size must be a power of two in 2..{MAX_QUEUE_SIZE}, "
                                  f"got {queue_size}")
        super().__init__(name, port_id, pool)
        if int(pool.headroom) < 12:
            raise InvalidArgument("the pool's mbufs need at least 12 bytes of headroom "
                                  "(the virtio-net header is received there)")
        if int(pool.data_room) - int(pool.headroom) <= 0:
            raise InvalidArgument("the pool's mbufs have no data room")
        self.path = path
        self.server = bool(server)
        self.mac_addr = mac if mac is not None else bytes([0x02]) + os.urandom(5)
        try:
            self.device = VirtioUserDevice(path, pool, server=self.server, queues=queues,
                                           queue_size=queue_size, mrg_rxbuf=bool(mrg_rxbuf),
                                           in_order=bool(in_order), port_id=port_id,
                                           packed=bool(packed_vq), event_idx=bool(event_idx),
                                           indirect=bool(indirect))
        except OSError as e:
            how = "listen on" if server else "connect to"
            raise VhostError(f"net_virtio_user: cannot {how} {path!r}: {e.strerror}") from None

    @classmethod
    def from_devargs(cls, name: str, args, pool, *, port_id: int = 0, nb_rx_queues: int = 1,
                     nb_tx_queues: int = 1, **kw) -> "VirtioUserPort":
        d = "net_virtio_user"
        check_devargs(d, args, ACCEPTED)
        if "path" not in args:
            raise InvalidArgument(f"{d}: path=PATH is required")
        queues = arg_int(d, args, "queues", max(1, nb_rx_queues, nb_tx_queues), 1,
                         MAX_QUEUE_PAIRS)
        return cls(args["path"], pool, server=arg_bool(d, args, "server", False),
                   queues=queues, queue_size=arg_int(d, args, "queue_size", 256, 2,
                                                     MAX_QUEUE_SIZE),
                   mrg_rxbuf=arg_bool(d, args, "mrg_rxbuf", True),
                   in_order=arg_bool(d, args, "in_order", True),
                   packed_vq=arg_bool(d, args, "packed_vq", False),
                   event_idx=arg_bool(d, args, "event_idx", False),
                   indirect=arg_bool(d, args, "indirect", False), name=name, port_id=port_id)

    # -- the port model (queue pairs, counters, link: vhost.api.pairs) --------------------
    @property
    def link_up(self) -> bool:
        return not self.closed and self.device.up

    @property
    def features(self) -> int:
        """The virtio features negotiated on the current connection (0 while down)."""
        return self.device.features

    def wait_link_up(self, timeout: float = 10.0) -> bool:
        """Wait until the back end has acked DRIVER_OK; True if the link is UP."""
        return self.device.wait(lambda: self.link_up, timeout)

    def wait_link_down(self, timeout: float = 10.0) -> bool:
        return self.device.wait(lambda: not self.device.up, timeout)

    def _close(self) -> None:
        self.device.close()
