"""The control plane of one vhost-user device: message handlers, ring states, the link.

:class:`VhostDevice` is what the socket loop (:mod:`.control`) hands every checked message to
(:meth:`VhostDevice.handle`).  It keeps the negotiated features, the mapped memory table
(:mod:`.memory`) and one :class:`Vring` per vring it serves, and it decides which queue blocks
are up: a ring's queue is up only while the ring is started (KICK received, addresses
translated), enabled, and the device is ready (vrings 0 and 1 started, enabled, with their
calls set, and DRIVER_OK in the status when STATUS was negotiated) -- docs/vhost.md, "Ring
states and link".  Every change of a queue's configuration happens while it is down
(:func:`~pktbuf.drivers.vhost.queue.queue_down` waits until no burst is inside it), and memory
is unmapped only after every queue using it is down.

A handler raises :class:`~pktbuf.drivers.vhost.proto.VhostViolation` for anything the front end
must not do; the socket loop turns it into a NACK (when an ack was asked for) or a disconnect
with that reason.  This class trusts only what :func:`~pktbuf.drivers.vhost.proto.check_message`
already checked (sizes and fd counts); every value is checked here.
"""
from __future__ import annotations

import ctypes
import os
import select

from . import proto as P
from .layout import (DESC_SIZE, EVENT_F_DISABLE, Q_CALLFD, QS_AVAIL_WRAP, QS_ERR, QS_ERR_VAL,
                     QS_LAST_AVAIL, USED_F_NO_NOTIFY,
                     reason as v_reason)
from .memory import map_regions
from .queue import queue_alloc, queue_configure, queue_down, queue_up

__all__ = ["VhostDevice", "Vring"]

_DRAIN_US = 2_000_000


def _close(fd: int) -> None:
    if fd is not None and fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


