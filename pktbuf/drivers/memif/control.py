"""memif control channel: the socket, fd passing, and the lock-step handshake of both roles.

The handshake classes are pure state machines over parsed messages (:mod:`.proto`): feed each
received message to ``on_message`` and send what it returns.  They check that every message
is acceptable *in the current state* and raise :class:`~pktbuf.errors.ProtocolError`
with the DISCONNECT reason otherwise.  The interface's control plane (:mod:`.device`) supplies
the parts that touch memory (creating the client's regions and rings, mapping the server's
view of them).

:class:`ControlLoop` is the one thread per socket that runs them: it accepts (server) or
connects (client, reconnecting if asked), moves messages, notices EOF and DISCONNECT, and
every few milliseconds asks its interfaces whether a data-path kernel has taken a queue down
after a validation failure (then it disconnects with that reason).  It sleeps in ``poll``
when there is nothing to do, so an idle interface costs no CPU.

Lock-step (docs/memif.md, "Handshake"): the client sends INIT only after HELLO and each next
message only after the previous ACK; the server answers every message with exactly one.
"""
from __future__ import annotations

import array
import os
import socket
import threading
import time

from . import proto as P
from ...errors import ProtocolError
from ...fdwait import readable

_ANC = socket.CMSG_SPACE(8 * 4) + socket.CMSG_SPACE(12)  # room for a few fds + ucred
_RECV = 2 * P.MSG_SIZE


# -- socket I/O --------------------------------------------------------------------------------
def make_address(path: str, abstract: bool):
    """The ``sockaddr_un`` for a memif socket (abstract: ``"\\0" + path``)."""
    if not path or len(path.encode()) >= 108:
        raise ValueError("socket path must be 1..107 bytes")
    return "\0" + path if abstract else path


def send_msg(sock: socket.socket, msg: bytes, fd: int | None = None) -> None:
    """Send one 128-byte message, with ``fd`` attached as SCM_RIGHTS when given."""
    anc = []
    if fd is not None and fd > 0:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())]
    sock.sendmsg([msg], anc)


def recv_msg(sock: socket.socket) -> tuple[bytes, list[int]]:
    """Receive one message and any fds; ``b""`` means the peer closed the connection.

    Every fd received is returned (the caller owns and must close them).  A truncated message
    or control buffer raises ``ProtocolError`` after closing what arrived.
    """
    data, anc, flags, _ = sock.recvmsg(_RECV, _ANC)
    fds: list[int] = []
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(cdata[:len(cdata) - len(cdata) % a.itemsize])
            fds.extend(a)
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        close_fds(fds)
        raise ProtocolError(P.R_SIZE, "truncated message")
    return data, fds


def close_fds(fds) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


# -- handshake state machines -----------------------------------------------------------------
class ClientHandshake:
    """Client side.  ``plan(hello)`` (from the interface) creates the shared memory and
    returns the messages to announce it: ``[(bytes, fd|None), ...]`` (INIT first, CONNECT last).
    """

    def __init__(self, plan):
        self._plan = plan
        self.state = "hello"          # hello -> acks -> connected-wait -> done
        self._queue: list = []
        self.peer_name = b""
        self.connected: P.Connected | None = None

    def on_message(self, msg, fds) -> list:
        close_fds(fds)                # a server never sends fds
        if isinstance(msg, P.Disconnect):
            raise PeerDisconnect(msg.reason)
        if self.state == "hello":
            if not isinstance(msg, P.Hello):
                raise ProtocolError(P.R_UNEXPECTED, f"{type(msg).__name__} before HELLO")
            if not (msg.min_version <= P.VERSION <= msg.max_version):
                raise ProtocolError(P.R_VERSION, f"{msg.min_version:#x}..{msg.max_version:#x}")
            self.peer_name = msg.name
            self._queue = list(self._plan(msg))
            self.state = "acks"
            return [self._queue.pop(0)]
        if self.state == "acks":
            if not isinstance(msg, P.Ack):
                raise ProtocolError(P.R_UNEXPECTED, f"{type(msg).__name__} instead of ACK")
            nxt = self._queue.pop(0)
            if not self._queue:
                self.state = "connected-wait"
            return [nxt]
        if self.state == "connected-wait":
            if not isinstance(msg, P.Connected):
                raise ProtocolError(P.R_UNEXPECTED, f"{type(msg).__name__} instead of CONNECTED")
            self.connected = msg
            self.state = "done"
            return []
        raise ProtocolError(P.R_UNEXPECTED, f"{type(msg).__name__} after CONNECTED")


