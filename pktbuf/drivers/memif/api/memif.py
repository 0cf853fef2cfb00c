"""The :class:`Memif` facade: one memif interface, client or server role.

::

    pool = pktbuf.PktmbufPool(8192)
    m = Memif.client("/run/memif.sock", id=0, pool=pool)     # or Memif.server(...)
    m.wait_connected(5)
    pkts = m.rx_burst(32)                  # int32 mbuf handles, yours to free
    sent = m.tx_burst(handles)             # the first `sent` are now the interface's
    m.close()

``m.rx_queue(i)`` / ``m.tx_queue(i)`` return the :data:`~pktbuf.drivers.memif.queue.MEMIF_QUEUE` block to
pass to the kernels :func:`~pktbuf.drivers.memif.datapath.memif_rx_burst` /
:func:`~pktbuf.drivers.memif.datapath.memif_tx_burst` from your own ``@njit`` loop; they stay valid
across reconnects.

Every entry validates its arguments -- types, ranges, arrays (dtype, shape, contiguity,
writeability), mbuf handles (each a live packet of this domain, sane, listed once) -- before
any kernel runs, and raises from the :class:`~pktbuf.errors.PktbufError` hierarchy
(``InvalidArgument``, ``InvalidHandle``, ``DoubleFree``, ``SanityCheckError``,
``MemifDisconnected``, ``MemifSocketError``); a refused call leaves pools and rings as they
were.  The control plane behind it (memory, queues, handshake, teardown) is
:class:`~pktbuf.drivers.memif.device.MemifDevice`; a background thread per socket runs the control
channel.
"""
from __future__ import annotations

import math
import numbers
import os
import threading

import numpy as np

from ...._jit import kernel
from ....block import Block
from ....errors import E_NOMEM, InvalidArgument, MemifDisconnected, check_count, check_handles
from ....lcore import facade_lcore
from ....lcore import LCORE_ANY, MAX_LCORE
from .. import layout as L
from .. import proto as P
from ..control import make_address
from ..datapath import memif_rx_burst, memif_tx_burst
from ..device import MemifDevice, size_relation
from ..queue import PATH_NAMES, P_GENERAL, Q_EVENTFD
from ....buf.domain.pools import PktmbufPool
from ...common.api.port import raise_tx_check, tx_check

__all__ = ["Memif"]

MAX_BURST = 1 << 16          # rx_burst: at most this many packets per call
_SCRATCH = 2048              # initial free-check scratch (one entry per segment)


# -- entry points: validation and the burst in one compiled call ----------------------------------
@kernel
def _py_rx(dom, q, lcore, out, n):
    return memif_rx_burst(dom, q, lcore, out, n)


@kernel
def _py_tx(dom, q, lcore, pk, n, scratch):
    """Check every packet, then send: ``(0, sent, 0)``, or ``(1, CHK_* reason, index)`` for a
    packet that fails ``mbuf_check``, or ``(2, E_* code, 0)`` when freeing the sent packets
    would be illegal (listed twice, more often than referenced) -- then nothing was sent."""
    kind, val, idx = tx_check(dom, pk, n, scratch)
    if kind != 0:
        return kind, val, idx
    return 0, np.int64(memif_tx_burst(dom, q, lcore, pk, n)), np.int64(0)


