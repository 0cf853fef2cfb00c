"""The front end's side of the vhost-user control channel: send requests, read and check the
back end's replies.

Framing as QEMU's ``docs/interop/vhost-user.rst`` ("Message specification") and DPDK 22.11
``drivers/net/virtio/virtio_user/vhost_user.c`` (``vhost_user_write`` / ``vhost_user_read``):
a request is one ``sendmsg`` of the 12-byte header and its payload, fds in ``SCM_RIGHTS``.  A
reply is untrusted: its flags must be exactly ``0x5`` (version 1 | REPLY), its request the one
sent, its size what that request's reply carries (at most 264 bytes, the front end's largest
message), and it may carry no fds (any that arrive are closed).  An ack (REPLY_ACK) must be a
u64 0; anything else fails the step.  Every failure raises
:class:`~pktbuf.drivers.vhost.proto.VhostViolation` with the reason the link goes down with.
"""
from __future__ import annotations

import array
import os
import socket

from ..vhost import proto as P

__all__ = ["Channel", "MAX_REPLY"]

MAX_REPLY = 264
_CMSG = socket.CMSG_SPACE(P.MAX_FDS * array.array("i").itemsize)


class Channel:
    """One connection to a back end; ``acks``: REPLY_ACK negotiated."""

    def __init__(self, sock: socket.socket, timeout: float):
        self.sock = sock
        self.acks = False
        sock.settimeout(timeout)

    def send(self, req: int, payload: bytes = b"", fds=(), need_reply: bool = False) -> None:
        flags = P.F_VERSION | (P.F_NEED_REPLY if need_reply else 0)
        msg = P.HDR.pack(req, flags, len(payload)) + payload
        try:
            if fds:
                socket.send_fds(self.sock, [msg], list(fds))
            else:
                self.sock.sendall(msg)
        except OSError as e:
            raise P.VhostViolation(f"{P.request_name(req)}: socket error "
                                   f"({e.strerror or e})") from None

    def _exact(self, n: int, what: str) -> bytes:
        b = bytearray()
        while len(b) < n:
            try:
                msg, anc, _, _ = self.sock.recvmsg(n - len(b), _CMSG)
            except socket.timeout:
                raise P.VhostViolation(f"{what}: no reply from the back end") from None
            except OSError as e:
                raise P.VhostViolation(f"{what}: socket error ({e.strerror})") from None
            fds = []
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(data[:len(data) - len(data) % a.itemsize])
                    fds.extend(a)
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            if fds:
                raise P.VhostViolation(f"{what}: the reply carries {len(fds)} fds")
            if not msg:
                raise P.VhostViolation(f"{what}: the back end closed the connection")
            b += msg
        return bytes(b)

    def reply(self, req: int, size: int) -> bytes:
        """Read the reply to ``req``: checked header, ``size`` payload bytes."""
        name = P.request_name(req)
        r, flags, n = P.HDR.unpack(self._exact(P.HDR_SIZE, name))
        if flags != P.REPLY_FLAGS:
            raise P.VhostViolation(f"{name}: reply flags {flags:#x} (expected 0x5)")
        if r != req:
            raise P.VhostViolation(f"{name}: reply to request {r}")
        if n != size or n > MAX_REPLY:
            raise P.VhostViolation(f"{name}: reply of {n} bytes (expected {size})")
        return self._exact(n, name)

    def get_u64(self, req: int) -> int:
        self.send(req)
        return P.U64.unpack(self.reply(req, 8))[0]

    def request(self, req: int, payload: bytes = b"", fds=(), ack: bool = False) -> None:
        """A request without a reply body; with ``ack`` (and REPLY_ACK negotiated) the back
        end's ack is read and must be 0."""
        want = ack and self.acks
        self.send(req, payload, fds, need_reply=want)
        if want:
            (v,) = P.U64.unpack(self.reply(req, 8))
            if v != 0:
                raise P.VhostViolation(f"{P.request_name(req)}: the back end refused it "
                                       f"(ack {v:#x})")

    def get_vring_base(self, index: int) -> int:
        self.send(P.GET_VRING_BASE, P.STATE.pack(index, 0))
        i, num = P.STATE.unpack(self.reply(P.GET_VRING_BASE, 8))
        if i != index:
            raise P.VhostViolation(f"GET_VRING_BASE {index}: reply for vring {i}")
        return num
