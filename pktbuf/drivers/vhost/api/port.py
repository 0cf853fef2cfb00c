"""``net_vhost``: pktbuf as the vhost-user back end of a VM's or container's virtio-net device.

Device string as DPDK's ``net_vhost`` takes it: ``net_vhost0,iface=/tmp/vhost.sock[,client=1]
[,queues=N]``.  Server mode by default (the socket file is created when the port opens; it
must not exist), ``client=1`` connects and retries once a second.  ``queues`` queue pairs
(1..8); the port's Rx queue k drains the guest's Tx vring 2k+1, its Tx queue k fills the
guest's Rx vring 2k.  Packets move once the front end has set the rings up and the link is UP
(:meth:`VhostPort.link`, :meth:`VhostPort.wait_link_up`); before that, and after the link
goes down, bursts return 0.  Why it last went down: :attr:`VhostPort.disconnect_reason`.
"""
from __future__ import annotations

import os

from ....errors import InvalidArgument, VhostError
from ...common.api.port import arg_bool, arg_int, check_devargs
from ...common.kinds import K_VHOST
from ..control import ControlLoop
from ..device import VhostDevice
from ..rx import vhost_rx_burst
from ..tx import vhost_tx_burst
from ..wait import vhost_rx_wait
from .pairs import VringPairPort, check_socket_path

__all__ = ["VhostPort"]

ACCEPTED = ("iface", "client", "queues")
MAX_QUEUE_PAIRS = 8


class VhostPort(VringPairPort):
    """A vhost-user back end as a port: ``VhostPort(path, pool, client=False, queues=1)``."""

    driver = "net_vhost"
    kind = K_VHOST
    _rx_kernel = vhost_rx_burst
    _tx_kernel = vhost_tx_burst
    _wait_kernel = vhost_rx_wait

    def __init__(self, path: str, pool, *, client: bool = False, queues: int = 1,
                 name: str = "net_vhost0", port_id: int = 0, mac: bytes | None = None):
        check_socket_path("net_vhost", "iface", path, not client,
                          "remove the stale file or use client=1")
        if isinstance(queues, bool) or not isinstance(queues, int) or \
                not 1 <= queues <= MAX_QUEUE_PAIRS:
            raise InvalidArgument(f"queues must be 1..{MAX_QUEUE_PAIRS}, got {queues!r}")
        super().__init__(name, port_id, pool)
        if int(pool.data_room) - int(pool.headroom) <= 0:
            raise InvalidArgument("the pool's mbufs have no data room")
        self.path = path
        self.client = bool(client)
        self.device = VhostDevice(queues, pool, port_id)
        self.mac_addr = mac if mac is not None else bytes([0x02]) + os.urandom(5)
        try:
            self.control = ControlLoop(self.device, path, self.client)
        except OSError as e:
            raise VhostError(f"net_vhost: cannot listen on {path!r}: {e.strerror}") from None

    @classmethod
    def from_devargs(cls, name: str, args, pool, *, port_id: int = 0, nb_rx_queues: int = 1,
                     nb_tx_queues: int = 1, **kw) -> "VhostPort":
        d = "net_vhost"
        check_devargs(d, args, ACCEPTED)
        if "iface" not in args:
            raise InvalidArgument(f"{d}: iface=PATH is required")
        queues = arg_int(d, args, "queues", max(1, nb_rx_queues, nb_tx_queues), 1,
                         MAX_QUEUE_PAIRS)
        return cls(args["iface"], pool, client=arg_bool(d, args, "client", False),
                   queues=queues, name=name, port_id=port_id)

    # -- the port model (queue pairs, counters, link: .pairs) ----------------------------
    @property
    def link_up(self) -> bool:
        return not self.closed and self.device.link_up

    def wait_link_up(self, timeout: float = 10.0) -> bool:
        """Wait until the front end has set the rings up; True if the link is UP."""
        return self.control.wait(lambda: self.link_up, timeout)

    def _close(self) -> None:
        self.control.close()
