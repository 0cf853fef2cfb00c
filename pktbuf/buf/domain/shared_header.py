"""The header of a :class:`~pktbuf.SharedDomain` and the socket that serves it.

The *header* is a small memfd next to the domain's tables: magic, layout version, the window's
address and size, the primary's pid, the lcore ownership table, the registry of named pools and
rings (with the primary's fd number and the inode of each memfd), the per-lcore baselines of the
"held" accounting and the lost counts.  A process finds it by name through an abstract unix
socket the primary serves (``@pktbuf-domain.<name>``), which hands out the header's and the
registered memfds with SCM_RIGHTS; a process given the header's fd instead opens the others
through ``/proc/<primary>/fd/<n>`` and checks their inodes.

This module holds the header's layout, the socket's protocol (``HELLO``: the header's fd;
``FD <i>``: registry entry *i*'s memfd) and the registry's entries, as methods
:class:`~pktbuf.SharedDomain` inherits (:class:`_HeaderChannel`).
"""
from __future__ import annotations

import array
import os
import re
import socket

import numpy as np

from ...errors import InvalidArgument, NoSuchDomain, SharedDomainError
from ...lcore import MAX_LCORE
from ..mempool.layout import MAX_POOLS
from ...shm import page_round

LAYOUT_VERSION = 1                   # of the header and of everything a secondary maps
MAGIC = 0x4D4F444853425450           # "PTBSHDOM"

# header words (int64)
W_MAGIC, W_VERSION, W_DOMSIG, W_BASE, W_WSIZE, W_PRIMARY, W_PRIMARY_START, W_STATE = range(8)
HDR_WORDS = 64
ST_LIVE, ST_CLOSED = 1, 2

# lcore table: LC_WORDS int64 per lcore: owner pid (0 free, -pid while being reaped), the
# owner's start time (so a reused pid is not taken for the owner)
LC_WORDS = 4
LC_OWNER, LC_START = 0, 1

# registry of named memfds; entry 0 is the domain's tables; K_REGION: a memfd some other
# library keeps its table in (an LPM or hash table block), mapped anywhere by each process
K_TABLES, K_POOL, K_RING, K_REGION = 1, 2, 3, 4
E_FREE, E_LIVE = 0, 1
MAX_ENTRIES = 512
NAME_BYTES = 48
ENTRY_DTYPE = np.dtype([("state", np.int32), ("kind", np.int32), ("pool", np.int32),
                        ("gen", np.int32), ("fd", np.int32), ("_pad", np.int32),
                        ("inode", np.uint64), ("size", np.uint64), ("offset", np.int64),
                        ("name", f"S{NAME_BYTES}")])

_OFF_LC = HDR_WORDS * 8
_OFF_ENT = page_round(_OFF_LC + MAX_LCORE * LC_WORDS * 8)
_OFF_BASE = page_round(_OFF_ENT + MAX_ENTRIES * ENTRY_DTYPE.itemsize)
_OFF_LOST = _OFF_BASE + MAX_LCORE * MAX_POOLS * 2 * 8
HEADER_SIZE = page_round(_OFF_LOST + MAX_POOLS * 8)

_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")
_SOCK_PREFIX = "\0pktbuf-domain."
_ANC = socket.CMSG_SPACE(4 * 4)


def _sock_addr(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidArgument(f"a shared domain's name is 1..48 of [A-Za-z0-9_.-], got {name!r}")
    return _SOCK_PREFIX + name


def _send(sock, data: bytes, fd: int | None = None) -> None:
    anc = []
    if fd is not None:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())]
    sock.sendmsg([data], anc)


def _recv(sock) -> tuple[bytes, list[int]]:
    data, anc, flags, _ = sock.recvmsg(256, _ANC)
    fds = []
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(cdata[:len(cdata) - len(cdata) % a.itemsize])
            fds.extend(a)
    return data, fds