# -- argument checks ------------------------------------------------------------------------------
def _check_bool(v, name: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise InvalidArgument(f"{name} must be True or False, got {v!r}")
    return bool(v)


def _check_text(v, name: str, max_bytes: int, *, empty_ok: bool = True) -> bytes:
    """A str (UTF-8) or bytes value of at most ``max_bytes`` bytes, without NUL."""
    if isinstance(v, str):
        b = v.encode("utf-8")
    elif isinstance(v, (bytes, bytearray)):
        b = bytes(v)
    else:
        raise InvalidArgument(f"{name} must be str or bytes, got {type(v).__name__}")
    if b"\0" in b:
        raise InvalidArgument(f"{name} must not contain NUL bytes")
    if len(b) > max_bytes or (not b and not empty_ok):
        raise InvalidArgument(f"{name} must be {0 if empty_ok else 1}..{max_bytes} bytes, "
                              f"got {len(b)}")
    return b


def _check_socket(path, abstract: bool) -> str:
    """A socket path: 1..107 bytes, no NUL; a filesystem path's directory must exist."""
    if not isinstance(path, str):
        raise InvalidArgument(f"socket must be a str path, got {type(path).__name__}")
    _check_text(path, "socket", 107, empty_ok=False)
    if not abstract:
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise InvalidArgument(f"socket directory {d!r} does not exist")
    return path


def _check_timeout(t, name: str = "timeout") -> float | None:
    """None (no limit) or a non-negative number of seconds (inf = no limit)."""
    if t is None:
        return None
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real):
        raise InvalidArgument(f"{name} must be a number of seconds or None, got {t!r}")
    v = float(t)
    if math.isnan(v) or v < 0:
        raise InvalidArgument(f"{name} must be >= 0, got {t!r}")
    return None if math.isinf(v) else v


def _check_out(out, n: int) -> np.ndarray:
    if not isinstance(out, np.ndarray):
        raise InvalidArgument(f"out must be a numpy array, got {type(out).__name__}")
    if out.dtype != np.int32:
        raise InvalidArgument(f"out must be int32, got {out.dtype}")
    if out.ndim != 1:
        raise InvalidArgument(f"out must be 1-d, got shape {out.shape}")
    if not out.flags.c_contiguous:
        raise InvalidArgument("out must be C-contiguous")
    if not out.flags.writeable:
        raise InvalidArgument("out must be writeable")
    if out.size < n:
        raise InvalidArgument(f"out holds {out.size} handles, fewer than n={n}")
    return out


