"""What the two vhost-user ports have in common as ports: queue pairs over vrings.

Both ``net_vhost`` (:mod:`.port`) and ``net_virtio_user``
(:mod:`pktbuf.drivers.virtio_user.api.port`) drive ``queues`` pairs of vrings through a device
object with ``queues``, ``rx_queue(k)``, ``tx_queue(k)``, ``reason`` and ``connects``, over a
UNIX socket whose path both validate the same way; their queue blocks keep the packet counters
at the same words.  Only the link's meaning (who set the rings up) and the control side differ.
"""
from __future__ import annotations

import os

from ....errors import InvalidArgument
from ...common.api.port import Port, int_arg
from ..layout import QS_BYTES, QS_ERRORS, QS_MISSED, QS_NOMBUF, QS_PACKETS

__all__ = ["VringPairPort", "check_socket_path"]


def check_socket_path(driver: str, key: str, path, creates: bool, hint: str) -> None:
    """A socket path this port may use: 1..107 bytes, its directory exists, and -- when the
    port creates the socket (server side) -- no file is there yet."""
    if not isinstance(path, str) or not path or "\0" in path or len(path.encode()) > 107:
        raise InvalidArgument(f"{key} must be a socket path of 1..107 bytes, got {path!r}")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise InvalidArgument(f"socket directory {d!r} does not exist")
    if creates and os.path.lexists(path):
        raise InvalidArgument(f"{driver}: {path!r} exists (a server creates its socket; {hint})")


class VringPairPort(Port):
    """The port model of a device of vring queue pairs (subclasses set ``self.device``)."""

    mtu = 1500
    _tx_errors_counted = False     # Tx queues also count dropped packets in QS_ERRORS
    _wait_kernel = None            # (q, timeout_ms) -> 1 / 0 / -ENETDOWN

    @property
    def nb_rx_queues(self) -> int:
        return self.device.queues

    @property
    def nb_tx_queues(self) -> int:
        return self.device.queues

    def rx_queue(self, i: int = 0):
        self._check_open()
        return self.device.rx_queue(self._qid(i))

    def tx_queue(self, i: int = 0):
        self._check_open()
        return self.device.tx_queue(self._qid(i))

    def rx_wait(self, queue: int = 0, timeout_ms: int = -1) -> int:
        """Sleep until Rx queue ``queue`` has something (1) or ``timeout_ms`` passes (0; -1
        waits forever); ``-ENETDOWN`` when the link is down or goes down meanwhile.
        Interrupt mode: the peer is asked to notify this queue only while it sleeps
        (docs/vhost.md, "Interrupt mode").  The kernel is ``_wait_kernel``, for @njit loops."""
        q = self.rx_queue(queue)
        t = int_arg(self.driver, "timeout_ms", timeout_ms, -1, 1 << 30)
        return int(type(self)._wait_kernel(q, t))

    def _qid(self, i) -> int:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.device.queues:
            raise InvalidArgument(f"queue must be 0..{self.device.queues - 1}, got {i!r}")
        return i

    def _queue_counters(self):
        dev = self.device
        rx = [{"packets": int(q.st[QS_PACKETS]), "bytes": int(q.st[QS_BYTES]),
               "nombuf": int(q.st[QS_NOMBUF]), "errors": int(q.st[QS_ERRORS])}
              for q in (dev.rx_queue(k) for k in range(dev.queues))]
        tx = [{"packets": int(q.st[QS_PACKETS]), "bytes": int(q.st[QS_BYTES]),
               "errors": int(q.st[QS_MISSED])
               + (int(q.st[QS_ERRORS]) if self._tx_errors_counted else 0)}
              for q in (dev.tx_queue(k) for k in range(dev.queues))]
        return rx, tx

    @property
    def disconnect_reason(self) -> str | None:
        """Why the link last went down (a protocol violation, a bad ring or reply, the peer
        closing), or None if it never did."""
        return self.device.reason

    @property
    def connects(self) -> int:
        return self.device.connects

    def link(self) -> dict:
        up = self.link_up
        return {"status": "UP" if up else "DOWN", "speed": 10000 if up else 0,
                "duplex": "full-duplex"}
