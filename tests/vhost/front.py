"""A small vhost-user front end for the tests: the messages DPDK's ``net_virtio_user`` sends,
in its order (docs/vhost.md), over guest memory of our own (tests/vhost/guest.py) -- and the
means to send anything else, malformed on purpose."""
from __future__ import annotations

import os
import socket
import struct
import time

from pktbuf.drivers.vhost import proto as P

from .guest import GuestMem, SplitRing

FEATURES = ((1 << P.VIRTIO_NET_F_MRG_RXBUF) | (1 << P.VIRTIO_RING_F_INDIRECT_DESC)
            | (1 << P.VHOST_USER_F_PROTOCOL_FEATURES) | (1 << P.VIRTIO_F_VERSION_1)
            | (1 << P.VIRTIO_F_IN_ORDER))
PROTOCOL = P.PROTOCOL_OFFERED


class Front:
    def __init__(self, path: str, timeout: float = 10.0):
        end = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)
        self.sock.settimeout(10)
        self.mem = None
        self.rings = []
        self.calls = []

    # -- raw -------------------------------------------------------------------------------
    def send(self, req: int, payload: bytes = b"", fds=(), flags: int = 1, size=None):
        hdr = P.HDR.pack(req, flags, len(payload) if size is None else size)
        socket.send_fds(self.sock, [hdr + payload], list(fds))

    def reply(self):
        hdr = self._exact(P.HDR_SIZE)
        req, flags, size = P.HDR.unpack(hdr)
        return req, flags, self._exact(size)

    def _exact(self, n):
        b = b""
        while len(b) < n:
            c = self.sock.recv(n - len(b))
            if not c:
                raise EOFError("back end closed the connection")
            b += c
        return b

    def call(self, req: int, payload: bytes = b"", fds=(), flags: int = 1):
        self.send(req, payload, fds, flags)
        return self.reply()

    def u64(self, req, v, flags=1, fds=()):
        self.send(req, struct.pack("<Q", v), fds, flags)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(64) == b""
        except OSError:
            return True

    def close(self):
        self.sock.close()

    # -- the handshake ---------------------------------------------------------------------
    def negotiate(self, features=FEATURES, protocol=PROTOCOL):
        self.send(P.SET_OWNER)
        req, flags, body = self.call(P.GET_FEATURES)
        assert (req, flags) == (P.GET_FEATURES, P.REPLY_FLAGS)
        offered = struct.unpack("<Q", body)[0]
        self.call(P.GET_PROTOCOL_FEATURES)
        self.u64(P.SET_PROTOCOL_FEATURES, protocol)
        self.u64(P.SET_FEATURES, features & offered)

    def ack(self):
        req, flags, body = self.reply()
        return struct.unpack("<Q", body)[0]

    def mem_table(self, mem: GuestMem, regions=None, fds=None):
        regions = regions or [(mem.gpa, mem.size, mem.uva, 0)]
        pl = P.MEMTABLE_HDR.pack(len(regions), 0) + b"".join(P.REGION.pack(*r) for r in regions)
        fds = fds if fds is not None else [mem.region.fd] * len(regions)
        self.send(P.SET_MEM_TABLE, pl, fds, flags=1 | P.F_NEED_REPLY)
        return self.ack()

    def ring(self, index: int, r: SplitRing, base: int = 0):
        m = r.mem
        self.send(P.SET_VRING_NUM, P.STATE.pack(index, r.n))
        self.send(P.SET_VRING_BASE, P.STATE.pack(index, base))
        self.send(P.SET_VRING_ADDR, P.ADDR.pack(index, 0, m.uva + r.desc, m.uva + r.used,
                                                m.uva + r.avail, 0))
        kick = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.u64(P.SET_VRING_KICK, index, fds=[kick])
        os.close(kick)

    def setup(self, n: int = 64, pairs: int = 1, size: int = 1 << 20):
        """Everything up to DRIVER_OK for ``pairs`` queue pairs; returns the rings."""
        self.negotiate()
        for i in range(2 * pairs):
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self.calls.append(fd)
            self.u64(P.SET_VRING_CALL, i, fds=[fd])
        self.u64(P.SET_STATUS, 0x0B, flags=1 | P.F_NEED_REPLY)
        assert self.ack() == 0
        self.mem = GuestMem(size)
        assert self.mem_table(self.mem) == 0
        self.rings = [SplitRing(self.mem, n) for _ in range(2 * pairs)]
        for i, r in enumerate(self.rings):
            self.ring(i, r)
        for i in range(2 * pairs):
            self.send(P.SET_VRING_ENABLE, P.STATE.pack(i, 1))
        self.u64(P.SET_STATUS, 0x0F, flags=1 | P.F_NEED_REPLY)
        assert self.ack() == 0
        return self.rings