def _is_eventfd(fd: int) -> bool:
    """Whether ``fd`` is an eventfd (a front end's kick fd is only slept on, and only written
    to wake a sleeper, when it is: writing 8 bytes into anything else could block or land in
    the peer's file)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[eventfd]"
    except OSError:
        return False


def _wake(fd: int) -> None:
    """Add 1 to an eventfd unless that would block (the peer may have left its counter at
    the maximum, and its fd in blocking mode)."""
    p = select.poll()
    p.register(fd, select.POLLOUT)
    try:
        if p.poll(0):
            os.eventfd_write(fd, 1)
    except OSError:
        pass


class Vring:
    """What the front end told us about one vring, and its queue block ``q``."""

    def __init__(self, index: int, q):
        self.index = index
        self.q = q
        self.reset()

    def reset(self) -> None:
        self.num = 0
        self.base = 0
        self.addr = None            # (desc, used, avail) user-space addresses
        self.kick = -1
        self.kick_eventfd = False   # the kick fd is an eventfd (rx_wait may sleep on it)
        self.call = -1
        self.call_set = False
        self.enabled = False
        self.started = False
        self.up = False


class VhostDevice:
    """One vhost-user device of ``queues`` queue pairs, its Rx mbufs from ``pool``."""

    def __init__(self, queues: int, pool, port_id: int = 0):
        self.queues = queues
        self.pool = pool
        self.port_id = port_id
        self.mbuf_cap = int(pool.data_room) - int(pool.headroom)
        self.vrings = [Vring(i, queue_alloc()) for i in range(2 * queues)]
        self.regions = []
        self.reason = None          # why the link last went down
        self.connects = 0
        self._reset_negotiation()

    # -- the queues pktbuf's port exposes: Rx k drains vring 2k+1, Tx k fills vring 2k --------
    def rx_queue(self, k: int):
        return self.vrings[2 * k + 1].q

    def tx_queue(self, k: int):
        return self.vrings[2 * k].q

    def _reset_negotiation(self) -> None:
        self.features = 0
        self.protocol = 0
        self.status = 0
        self.hdr = 10

    # -- link ------------------------------------------------------------------------------
    @property
    def link_up(self) -> bool:
        return all(v.up for v in self.vrings[:2])

    def _ready(self) -> bool:
        for v in self.vrings[:2]:
            if not (v.started and v.enabled and v.call_set):
                return False
        if self.protocol >> P.PROTO_STATUS & 1:
            return bool(self.status & P.S_DRIVER_OK)
        return True

    def sync(self) -> None:
        """Bring each queue up or down to match the ring states (after every message)."""
        ready = self._ready()
        for v in self.vrings:
            want = ready and v.started and v.enabled
            if want and not v.up:
                queue_up(v.q.st)
                v.up = True
            elif not want and v.up:
                self._down(v)

    def _down(self, v: Vring) -> None:
        if v.up:
            queue_down(v.q.st, 0)         # the flag first: a waiter that wakes sees it ...
            if v.index % 2 == 1 and v.kick >= 0 and v.kick_eventfd:
                _wake(v.kick)             # ... wake a receiver asleep in vhost_rx_wait
            queue_down(v.q.st, _DRAIN_US)
            v.up = False

    def datapath_fault(self) -> str | None:
        """The reason of the first ring a burst failed, or None."""
        for v in self.vrings:
            if v.q.st[QS_ERR]:
                return f"vring {v.index}: {v_reason(v.q.st[QS_ERR], v.q.st[QS_ERR_VAL])}"
        return None

    def disconnect(self, why: str) -> None:
        """The connection is gone (or we drop it): every queue down, every fd closed, memory
        unmapped, negotiation forgotten.  Counters stay."""
        for v in self.vrings:
            self._down(v)
        for v in self.vrings:
            self._stop(v)
            _close(v.call)
            v.reset()
        self._unmap()
        self._reset_negotiation()
        self.reason = why

    def _unmap(self) -> None:
        for r in self.regions:
            r.close()
        self.regions = []

    # -- helpers ---------------------------------------------------------------------------
    def _vring(self, index: int, what: str) -> Vring:
        if not 0 <= index < len(self.vrings):
            raise P.VhostViolation(f"{what}: vring {index} (this device has {len(self.vrings)})")
        return self.vrings[index]

    def _uva_to_host(self, uva: int, size: int, align: int, what: str) -> int:
        if uva % align:
            raise P.VhostViolation(f"{what} address {uva:#x} not {align}-byte aligned")
        for r in self.regions:
            if r.uva <= uva and uva + size <= r.uva + r.size:
                return r.host + (uva - r.uva)
        raise P.VhostViolation(f"{what} [{uva:#x}, {uva + size:#x}) not inside one region")

    def _stop(self, v: Vring) -> None:
        """Stop a ring (down first): keep its base, close its kick."""
        self._down(v)
        if v.started:
            v.base = self._base_of(v)
        v.started = False
        _close(v.kick)
        v.kick = -1
        v.kick_eventfd = False

    def _start(self, v: Vring) -> None:
        """KICK: translate the ring's addresses, configure its queue (down)."""
        if not self.regions:
            raise P.VhostViolation(f"vring {v.index} kicked before SET_MEM_TABLE")
        if v.addr is None or v.num == 0:
            raise P.VhostViolation(f"vring {v.index} kicked before SET_VRING_NUM/ADDR")
        n = v.num
        ev = 2 if self.features >> P.VIRTIO_RING_F_EVENT_IDX & 1 else 0
        d_uva, u_uva, a_uva = v.addr
        desc = self._uva_to_host(d_uva, DESC_SIZE * n, 16, f"vring {v.index} descriptor table")
        base = v.base
        if self.packed:
            # avail / used are the driver's and the device's event suppression areas
            avail = self._uva_to_host(a_uva, 4, 4, f"vring {v.index} driver event area")
            used = self._uva_to_host(u_uva, 4, 4, f"vring {v.index} device event area")
            if base & 0x7FFF >= n:
                raise P.VhostViolation(f"vring {v.index}: base {base:#x} past a ring of {n}")
            ctypes.c_uint16.from_address(used + 2).value = EVENT_F_DISABLE   # we poll
        else:
            avail = self._uva_to_host(a_uva, 4 + 2 * n + ev, 2, f"vring {v.index} avail ring")
            used = self._uva_to_host(u_uva, 4 + 8 * n + ev, 4, f"vring {v.index} used ring")
            used_idx = ctypes.c_uint16.from_address(used + 2).value
            if used_idx != base:       # a front end that reconnected says 0: adopt its ring's
                base = used_idx         # used index, as DPDK's back end does
            ctypes.c_uint16.from_address(used).value = USED_F_NO_NOTIFY     # we poll
        f = self.features
        queue_configure(v.q, desc=desc, avail=avail, used=used, num=n,
                        regions=[(r.gpa, r.size, r.host) for r in self.regions], hdr=self.hdr,
                        mrg=bool(f >> P.VIRTIO_NET_F_MRG_RXBUF & 1), event_idx=bool(ev),
                        indirect=bool(f >> P.VIRTIO_RING_F_INDIRECT_DESC & 1),
                        callfd=v.call, pool_id=self.pool.id, mbuf_cap=self.mbuf_cap,
                        port=self.port_id, vring=v.index, last_avail=base, used_idx=base,
                        packed=self.packed,
                        kickfd=v.kick if v.kick_eventfd else -1)
        v.started = True
        if not self.protocol_features_on:
            v.enabled = True

    def _base_of(self, v: Vring) -> int:
        """The ring's next avail index as GET_VRING_BASE reports it (packed: | wrap << 15)."""
        last = int(v.q.st[QS_LAST_AVAIL])
        return last | int(v.q.st[QS_AVAIL_WRAP]) << 15 if self.packed else last

    @property
    def packed(self) -> bool:
        return bool(self.features >> P.VIRTIO_F_RING_PACKED & 1)

    @property
    def protocol_features_on(self) -> bool:
        return bool(self.features >> P.VHOST_USER_F_PROTOCOL_FEATURES & 1)

    @property
    def acks(self) -> bool:
        return bool(self.protocol >> P.PROTO_REPLY_ACK & 1)

    # -- the handlers ----------------------------------------------------------------------
    def handle(self, req: int, payload: bytes, fds: list) -> bytes | None:
        """Handle one checked message; returns the reply body, or None.  Adopted fds are
        removed from ``fds`` (the caller closes what is left)."""
        name = P.NAMES[req]
        return getattr(self, "_" + name.lower())(payload, fds)

    def _get_features(self, payload, fds):
        return P.U64.pack(P.FEATURES_OFFERED)

    def _set_features(self, payload, fds):
        (v,) = P.U64.unpack(payload)
        if v & ~P.FEATURES_OFFERED:
            raise P.VhostViolation(f"SET_FEATURES {v:#x}: bits {v & ~P.FEATURES_OFFERED:#x} "
                                   "were not offered")
        if v != self.features and any(r.started for r in self.vrings):
            raise P.VhostViolation("SET_FEATURES changes features while rings run")
        self.features = v
        self.hdr = 12 if v & ((1 << P.VIRTIO_F_VERSION_1) | (1 << P.VIRTIO_NET_F_MRG_RXBUF)
                              | (1 << P.VIRTIO_F_RING_PACKED)) else 10

    def _set_owner(self, payload, fds):
        return None

    def _reset_owner(self, payload, fds):
        for v in self.vrings:
            self._stop(v)
            v.enabled = False
        self._reset_negotiation()

    def _set_mem_table(self, payload, fds):
        regions = P.memory_regions(payload)
        taken = list(fds)
        fds.clear()                   # map_regions owns them now: it closes them on failure
        new = map_regions(regions, taken)
        running = [v for v in self.vrings if v.started]
        for v in running:             # nothing may use the old memory past here
            self._down(v)
        old, self.regions = self.regions, new
        for r in old:
            r.close()
        for v in running:             # none of them may come up with an old address
            v.base = self._base_of(v)
            v.started = False
        for v in running:             # re-translate them in the new table (a failure leaves
            self._start(v)            # it and the rest stopped)

    def _set_vring_num(self, payload, fds):
        index, num = P.STATE.unpack(payload)
        v = self._vring(index, "SET_VRING_NUM")
        if not 1 <= num <= P.MAX_VRING_NUM or (num & (num - 1) and not self.packed):
            raise P.VhostViolation(f"SET_VRING_NUM {num}: not "
                                   f"{'' if self.packed else 'a power of two '}in 1..32768")
        if v.started:
            raise P.VhostViolation(f"SET_VRING_NUM on running vring {index}")
        v.num = num

    def _set_vring_addr(self, payload, fds):
        index, flags, desc, used, avail, _log = P.ADDR.unpack(payload)
        v = self._vring(index, "SET_VRING_ADDR")
        if not self.regions:
            raise P.VhostViolation("SET_VRING_ADDR before SET_MEM_TABLE")
        if flags & ~1:
            raise P.VhostViolation(f"SET_VRING_ADDR flags {flags:#x}")
        if v.started:
            raise P.VhostViolation(f"SET_VRING_ADDR on running vring {index}")
        v.addr = (desc, used, avail)

    def _set_vring_base(self, payload, fds):
        index, num = P.STATE.unpack(payload)
        v = self._vring(index, "SET_VRING_BASE")
        if num > 0xFFFF:
            raise P.VhostViolation(f"SET_VRING_BASE {num:#x} (16 bits)")
        if v.started:
            raise P.VhostViolation(f"SET_VRING_BASE on running vring {index}")
        v.base = num

    def _get_vring_base(self, payload, fds):
        index, _ = P.STATE.unpack(payload)
        v = self._vring(index, "GET_VRING_BASE")
        self._stop(v)
        _close(v.call)
        v.call, v.call_set, v.addr = -1, False, None
        return P.STATE.pack(index, v.base)

    def _vring_file(self, payload, fds, what):
        (val,) = P.U64.unpack(payload)
        v = self._vring(val & P.VRING_IDX_MASK, what)
        fd = -1
        if not val & P.VRING_NOFD:
            fd = fds.pop(0)
        return v, fd

    def _set_vring_kick(self, payload, fds):
        v, fd = self._vring_file(payload, fds, "SET_VRING_KICK")
        self._stop(v)
        v.kick = fd
        v.kick_eventfd = fd >= 0 and _is_eventfd(fd)
        self._start(v)

    def _set_vring_call(self, payload, fds):
        v, fd = self._vring_file(payload, fds, "SET_VRING_CALL")
        self._down(v)                 # the data path must not write to a closed fd number
        _close(v.call)                # (sync() brings the queue back up after the message)
        v.call, v.call_set = fd, True
        v.q.cfg[Q_CALLFD] = fd

    def _set_vring_err(self, payload, fds):
        _, fd = self._vring_file(payload, fds, "SET_VRING_ERR")
        _close(fd)

    def _get_protocol_features(self, payload, fds):
        return P.U64.pack(P.PROTOCOL_OFFERED)

    def _set_protocol_features(self, payload, fds):
        (v,) = P.U64.unpack(payload)
        if v & ~P.PROTOCOL_OFFERED:
            raise P.VhostViolation(f"SET_PROTOCOL_FEATURES {v:#x}: bits "
                                   f"{v & ~P.PROTOCOL_OFFERED:#x} were not offered")
        self.protocol = v

    def _get_queue_num(self, payload, fds):
        return P.U64.pack(self.queues)

    def _set_vring_enable(self, payload, fds):
        index, num = P.STATE.unpack(payload)
        v = self._vring(index, "SET_VRING_ENABLE")
        if num not in (0, 1):
            raise P.VhostViolation(f"SET_VRING_ENABLE {num} (0 or 1)")
        v.enabled = bool(num)

    def _set_status(self, payload, fds):
        (v,) = P.U64.unpack(payload)
        if v > 0xFF:
            raise P.VhostViolation(f"SET_STATUS {v:#x} (8 bits)")
        self.status = v

    def _get_status(self, payload, fds):
        return P.U64.pack(self.status)

    def close(self) -> None:
        self.disconnect("port closed")
