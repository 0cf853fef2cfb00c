""":class:`Telemetry`: DPDK 22.11's telemetry v2 server (``lib/telemetry/telemetry.c``), so
``dpdk-telemetry.py -f <prefix>`` and Telegraf's dpdk input read a pktbuf application as they
read a DPDK one.

Protocol, per connection: the server sends a greeting, ``{"version":..,"pid":..,
"max_output_len":16384}``; then each message the client sends is one request, ``<command>`` or
``<command>,<params>``, answered by exactly one message ``{"<command>":<value>}``.  Requests
are read with a 1023-byte buffer (the kernel drops the rest of a longer message); the command
ends at the first comma (leading commas are skipped, as ``strtok`` does), the params are
everything after it, and the text ends at a NUL.  An unknown command, a command of 56 bytes or
more, or a handler that fails gets ``{"<command>":null}``; an empty request (or EOF) closes the
connection.  At most 10 clients are served at once: the 11th is accepted and closed at once.
"""
from __future__ import annotations

import atexit
import logging
import os
import select
import socket
import threading
import time

from ..errors import InvalidArgument
from ..buf.domain.domain import Domain
from ..buf.domain.pools import Mempool
from . import commands as C
from . import ethdev as ETH
from . import mempool as MP
from .encode import (MAX_CMD_LEN, MAX_OUTPUT_LEN, STRING_MAX, Unencodable, command_key,
                     null_reply, reply)
from . import runtime as RT

__all__ = ["Telemetry"]

log = logging.getLogger("pktbuf.telemetry")

MAX_CLIENTS = 10                    # MAX_CONNECTIONS
REQUEST_MAX = 1023                  # the server's read buffer, less the NUL
CLOSE_TIMEOUT = 5.0                 # seconds close() waits for the threads
_CMD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_/")

HELP = {
    "/": "Returns list of available commands, Takes no parameters",
    "/info": "Returns DPDK Telemetry information. Takes no parameters",
    "/help": "Returns help text for a command. Parameters: string command",
}


def _version() -> str:
    from .. import __version__
    return f"pktbuf {__version__}"


def _check_port(port) -> int:
    pid = getattr(port, "port_id", None)
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid <= ETH.PORT_ID_MAX:
        raise InvalidArgument(f"port.port_id must be an int in [0, {ETH.PORT_ID_MAX}], got {pid!r}")
    if not isinstance(getattr(port, "name", None), str):
        raise InvalidArgument("port.name must be a str")
    for m in ("stats", "xstats", "link", "info"):
        if not callable(getattr(port, m, None)):
            raise InvalidArgument(f"port.{m} must be a method")
    return pid


