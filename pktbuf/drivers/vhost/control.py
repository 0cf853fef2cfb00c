"""The vhost-user socket: listen or connect, read framed messages with their fds, answer.

One background thread per port (:class:`ControlLoop`).  Server mode (the default, as DPDK's
``net_vhost``): the socket file is bound when the port opens -- an existing file is an error --
and removed when it closes; one front end at a time, the next one accepted after a disconnect.
Client mode (``client=1``): connect, and after a failure or a disconnect retry once a second,
as DPDK's ``vhost_reconn`` thread does.

Framing (docs/vhost.md "Control channel"): the 12-byte header is read exactly, with up to 8
fds in ``SCM_RIGHTS``; a truncated control message (more fds) is a violation.  Then exactly
``size`` payload bytes (at most 632).  The message is checked
(:func:`~pktbuf.drivers.vhost.proto.check_message`) before the device sees it.  A violation is
answered with a NACK when the front end asked for an ack (REPLY_ACK negotiated), else the
connection is closed and the link goes down with the reason (:attr:`VhostDevice.reason`).
Every fd a message carried and no handler adopted is closed.  The loop also watches the queues:
a ring a burst failed takes the link down the same way.
"""
from __future__ import annotations

import array
import os
import socket
import threading
import time

from ...fdwait import readable
from . import proto as P

__all__ = ["ControlLoop"]

_POLL_S = 0.05
_READ_TIMEOUT_S = 10.0     # a message that started must be complete within this
_RETRY_S = 1.0
_CMSG_SPACE = socket.CMSG_SPACE(P.MAX_FDS * array.array("i").itemsize)


def _close_all(fds) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class _Closed(Exception):
    """The peer closed the connection (or it broke)."""


def read_message(sock: socket.socket):
    """``(request, flags, payload, fds)`` of the next message (blocking, with a timeout).
    Raises :class:`_Closed` on EOF or a socket error, VhostViolation for bad framing (the
    fds are closed then)."""
    fds: list[int] = []
    try:
        msg, anc, flags, _ = sock.recvmsg(P.HDR_SIZE, _CMSG_SPACE, socket.MSG_WAITALL)
    except OSError as e:
        raise _Closed(f"socket error: {e.strerror}") from None
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(data[:len(data) - len(data) % a.itemsize])
            fds.extend(a)
    if not msg:
        _close_all(fds)
        raise _Closed("front end closed the connection")
    if flags & socket.MSG_CTRUNC:
        _close_all(fds)
        raise P.VhostViolation(f"message with more than {P.MAX_FDS} fds")
    if len(msg) < P.HDR_SIZE:
        _close_all(fds)
        raise P.VhostViolation(f"short header ({len(msg)} bytes)")
    req, mflags, size = P.HDR.unpack(msg)
    if size > P.MAX_PAYLOAD:
        _close_all(fds)
        raise P.VhostViolation(f"{P.request_name(req)}: payload size {size} > {P.MAX_PAYLOAD}")
    payload = b""
    if size:
        buf = bytearray(size)
        got = 0
        try:
            while got < size:
                k = sock.recv_into(memoryview(buf)[got:], size - got)
                if k == 0:
                    break
                got += k
        except OSError as e:
            _close_all(fds)
            raise _Closed(f"socket error: {e.strerror}") from None
        if got < size:
            _close_all(fds)
            raise P.VhostViolation(f"{P.request_name(req)}: short payload ({got} of {size})")
        payload = bytes(buf)
    return req, mflags, payload, fds


class ControlLoop:
    """The socket thread of one device: ``path``, ``client`` mode or not."""

    def __init__(self, device, path: str, client: bool):
        self.device = device
        self.path = path
        self.client = client
        self._stop = threading.Event()
        self._conn: socket.socket | None = None
        self._lsock: socket.socket | None = None
        self.lock = threading.Lock()         # held while a message is handled
        if not client:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.bind(path)                 # fails if the file exists, as DPDK's does
                s.listen(1)
            except OSError:
                s.close()
                raise
            self._lsock = s
        self._thread = threading.Thread(target=self._run, name=f"vhost:{path}", daemon=True)
        self._thread.start()

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            conn = self._connect()
            if conn is None:
                continue
            self._conn = conn
            self.device.connects += 1
            why = self._serve(conn)
            with self.lock:
                self.device.disconnect(why)
            self._conn = None
            try:
                conn.close()
            except OSError:
                pass

    def _connect(self):
        if self.client:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
                return s
            except OSError:
                s.close()
                self._stop.wait(_RETRY_S)
                return None
        r = readable([self._lsock], _POLL_S)
        if not r or self._stop.is_set():
            return None
        try:
            conn, _ = self._lsock.accept()
            return conn
        except OSError:
            return None

    def _serve(self, conn: socket.socket) -> str:
        conn.settimeout(_READ_TIMEOUT_S)
        while not self._stop.is_set():
            fault = self.device.datapath_fault()
            if fault is not None:
                return fault
            try:
                r = readable([conn], _POLL_S)
            except (OSError, ValueError):
                return "socket closed"
            if not r:
                continue
            try:
                req, flags, payload, fds = read_message(conn)
            except _Closed as e:
                return str(e)
            except P.VhostViolation as e:
                return e.reason
            except socket.timeout:
                return "front end stalled in the middle of a message"
            try:
                why = self._dispatch(conn, req, flags, payload, fds)
            finally:
                _close_all(fds)
            if why is not None:
                return why
        return "port closed"

    def _dispatch(self, conn, req, flags, payload, fds) -> str | None:
        """Handle one message; a reason string when the connection must end."""
        dev = self.device
        need_ack = bool(flags & P.F_NEED_REPLY) and dev.acks
        try:
            P.check_message(req, payload, len(fds))
            with self.lock:
                try:
                    body = dev.handle(req, payload, fds)
                finally:
                    dev.sync()        # also after a refused message that changed ring states
        except P.VhostViolation as e:
            if need_ack:
                dev.reason = e.reason
                return self._send(conn, P.reply(req, P.U64.pack(1)))
            return e.reason
        if body is not None:
            return self._send(conn, P.reply(req, body))
        if need_ack:
            return self._send(conn, P.reply(req, P.U64.pack(0)))
        return None

    @staticmethod
    def _send(conn, data: bytes) -> str | None:
        try:
            conn.sendall(data)
        except OSError as e:
            return f"socket error: {e.strerror}"
        return None

    # -- facade side -----------------------------------------------------------------------
    def close(self) -> None:
        self._stop.set()
        c = self._conn
        if c is not None:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)
        if self._lsock is not None:
            self._lsock.close()
            try:
                os.unlink(self.path)
            except OSError:
                pass
        with self.lock:
            self.device.close()

    def wait(self, cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.01)
        return bool(cond())