class _HeaderChannel:
    """The header's views, the fd channel and the registry of a :class:`~pktbuf.SharedDomain`
    (a mixin: the state it uses is set up by ``SharedDomain._init_common``)."""

    def _map_header(self):
        h = self.header
        self._hdr = h.view(np.int64, 0, HDR_WORDS)
        self._lct = h.view(np.int64, _OFF_LC, MAX_LCORE * LC_WORDS)
        self._ent = h.view(ENTRY_DTYPE, _OFF_ENT, MAX_ENTRIES)
        self._base = h.view(np.int64, _OFF_BASE, MAX_LCORE * MAX_POOLS * 2).reshape(
            MAX_LCORE, MAX_POOLS, 2)
        self._lost = h.view(np.int64, _OFF_LOST, MAX_POOLS)

    # -- the fd channel --------------------------------------------------------------------
    def _serve(self):
        listener = self._listener           # close() sets the attribute to None
        if listener is None:
            return
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return                      # closed
            conn.settimeout(5.0)
            self._serve_one(conn)

    def _serve_one(self, conn):
        with conn:
            try:
                while True:
                    req = conn.recv(64)
                    if not req:
                        return
                    if req == b"HELLO":
                        _send(conn, b"OK", self.header.fd)
                        continue
                    fd = None
                    if req.startswith(b"FD "):
                        i = int(req[3:])
                        with self._lock:
                            if 0 <= i < MAX_ENTRIES and int(self._ent[i]["state"]) == E_LIVE:
                                fd = int(self._ent[i]["fd"])
                                _send(conn, b"OK", fd)
                    if fd is None:
                        _send(conn, b"NO")
            except (OSError, ValueError):
                return

    def _ask(self, req: bytes) -> int:
        """One request to the primary, on a connection of its own; returns the fd sent."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            sock.settimeout(10.0)
            try:
                sock.connect(self._addr)
            except (ConnectionRefusedError, FileNotFoundError):
                raise NoSuchDomain(f"no shared domain named {self.name!r}: no process serves "
                                   f"@{self._addr[1:]} (create it with SharedDomain.create)"
                                   ) from None
            sock.sendall(req)
            data, fds = _recv(sock)
        except OSError as e:
            raise NoSuchDomain(f"the shared domain {self.name!r} does not answer "
                               f"({e.strerror})") from None
        finally:
            sock.close()
        if data != b"OK" or len(fds) != 1:
            for f in fds:
                os.close(f)
            if not data:
                raise NoSuchDomain(f"the shared domain {self.name!r} is gone (its creator "
                                   "closed the connection)")
            raise SharedDomainError(f"the shared domain refused {req.decode()!r}")
        return fds[0]

    def _fetch(self, i: int) -> int:
        """The memfd of registry entry ``i``: from the primary's socket, or through
        ``/proc/<primary>/fd/<n>`` when attached by fd (the inode is checked after)."""
        if self.primary:
            return os.dup(int(self._ent[i]["fd"]))
        if self._addr is not None:
            return self._ask(b"FD %d" % i)
        path = f"/proc/{int(self._hdr[W_PRIMARY])}/fd/{int(self._ent[i]['fd'])}"
        try:
            return os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            raise NoSuchDomain(f"cannot open {path} ({e.strerror}): the creator is gone or "
                               "does not let this process see its fds") from None

    def _check_inode(self, i: int, fd: int) -> None:
        if os.fstat(fd).st_ino != int(self._ent[i]["inode"]):
            raise SharedDomainError(f"entry {i} of the shared domain changed while it was "
                                    "mapped (its memfd is not the registered one)")

    # -- registry --------------------------------------------------------------------------
    def _set_entry(self, i, kind, name, pool, gen, fd, size, offset):
        e = self._ent[i]
        e["kind"], e["pool"], e["gen"], e["fd"] = kind, pool, gen, fd
        e["inode"] = os.fstat(fd).st_ino
        e["size"], e["offset"] = size, offset
        e["name"] = name.encode()
        e["state"] = E_LIVE

    def _entry_name(self, i) -> str:
        return bytes(self._ent[i]["name"]).decode()

    def _find(self, name: str, kind: int) -> int | None:
        key = name.encode()
        for i in range(1, MAX_ENTRIES):
            e = self._ent[i]
            if int(e["state"]) == E_LIVE and int(e["kind"]) == kind and bytes(e["name"]) == key:
                return i
        return None

    def _new_entry(self, name: str) -> int:
        if not self.primary:
            raise SharedDomainError("pools and rings of a shared domain are created by the "
                                    "process that created it; find them by name here")
        if not isinstance(name, str) or not 1 <= len(name.encode()) <= NAME_BYTES:
            raise InvalidArgument(f"a name is 1..{NAME_BYTES} bytes, got {name!r}")
        if any(self._find(name, k) is not None for k in (K_POOL, K_RING, K_REGION)):
            raise InvalidArgument(f"a pool, ring or region named {name!r} exists in this "
                                  "domain")
        for i in range(1, MAX_ENTRIES):
            if int(self._ent[i]["state"]) == E_FREE and i not in self._objs:
                return i
        raise InvalidArgument(f"a shared domain registers at most {MAX_ENTRIES - 1} names")