class Telemetry:
    """A telemetry v2 server on ``<runtime dir>/dpdk_telemetry.v2`` (``[:N]``).

    ``file_prefix`` is EAL's ``--file-prefix`` (default ``rte``); ``runtime_dir`` is the base
    EAL takes from ``$RUNTIME_DIRECTORY`` (default: that variable, else ``/var/run`` as root,
    else ``$XDG_RUNTIME_DIR`` or ``/tmp``): the socket is in ``<base>/dpdk/<file_prefix>``,
    created with mode 0700.  A live server already there makes this one take the first free
    ``:N`` suffix (``instance`` = N, ``dpdk-telemetry.py -i N``); a stale socket file is
    replaced.  ``domain`` is the domain ``/pktbuf/domain`` shows (default: pktbuf's default
    domain, once it exists).

    A daemon thread accepts clients, one thread each.  Handlers run in those threads and read
    the registered ports' and pools' counters while the data plane runs; the server's own lock
    only guards its tables.  :meth:`close` (also a context manager's exit, and run at
    interpreter exit) stops the threads, disconnects the clients and removes the socket.

    Raises ``InvalidArgument`` for a bad prefix and ``TelemetryError`` when the socket cannot
    be set up.
    """

    def __init__(self, file_prefix: str = RT.DEFAULT_PREFIX, *, runtime_dir: str | None = None,
                 domain: Domain | None = None):
        self._closed = True
        RT.check_prefix(file_prefix)
        if runtime_dir is not None:
            if not isinstance(runtime_dir, (str, os.PathLike)):
                raise InvalidArgument(f"runtime_dir must be a path, got {type(runtime_dir).__name__}")
            runtime_dir = os.fspath(runtime_dir)
        if domain is not None and not isinstance(domain, Domain):
            raise InvalidArgument(f"domain must be a Domain, got {type(domain).__name__}")
        self.file_prefix = file_prefix
        self.runtime_dir = RT.runtime_dir(file_prefix, runtime_dir)
        self._domain = domain
        self._lock = threading.Lock()
        self._commands: dict[str, tuple] = {}
        self._ports: dict[int, object] = {}
        self._pools: dict[str, Mempool] = {}
        self._clients: dict[socket.socket, threading.Thread] = {}
        self._register_builtins()
        RT.create_runtime_dir(self.runtime_dir)
        self._sock, self.path, self.instance = RT.bind(self.runtime_dir)
        try:
            st = os.lstat(self.path)
            self._ident = (st.st_dev, st.st_ino)
            self._pid = os.getpid()
            self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)
            self._listener = threading.Thread(target=self._listen, name="telemetry-v2",
                                              daemon=True)
            self._closed = False            # before the first accept
            self._listener.start()
        except BaseException:
            self._closed = True
            self._sock.close()
            os.unlink(self.path)
            raise
        atexit.register(self.close)

    # -- commands ----------------------------------------------------------------------------
    def register(self, command: str, callback, help: str) -> None:
        """Serve ``command`` with ``callback(params: str)``, as ``rte_telemetry_register_cmd``.

        ``command`` starts with ``/``, is shorter than 56 characters and uses
        ``[A-Za-z0-9_/]``; ``help`` is shorter than 128 bytes.  The callback gets the text after
        the first comma (``""`` if none) and returns what goes under the command's key: None
        (``null``), a str, an int, or a dict or list of those (see
        :mod:`pktbuf.telemetry.encode`).  If it raises, or returns a value the wire format
        cannot carry, the client gets ``null``.  It runs in a client's thread: it must not take
        a lock the data plane holds.  A command registered twice raises ``InvalidArgument``.
        """
        if not isinstance(command, str) or not command.startswith("/") \
                or len(command) >= MAX_CMD_LEN or not set(command) <= _CMD_CHARS:
            raise InvalidArgument(f"invalid telemetry command {command!r}: it must start with '/', "
                                  f"use [A-Za-z0-9_/] and be shorter than {MAX_CMD_LEN} characters")
        if not callable(callback):
            raise InvalidArgument("callback must be callable")
        if not isinstance(help, str) or len(help.encode("utf-8")) > STRING_MAX:
            raise InvalidArgument(f"help must be a str shorter than {STRING_MAX + 1} bytes")
        with self._lock:
            if command in self._commands:
                raise InvalidArgument(f"telemetry command {command!r} is already registered")
            self._commands[command] = (callback, help)

    @property
    def commands(self) -> list:
        """The registered commands, sorted as ``/`` lists them."""
        with self._lock:
            return sorted(self._commands)

    def _register_builtins(self) -> None:
        builtins = {
            "/": (self._list_commands, HELP["/"]),
            "/info": (self._info, HELP["/info"]),
            "/help": (self._help, HELP["/help"]),
            "/ethdev/list": (self._ethdev_list, ETH.HELP["/ethdev/list"]),
            "/ethdev/stats": (self._with_port(ETH.stats, base0=False), ETH.HELP["/ethdev/stats"]),
            "/ethdev/xstats": (self._with_port(ETH.xstats), ETH.HELP["/ethdev/xstats"]),
            "/ethdev/link_status": (self._with_port(ETH.link_status),
                                    ETH.HELP["/ethdev/link_status"]),
            "/ethdev/info": (self._with_port(ETH.info), ETH.HELP["/ethdev/info"]),
            "/mempool/list": (self._mempool_list, MP.HELP["/mempool/list"]),
            "/mempool/info": (self._mempool_info, MP.HELP["/mempool/info"]),
            "/pktbuf/version": (lambda params: C.version(), C.HELP["/pktbuf/version"]),
            "/pktbuf/domain": (self._pktbuf_domain, C.HELP["/pktbuf/domain"]),
            "/pktbuf/ports": (self._pktbuf_ports, C.HELP["/pktbuf/ports"]),
        }
        for cmd, (fn, text) in builtins.items():
            self.register(cmd, fn, text)

    def _list_commands(self, params: str) -> list:
        return self.commands

    def _info(self, params: str) -> dict:
        return {"version": _version(), "pid": os.getpid(), "max_output_len": MAX_OUTPUT_LEN}

    def _help(self, params: str):
        with self._lock:
            if not params:
                return self._commands["/help"][1]
            entry = self._commands.get(params)
        return None if entry is None else {params: entry[1]}

    # -- ports -------------------------------------------------------------------------------
    def add_port(self, port) -> None:
        """Show ``port`` in ``/ethdev/*`` (see :mod:`pktbuf.telemetry.ethdev` for the
        members it needs).  Its ``port_id`` must be unused here (``InvalidArgument``)."""
        pid = _check_port(port)
        with self._lock:
            if pid in self._ports:
                raise InvalidArgument(f"port {pid} is already registered")
            self._ports[pid] = port

    def remove_port(self, port_id: int) -> None:
        """Stop showing port ``port_id`` (``InvalidArgument`` if it is not shown)."""
        with self._lock:
            if self._ports.pop(port_id, None) is None:
                raise InvalidArgument(f"port {port_id!r} is not registered")

    def _ethdev_list(self, params: str) -> list:
        with self._lock:
            return sorted(self._ports)

    def _pktbuf_ports(self, params: str) -> dict:
        with self._lock:
            shown = dict(self._ports)
        return C.ports(shown)

    def _with_port(self, fn, *, base0: bool = True):
        def handler(params: str):
            pid = ETH.port_from_params(params, base0=base0)
            with self._lock:
                port = None if pid is None else self._ports.get(pid)
            return None if port is None else fn(port)
        return handler

    # -- mempools ----------------------------------------------------------------------------
    def add_mempool(self, pool: Mempool) -> None:
        """Show ``pool`` (a :class:`~pktbuf.Mempool` or :class:`~pktbuf.PktmbufPool`) in
        ``/mempool/*`` until it is closed or removed.  Its name must be 1 to 31 bytes
        (what ``/mempool/info`` can match) and unique among the pools shown, as DPDK's pool
        names are (``InvalidArgument``)."""
        if not isinstance(pool, Mempool):
            raise InvalidArgument(f"pool must be a Mempool, got {type(pool).__name__}")
        if pool.closed:
            raise InvalidArgument(f"pool {pool.name!r} is closed")
        size = len(pool.name.encode("utf-8"))
        if not 0 < size <= MP.NAME_MAX or "\0" in pool.name:
            raise InvalidArgument(f"pool name {pool.name!r} must be 1 to {MP.NAME_MAX} bytes "
                                  "without NUL to be found by /mempool/info")
        with self._lock:
            self._prune_pools()
            if pool.name in self._pools:
                raise InvalidArgument(f"a pool named {pool.name!r} is already registered")
            self._pools[pool.name] = pool

    def remove_mempool(self, name: str) -> None:
        """Stop showing the pool called ``name`` (``InvalidArgument`` if it is not shown)."""
        with self._lock:
            if self._pools.pop(name, None) is None:
                raise InvalidArgument(f"no pool named {name!r} is registered")

    def _prune_pools(self) -> None:
        for name in [n for n, p in self._pools.items() if p.closed]:
            del self._pools[name]

    def _live_pools(self) -> list:
        with self._lock:
            self._prune_pools()
            return list(self._pools.values())

    def _mempool_list(self, params: str) -> list:
        return [p.name for p in self._live_pools()]

    def _mempool_info(self, params: str):
        if not params:
            return None
        name = MP.lookup_name(params)
        for p in self._live_pools():
            if p.name == name:
                return MP.info(p)
        return {}

    def _pktbuf_domain(self, params: str) -> dict:
        dom = self._domain
        if dom is None:
            from ..buf.domain import domain as D
            dom = D._default          # never create the default domain from here
        return C.domain(dom)

    # -- connections -------------------------------------------------------------------------
    @property
    def client_count(self) -> int:
        """Clients connected now."""
        with self._lock:
            return len(self._clients)

    def _listen(self) -> None:
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            try:
                events = poller.poll()
            except InterruptedError:
                continue
            if any(fd == self._wake_r for fd, _ in events):
                return
            try:
                conn, _ = self._sock.accept()
            except OSError as e:            # an aborted connection, out of descriptors...
                log.debug("telemetry: accept failed: %s", e)
                threading.Event().wait(0.01)
                continue
            self._start_client(conn)

    def _start_client(self, conn: socket.socket) -> None:
        with self._lock:
            if self._closed or len(self._clients) >= MAX_CLIENTS:
                conn.close()                # DPDK: accepted, then closed before the greeting
                return
            t = threading.Thread(target=self._serve, args=(conn,), name="telemetry-client",
                                 daemon=True)
            self._clients[conn] = t
        try:
            t.start()
        except RuntimeError:                # no thread for it
            with self._lock:
                self._clients.pop(conn, None)
            conn.close()

    def _serve(self, conn: socket.socket) -> None:
        try:
            info = self._info("")
            conn.send(('{"version":"%s","pid":%d,"max_output_len":%d}'
                       % (info["version"], info["pid"], info["max_output_len"])).encode())
            while True:
                data = conn.recv(REQUEST_MAX)
                if not data:                # EOF, or an empty message: DPDK hangs up
                    break
                conn.send(self.handle(data))
        except OSError:
            pass
        finally:
            with self._lock:
                self._clients.pop(conn, None)
            conn.close()

    def handle(self, request: bytes) -> bytes:
        """The reply message for one request message (what a client gets on the socket)."""
        text = bytes(request[:REQUEST_MAX]).split(b"\0", 1)[0].lstrip(b",")
        if not text:
            return null_reply(b"(null)")    # strtok found no command; glibc prints "(null)"
        cmd, _, params = text.partition(b",")
        key = command_key(cmd)
        entry = None
        if len(cmd) < MAX_CMD_LEN and cmd.isascii():
            with self._lock:
                entry = self._commands.get(cmd.decode("ascii"))
        if entry is None:
            return null_reply(key)
        try:
            return reply(key, entry[0](params.decode("utf-8", "replace")))
        except Unencodable as e:
            log.warning("telemetry: %s returned a value DPDK cannot encode: %s", key, e)
        except Exception:
            log.exception("telemetry: handler of %s failed", key)
        return null_reply(key)

    # -- life cycle --------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop serving: disconnect every client, stop the threads, remove the socket file
        (if it is still ours).  Idempotent; in a forked child it only closes descriptors."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            clients = dict(self._clients)
            for c in clients:
                try:
                    c.shutdown(socket.SHUT_RDWR)    # wakes the thread blocked on it
                except OSError:
                    pass
        atexit.unregister(self.close)
        mine = os.getpid() == self._pid
        deadline = time.monotonic() + CLOSE_TIMEOUT
        if mine:
            os.write(self._wake_w, b"x")
            if threading.current_thread() is not self._listener:
                self._listener.join(CLOSE_TIMEOUT)
        self._sock.close()
        if mine and RT.same_file(self.path, self._ident):
            try:
                os.unlink(self.path)
            except OSError:
                pass
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        if mine:                            # a handler still running is left to finish
            for t in clients.values():
                if t is not threading.current_thread():
                    t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"clients={self.client_count}"
        return f"Telemetry({self.path!r}, {state})"