class PeerDisconnect(Exception):
    """The peer sent DISCONNECT; ``reason`` is its string."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ServerHandshake:
    """Server side of one connection.

    ``lookup(init)`` returns the interface for an INIT or raises ``ProtocolError`` (ID not found,
    already connected, secret...).  The interface must offer ``n_rx`` / ``n_tx`` (its queue
    counts: C2S rings feed Rx, S2C rings feed Tx).  Received region and ring fds are kept here
    until :meth:`take` hands them over (or :meth:`close` closes them).
    """

    def __init__(self, lookup):
        self._lookup = lookup
        self.state = "init"           # init -> setup -> done
        self.iface = None
        self.init: P.Init | None = None
        self.regions: list[tuple[int, int]] = []          # (fd, size)
        self.rings: dict[tuple[bool, int], P.AddRing] = {}
        self.ring_fds: dict[tuple[bool, int], int] = {}
        self.connect: P.Connect | None = None

    @staticmethod
    def hello(name: str = "pktbuf", n_rx: int = P.MAX_QUEUES, n_tx: int = P.MAX_QUEUES) -> bytes:
        """HELLO advertising at most ``n_rx`` C2S and ``n_tx`` S2C rings (DPDK always offers
        255; offering our real counts lets the client create no ring we would refuse)."""
        return P.build_hello(name, max_c2s_ring=max(n_rx, 1) - 1, max_s2c_ring=max(n_tx, 1) - 1)

    def on_message(self, msg, fds) -> list:
        """Returns the reply messages; on ``Connect`` the caller then calls the interface's
        connect step and sends CONNECTED itself (it may still fail with a reason)."""
        fd, extra = (fds[0], fds[1:]) if fds else (None, [])
        close_fds(extra)
        try:
            return self._handle(msg, fd)
        except BaseException:
            if fd is not None and not self._owns(fd):
                close_fds([fd])
            raise

    def _owns(self, fd) -> bool:
        return any(f == fd for f, _ in self.regions) or fd in self.ring_fds.values()

    def _handle(self, msg, fd):
        if isinstance(msg, P.Disconnect):
            raise PeerDisconnect(msg.reason)
        if self.state == "init":
            if not isinstance(msg, P.Init):
                raise ProtocolError(P.R_UNEXPECTED, f"{type(msg).__name__} before INIT")
            if msg.version != P.VERSION:
                raise ProtocolError(P.R_VERSION, f"{msg.version:#x}")
            iface = self._lookup(msg)      # raises ID not found / Already connected / secret
            if msg.mode != P.MODE_ETHERNET:
                raise ProtocolError(P.R_MODE, f"mode {msg.mode}")
            self.iface = iface
            self.init = msg
            self.state = "setup"
            if fd is not None:
                close_fds([fd])
            return [(P.build_ack(), None)]
        if self.state == "setup":
            if isinstance(msg, P.AddRegion):
                if fd is None:
                    raise ProtocolError(P.R_REGION_FD)
                if msg.index != len(self.regions) or msg.index >= P.MAX_REGIONS:
                    raise ProtocolError(P.R_REGION_INDEX, str(msg.index))
                if msg.size <= 0 or msg.size >= 1 << 40:
                    raise ProtocolError(P.R_REGION_SIZE, str(msg.size))
                self.regions.append((fd, msg.size))
                return [(P.build_ack(), None)]
            if isinstance(msg, P.AddRing):
                if fd is None:
                    raise ProtocolError(P.R_RING_FD)
                c2s = msg.c2s
                limit = self.iface.n_rx if c2s else self.iface.n_tx
                key = (c2s, msg.index)
                if msg.index >= limit or key in self.rings:
                    raise ProtocolError(P.R_RING_INDEX, f"{'C2S' if c2s else 'S2C'} {msg.index}")
                if not 1 <= msg.log2_ring_size <= P.MAX_LOG2_RING_SIZE:
                    raise ProtocolError(P.R_RING_SIZE, str(msg.log2_ring_size))
                self.rings[key] = msg
                self.ring_fds[key] = fd
                return [(P.build_ack(), None)]
            if isinstance(msg, P.Connect):
                if fd is not None:
                    close_fds([fd])
                if not self.rings:
                    raise ProtocolError(P.R_NO_RINGS)
                self.connect = msg
                self.state = "done"
                return []
            if fd is not None:
                close_fds([fd])
            raise ProtocolError(P.R_UNEXPECTED, type(msg).__name__)
        if fd is not None:
            close_fds([fd])
        raise ProtocolError(P.R_UNEXPECTED, f"{type(msg).__name__} after CONNECT")

    def take(self):
        """Hand the regions and rings (with their fds) to the caller, who now owns the fds."""
        regions, rings, fds = self.regions, self.rings, self.ring_fds
        self.regions, self.rings, self.ring_fds = [], {}, {}
        return regions, rings, fds

    def close(self) -> None:
        close_fds([f for f, _ in self.regions] + list(self.ring_fds.values()))
        self.regions, self.rings, self.ring_fds = [], {}, {}


# -- the control thread -----------------------------------------------------------------------
class _Conn:
    __slots__ = ("sock", "hs", "iface")

    def __init__(self, sock, hs, iface=None):
        self.sock = sock
        self.hs = hs
        self.iface = iface


class ControlLoop:
    """One thread serving one memif socket: a client interface, or the server interfaces of
    one listening socket (told apart by id)."""

    TICK = 0.02          # s between checks of the queues' validation flags
    RETRY_MAX = 1.0      # s, client reconnect back-off cap

    def __init__(self, address, role: str, name: str = "pktbuf"):
        self.address = address
        self.role = role
        self.name = name
        self.ifaces: dict[int, object] = {}     # id -> interface
        self._conns: list[_Conn] = []
        self._listen: socket.socket | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._lock = threading.RLock()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._retry_at = 0.0
        self._retry_delay = 0.05
        self.steps = 0          # loop iterations completed (tests wait on it, not on sleeps)
        self.accepted = 0       # connections accepted (server)
        self.attempts = 0       # connect() calls (client)

    @property
    def next_attempt(self) -> float:
        """Client: the ``time.monotonic()`` before which no connect is attempted (back-off)."""
        return self._retry_at

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> None:
        if self.role == "server":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
                s.bind(self.address)
                s.listen(1)
            except BaseException:
                s.close()
                raise
            s.setblocking(False)
            self._listen = s
        self._thread = threading.Thread(target=self._run, name=f"memif-{self.role}", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def stop(self) -> None:
        self._stop = True
        self.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        with self._lock:
            for c in list(self._conns):
                self._drop(c, P.R_CLOSED, send=True)
            if self._listen is not None:
                self._listen.close()
                self._listen = None
                if not str(self.address).startswith("\0"):
                    try:
                        os.unlink(self.address)
                    except OSError:
                        pass
        close_fds([self._wake_r, self._wake_w])
        self._wake_r = self._wake_w = -1

    def disconnect(self, iface, reason: str) -> None:
        """Disconnect ``iface``'s connection (from any thread) with ``reason``."""
        with self._lock:
            for c in list(self._conns):
                if c.iface is iface:
                    self._drop(c, reason, send=True)

    # -- the loop ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop:
            try:
                self._step()
            except Exception as e:       # never let the thread die: log into the interfaces
                with self._lock:
                    for c in list(self._conns):
                        self._drop(c, f"Internal error: {e!r}"[:90], send=True)
                time.sleep(self.TICK)
            self.steps += 1

    def _step(self) -> None:
        if self.role == "client":
            self._client_maybe_connect()
        rl = [self._wake_r] + [c.sock for c in self._conns]
        if self._listen is not None:
            rl.append(self._listen)
        r = readable(rl, self.TICK)
        with self._lock:
            if self._stop:
                return
            if self._wake_r in r:
                try:
                    while os.read(self._wake_r, 64):
                        pass
                except OSError:
                    pass
            if self._listen is not None and self._listen in r:
                self._accept()
            for c in list(self._conns):
                if c.sock in r and c in self._conns:
                    self._receive(c)
            for c in list(self._conns):   # kernels that took a queue down
                if c.iface is not None and c.hs.state == "done":
                    why = c.iface._datapath_fault()
                    if why:
                        self._drop(c, why, send=True)

    def _accept(self) -> None:
        try:
            s, _ = self._listen.accept()
        except (BlockingIOError, InterruptedError):
            return
        self.accepted += 1
        s.setblocking(True)
        s.settimeout(5.0)
        hs = ServerHandshake(self._lookup)
        c = _Conn(s, hs)
        self._conns.append(c)
        try:
            ifs = [i for i in self.ifaces.values() if not i.closed]
            n_rx = max([i.n_rx for i in ifs] or [1])
            n_tx = max([i.n_tx for i in ifs] or [1])
            send_msg(s, hs.hello(self.name, n_rx, n_tx))
        except OSError:
            self._drop(c, None, send=False)

    def _lookup(self, init):
        iface = self.ifaces.get(init.id)
        if iface is None or iface.closed:
            raise ProtocolError(P.R_ID, str(init.id))
        if any(c.iface is iface for c in self._conns):
            raise ProtocolError(P.R_ALREADY)
        why = P.secret_matches(iface.secret, init.secret)
        if why:
            raise ProtocolError(why)
        return iface

    def _client_maybe_connect(self) -> None:
        with self._lock:
            if self._conns or self._stop:
                return
            iface = next(iter(self.ifaces.values()), None)
            if iface is None or not iface._want_connect():
                return
            now = time.monotonic()
            if now < self._retry_at:
                return
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.settimeout(5.0)
            self.attempts += 1
            try:
                s.connect(self.address)
            except OSError as e:
                s.close()
                iface._connect_failed(f"connect failed: {e.strerror or e}")
                self._retry_at = now + self._retry_delay
                self._retry_delay = min(self._retry_delay * 2, self.RETRY_MAX)
                return
            self._retry_delay = 0.05
            c = _Conn(s, ClientHandshake(iface._client_plan), iface)
            iface._set_state("connecting")
            self._conns.append(c)

    def _receive(self, c: _Conn) -> None:
        try:
            data, fds = recv_msg(c.sock)
        except ProtocolError as e:
            self._drop(c, e.reason, send=True)
            return
        except OSError as e:
            self._drop(c, f"Socket error: {e.strerror or e}", send=False)
            return
        if not data:
            close_fds(fds)
            self._drop(c, P.R_EOF, send=False)
            return
        try:
            msg = P.parse(data)
        except ProtocolError as e:
            close_fds(fds)
            self._drop(c, e.reason, send=True)
            return
        try:
            replies = c.hs.on_message(msg, fds)
            if isinstance(c.hs, ServerHandshake):
                if c.iface is None and c.hs.iface is not None:
                    c.iface = c.hs.iface
                    c.iface._set_state("connecting")
                if c.hs.state == "done" and c.hs.connect is not None and not replies:
                    c.iface._server_connect(c.hs)
                    replies = [(P.build_connected(c.iface.name), None)]
            for m, fd in replies:
                send_msg(c.sock, m, fd)
            if isinstance(c.hs, ServerHandshake) and c.hs.state == "done":
                c.iface._link_up()
            elif isinstance(c.hs, ClientHandshake) and c.hs.state == "done":
                c.iface._client_connected(c.hs.connected)
                c.iface._link_up()
        except PeerDisconnect as e:
            self._drop(c, e.reason, send=False)
        except ProtocolError as e:
            self._drop(c, e.reason, send=True)
        except OSError as e:
            self._drop(c, f"Socket error: {e.strerror or e}", send=False)

    def _drop(self, c: _Conn, reason, send: bool) -> None:
        """Tear one connection down: data path first, then the socket, then memory."""
        if c not in self._conns:
            return
        self._conns.remove(c)
        iface = c.iface
        if iface is not None:
            iface._link_down()
        if send and reason:
            try:
                send_msg(c.sock, P.build_disconnect(reason))
            except OSError:
                pass
        try:
            c.sock.close()
        except OSError:
            pass
        if isinstance(c.hs, ServerHandshake):
            c.hs.close()
        if iface is not None:
            iface._teardown(reason)
        self._retry_at = time.monotonic() + self._retry_delay