class Memif:
    """A memif interface.  Build it with :meth:`client` or :meth:`server`.

    ``socket``: the socket path (abstract namespace unless ``abstract=False``); ``id``: the
    interface id (0..2**32-1) matched between client and server; ``secret``: at most 24 bytes;
    ``pool``: the :class:`~pktbuf.PktmbufPool` Rx allocates from (a new one if None);
    ``rx_queues``/``tx_queues``: 0..255 each, at least one queue; ``ring_size_log2``: 1..14
    (a client's choice, capped by its server); ``buffer_size``: 1..65535 bytes per memif buffer
    (a client's choice; a server assumes the same); ``zero_copy``: client only, shares
    ``pool`` and ``tx_pools`` with the peer; ``reconnect``: a client connects again after a
    disconnect; ``interrupt``: ask the peer to signal our Rx eventfds (see
    :func:`~pktbuf.drivers.memif.poll.memif_rx_wait`); ``force_general``: DPDK 22.11's copy loop instead
    of the size-specialised ones; ``name``: our name in the handshake (< 32 bytes); ``port``:
    stored in received mbufs (0..65534); ``connect``: a client starts connecting now;
    ``allow_unsealed``: a server accepts a region its client could shrink (DPDK's zero-copy
    client).
    """

    def __init__(self, role: str, socket: str = "/run/memif.sock", *, abstract: bool = True,
                 id: int = 0, secret=None, pool=None, rx_queues: int = 1, tx_queues: int = 1,
                 ring_size_log2: int = 10, buffer_size: int = 2048, zero_copy: bool = False,
                 tx_pools=(), reconnect: bool = True, interrupt: bool = False,
                 force_general: bool = False, name="pktbuf", port: int = 0,
                 connect: bool = True, allow_unsealed: bool = False):
        self._dev = None
        if role not in ("client", "server"):
            raise InvalidArgument(f"role must be 'client' or 'server', got {role!r}")
        abstract = _check_bool(abstract, "abstract")
        socket = _check_socket(socket, abstract)
        id = check_count(id, "id", lo=0, hi=0xFFFFFFFF)
        sec = b"" if secret is None else _check_text(secret, "secret", P.SECRET_SIZE)
        n_rx = check_count(rx_queues, "rx_queues", lo=0, hi=P.MAX_QUEUES)
        n_tx = check_count(tx_queues, "tx_queues", lo=0, hi=P.MAX_QUEUES)
        if n_rx + n_tx == 0:
            raise InvalidArgument("an interface needs at least one queue")
        log2 = check_count(ring_size_log2, "ring_size_log2", lo=1, hi=P.MAX_LOG2_RING_SIZE)
        bsize = check_count(buffer_size, "buffer_size", lo=1, hi=0xFFFF)
        zero_copy = _check_bool(zero_copy, "zero_copy")
        if zero_copy and role != "client":
            raise InvalidArgument("zero-copy is a client-side mode (as in DPDK)")
        flags = {k: _check_bool(v, k) for k, v in (
            ("reconnect", reconnect), ("interrupt", interrupt), ("force_general", force_general),
            ("connect", connect), ("allow_unsealed", allow_unsealed))}
        nm = _check_text(name, "name", P.NAME_SIZE - 1)
        port = check_count(port, "port", lo=0, hi=0xFFFE)
        if role == "client" and not zero_copy:
            # region 0 of a copy-mode client: every ring and buffer; descriptor offsets are u32
            lay = L.copy_region_layout(n_tx, n_rx, log2, bsize)
            if lay["size"] >= 1 << 32:
                raise InvalidArgument("region 0 would exceed 4 GiB: (rx_queues + tx_queues) "
                                      "* 2**ring_size_log2 * buffer_size is too large")
        if isinstance(tx_pools, (str, bytes)) or not hasattr(tx_pools, "__iter__"):
            raise InvalidArgument("tx_pools must be a sequence of PktmbufPool")
        tx_pools = list(tx_pools)
        own = None
        if pool is None:
            pool = own = PktmbufPool(max(4096, 4 * (1 << log2) * max(1, n_rx)), 256,
                                     name=f"memif{id}")
        try:
            self._setup(role, socket, abstract, id, sec, nm, name, n_rx, n_tx, log2, bsize,
                        zero_copy, flags, port, pool, tx_pools)
        except BaseException:
            if own is not None:          # a refused call leaves nothing behind
                own.close(force=True)
            raise

    def _setup(self, role, socket, abstract, id, sec, nm, name, n_rx, n_tx, log2, bsize,
               zero_copy, flags, port, pool, tx_pools) -> None:
        pools = [pool] + [p for p in tx_pools if p is not pool]
        for i, p in enumerate(pools):
            what = "pool" if i == 0 else "tx_pools"
            if not isinstance(p, PktmbufPool):
                raise InvalidArgument(f"{what} must hold PktmbufPool objects, "
                                      f"got {type(p).__name__}")
            if p.closed:
                raise InvalidArgument(f"{what}: pool {p.name!r} is closed")
            if p.domain is not pool.domain:
                raise InvalidArgument("tx_pools must be in the pool's domain")
            if zero_copy and p.region.size >= 1 << 32:
                raise InvalidArgument("zero-copy pools must be smaller than 4 GiB")
        if zero_copy and len(pools) > P.MAX_REGIONS - 1:
            raise InvalidArgument(f"zero-copy shares at most {P.MAX_REGIONS - 1} pools")
        mbuf_cap = int(pool.data_room) - int(pool.headroom)
        if mbuf_cap <= 0:
            raise InvalidArgument("the pool's mbufs have no data room after the headroom")
        self.pool = pool
        self.domain = pool.domain
        self.socket_path = socket
        self.abstract = abstract
        self.name = name if isinstance(name, str) else nm.decode("utf-8", "replace")
        self.force_general = flags["force_general"]
        self.path = P_GENERAL if self.force_general else size_relation(bsize, mbuf_cap)
        self._dom = self.domain.state
        self._tls = threading.local()
        self._dev = MemifDevice(
            role, make_address(socket, abstract), id=id, secret=sec, name=nm, n_rx=n_rx,
            n_tx=n_tx, log2=log2, bsize=bsize, path=self.path, zero_copy=zero_copy,
            reconnect=flags["reconnect"], interrupt=flags["interrupt"],
            allow_unsealed=flags["allow_unsealed"], port=port, dom=self.domain.state,
            pool_id=pool.id, mbuf_cap=mbuf_cap, tx_pools=[(p.id, p.region) for p in pools],
            connect=flags["connect"])

    # -- constructors --------------------------------------------------------------------------
    @classmethod
    def client(cls, socket: str = "/run/memif.sock", **kw) -> "Memif":
        """A client: creates the shared memory and connects (and reconnects) to a server."""
        return cls("client", socket, **kw)

    @classmethod
    def server(cls, socket: str = "/run/memif.sock", **kw) -> "Memif":
        """A server: listens on ``socket`` and maps the memory its client creates."""
        return cls("server", socket, **kw)

    # -- configuration and state ---------------------------------------------------------------
    @property
    def device(self) -> MemifDevice:
        """The control-plane state behind this interface (regions, rings: for inspection)."""
        return self._dev

    role = property(lambda self: self._dev.role)
    id = property(lambda self: self._dev.id)
    secret = property(lambda self: self._dev.secret)
    n_rx = property(lambda self: self._dev.n_rx, doc="number of Rx queues")
    n_tx = property(lambda self: self._dev.n_tx, doc="number of Tx queues")
    log2 = property(lambda self: self._dev.log2, doc="ring size log2 asked for")
    bsize = property(lambda self: self._dev.bsize, doc="memif buffer size")
    mbuf_cap = property(lambda self: self._dev.mbuf_cap, doc="data room of the Rx pool's mbufs")
    port = property(lambda self: self._dev.port)
    zero_copy = property(lambda self: self._dev.zero_copy)
    reconnect = property(lambda self: self._dev.reconnect)
    interrupt = property(lambda self: self._dev.interrupt)
    allow_unsealed = property(lambda self: self._dev.allow_unsealed)

    @property
    def state(self) -> str:
        """``"disconnected"``, ``"listening"``, ``"connecting"``, ``"connected"``, ``"closed"``."""
        return self._dev.state

    @property
    def disconnect_reason(self) -> str | None:
        """Why the link last went down (or a connect failed); None while it is up."""
        return self._dev.disconnect_reason

    @property
    def connected(self) -> bool:
        return self._dev.state == "connected"

    @property
    def closed(self) -> bool:
        return self._dev.closed

    @property
    def connect_count(self) -> int:
        """How many times the link has come up."""
        return self._dev.connect_count

    @property
    def peer_name(self) -> bytes:
        """The peer's application name from the handshake."""
        return self._dev.peer_name

    @property
    def path_name(self) -> str:
        """The copy path chosen for this interface's queues."""
        return "zero-copy" if self.zero_copy else PATH_NAMES[self.path]

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Block until connected (True) or ``timeout`` seconds passed (False)."""
        return self._dev.wait_connected(_check_timeout(timeout))

    def wait_disconnected(self, timeout: float | None = None) -> bool:
        """Block until the link is not up (True) or ``timeout`` seconds passed (False)."""
        return self._dev.wait_disconnected(_check_timeout(timeout))

    def stats(self) -> dict:
        """Counters summed over the queues (they survive reconnects): ``rx_packets``,
        ``rx_bytes``, ``rx_nombuf``, ``tx_packets``, ``tx_bytes``, ``tx_ring_full``,
        ``kicks``, ``fallbacks``, ``connects``."""
        return self._dev.stats()

    # -- queues and bursts ---------------------------------------------------------------------
    def rx_queue(self, qid: int = 0) -> Block:
        """Rx queue ``qid``'s kernel state, for :func:`memif_rx_burst` in your own loop."""
        return self._dev.rxq[check_count(qid, "qid", lo=0, hi=self._dev.n_rx - 1)]

    def tx_queue(self, qid: int = 0) -> Block:
        """Tx queue ``qid``'s kernel state, for :func:`memif_tx_burst` in your own loop."""
        return self._dev.txq[check_count(qid, "qid", lo=0, hi=self._dev.n_tx - 1)]

    def rx_eventfd(self, qid: int = 0) -> int:
        """The eventfd of an Rx queue's ring (-1 when down), for select/epoll in interrupt mode."""
        return int(self.rx_queue(qid).cfg[Q_EVENTFD])

    def _open_pool(self) -> None:
        if self._dev.closed:
            raise MemifDisconnected("interface is closed")
        if self.pool.closed:
            raise InvalidArgument(f"pool {self.pool.name!r} is closed")

    @staticmethod
    def _lcore(lcore) -> int:
        if lcore is None:
            return facade_lcore()
        return check_count(lcore, "lcore", lo=LCORE_ANY, hi=MAX_LCORE - 1)

    def rx_burst(self, n: int = 32, qid: int = 0, *, out: np.ndarray | None = None,
                 lcore: int | None = None) -> np.ndarray:
        """Receive up to ``n`` packets; returns their mbuf handles (yours to free).

        ``out``: a writeable, C-contiguous, 1-d int32 array of at least ``n`` to receive into
        (the result is a view of it).  Empty while the link is down.
        """
        self._open_pool()
        n = check_count(n, "n", lo=0, hi=MAX_BURST)
        q = self.rx_queue(qid)
        lc = self._lcore(lcore)
        out = np.empty(n, np.int32) if out is None else _check_out(out, n)
        k = _py_rx(self._dom, q, lc, out, n)
        return out[:k]

    def tx_burst(self, mbufs, qid: int = 0, *, lcore: int | None = None) -> int:
        """Send packets (mbuf handles); returns how many were taken, from the front.

        Those are now the interface's (freed when sent); the rest are still yours.  Each
        handle must be a live packet of this domain (``InvalidHandle``), allocated and listed
        once (``DoubleFree``), and sane (``SanityCheckError``: lengths, chain); on any of these
        nothing is sent.  0 while the link is down.
        """
        self._open_pool()
        q = self.tx_queue(qid)
        a = check_handles(mbufs, "mbufs")
        if not a.flags.writeable:
            a = a.copy()            # one compiled entry for all arrays; the order is kept
        lc = self._lcore(lcore)
        scratch = getattr(self._tls, "scratch", None)
        if scratch is None:
            scratch = self._tls.scratch = np.empty(_SCRATCH, np.int32)
        while True:
            kind, val, idx = _py_tx(self._dom, q, lc, a, a.size, scratch)
            if not (kind == 2 and val == E_NOMEM):
                break
            scratch = self._tls.scratch = np.empty(2 * scratch.size, np.int32)
        raise_tx_check(kind, val, idx, a)
        return int(val)

    # -- life cycle ----------------------------------------------------------------------------
    def disconnect(self, reason: str = "Disconnected by application") -> None:
        """Drop the current connection (a client with ``reconnect`` will connect again);
        ``reason`` (< 96 bytes) goes to the peer in the DISCONNECT message."""
        if not isinstance(reason, str):
            raise InvalidArgument(f"reason must be a str, got {type(reason).__name__}")
        _check_text(reason, "reason", P.REASON_SIZE - 1)
        if self._dev.closed:
            raise MemifDisconnected("interface is closed")
        self._dev.disconnect(reason)

    def close(self) -> None:
        """Disconnect (sending DISCONNECT "Device closed") and release everything (idempotent)."""
        if self._dev is None or self._dev.closed:
            return
        self._dev.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        if self._dev is None:
            return "Memif(<not constructed>)"
        return (f"Memif({self.role}, socket={self.socket_path!r}, id={self.id}, "
                f"state={self.state}, path={self.path_name})")
