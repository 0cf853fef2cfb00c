"""``net_af_xdp``: queues of a Linux interface as a port, through AF_XDP sockets whose UMEM is
the pool's own data region (received frames are mbufs, no copy).

::

    port = AfXdpPort(pool, "veth0")                          # queue 0, DPDK's defaults
    ports.open("net_af_xdp0,iface=veth0,start_queue=0,queue_count=1,force_copy=1")

Per queue: one ``AF_XDP`` socket, bound to interface queue ``start_queue + i``, with its own
UMEM registration of the pool's region (unaligned chunks: a chunk is an mbuf buffer) and its
fill, completion, Rx and Tx rings; the kernels :func:`~pktbuf.drivers.af_xdp.rx.af_xdp_rx_burst` /
:func:`~pktbuf.drivers.af_xdp.tx.af_xdp_tx_burst` drive them.  One XDP program per port redirects each
queue's frames to its socket (an XSKMAP keyed by Rx queue index, ``XDP_PASS`` otherwise); it is
attached with a BPF link (:mod:`.xdp_prog`), so it is gone when the port closes or its process
dies.  Device arguments are DPDK 22.11's (``iface``, ``start_queue``, ``queue_count``,
``force_copy``, ``busy_budget``; ``shared_umem`` and ``xdp_prog`` are refused); see
docs/af_xdp.md for what the kernel needs and refuses.

Only one XDP program can be attached to an interface, so processes that each own some of its
queues (``pktbuf fwd --workers N``) share one: a :class:`SharedXdpProgram`
(:mod:`.af_xdp_program`) loads and attaches it with an XSKMAP entry per queue, and each
process opens its port with
``xsk_map=<owner pid>:<map fd>`` (pktbuf's device argument): the port takes a duplicate of
the map's fd (``pidfd_getfd``) and puts its own sockets at its queues' keys instead of
attaching a program.  The program lives as long as the owner's link; a socket leaves the map
when it is closed (by the kernel, also when its process dies), and that queue's frames then go
on to the kernel's stack (``XDP_PASS``).
"""
from __future__ import annotations

import errno
import mmap
import socket
import time

from ..layout import (AF_XDP_RXQ, AF_XDP_TXQ, AF_XDP_UMEM, RC_BATCH, RC_COALESCE_NS, RC_FD,
                      RC_FILL, RC_FLAGS, RC_PORT, RC_RX, RC_TARGET, RC_UMEM, RS_BAD_DESC,
                      RS_BURSTS, RS_BYTES, RS_ERRORS, RS_FILL_FULL, RS_NOMBUF, RS_PACKETS,
                      RS_POSTED, RXF_BUSY_POLL, RX_MAX_BURST, R_CONS, R_DESC, R_FLAGS,
                      R_PROD, R_SIZE, TC_COMP, TC_FD, TC_PORT, TC_TX, TC_UMEM, TS_BAD_COMP,
                      TS_BYTES, TS_COPIED, TS_ERRORS, TS_FULL, TS_INFLIGHT, TS_KICK_ERRORS,
                      TS_LAST_ERRNO, TS_NOMBUF, TS_NOT_OWNED, TS_PACKETS, TS_RUNT,
                      TS_TOO_LONG, TX_MAX_BURST, U_CHUNK, U_MAX_LEN, U_NB_OBJ, U_OBJ_BASE,
                      U_POOL, U_PRIV, U_RX_OFF, U_STRIDE, XDP_PACKET_HEADROOM)
from ..rx import (af_xdp_fill, af_xdp_rx_burst, af_xdp_rx_count, af_xdp_rx_release,
                  af_xdp_rx_wait)
from ..tx import af_xdp_complete, af_xdp_tx_burst, af_xdp_tx_release
from ....block import Block
from ....errors import (Busy, InvalidArgument, NoRoom, NoSuchInterface, PoolExhausted,
                        PortError)
from ...common.kinds import K_AF_XDP
from ....lcore import facade_lcore
from ....shm import page_round
from ...common.api.netif import InterfacePort, if_index, if_mac, if_mtu
from ...common.api.port import Port, arg_bool, arg_int, check_devargs, int_arg
from .program import (XDP_MODES, SharedXdpProgram, attach_program,  # noqa: F401
                      check_queues, parse_xsk_map)
from .bpf import XdpProgram, XskMap
from .xsk import XDP_COPY, XDP_USE_NEED_WAKEUP, XDP_ZEROCOPY, Xsk, xsk_error

__all__ = ["AfXdpPort", "SharedXdpProgram", "parse_xsk_map"]

DRIVER = "net_af_xdp"
ACCEPTED = ("iface", "start_queue", "queue_count", "force_copy", "busy_budget",
            "rx_coalesce_us", "xsk_map")
REFUSED = {"shared_umem": "each pktbuf socket registers the pool's region itself",
           "xdp_prog": "pktbuf loads its own redirect program (no ELF loader)"}
PAGE = mmap.PAGESIZE
MIN_CHUNK = 2048                # XDP_UMEM_MIN_CHUNK_SIZE
DEFAULT_DESCS = 2048            # DPDK's ETH_AF_XDP_DFLT_NUM_DESCS (Rx, Tx, completion)
MAX_QUEUES = 16
ETHER_HDR_LEN = 14
BIND_RETRY_S = 1.0


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class _Queue:
    """One socket, its rings and its three blocks."""

    def __init__(self):
        self.xsk: Xsk | None = None
        self.umem: Block | None = None
        self.rxq: Block | None = None
        self.txq: Block | None = None
        self.xdp_stats: dict = {}


class AfXdpPort(InterfacePort, Port):
    """An AF_XDP port on queues ``start_queue .. start_queue + queue_count - 1`` of
    ``iface`` (in the caller's network namespace).

    ``pool``: the :class:`~pktbuf.PktmbufPool` whose region is the UMEM (Rx mbufs come from
    it): its ``data_room`` must be at least 2048 (the kernel uses at most a page of each
    buffer) and leave MTU + 14 bytes after ``max(headroom, 256)``.  ``force_copy``:
    bind with ``XDP_COPY``; ``zero_copy``: bind with ``XDP_ZEROCOPY`` (refused where the driver
    has no zero-copy, e.g. veth); neither: the kernel's choice (zero-copy if it can).
    ``busy_budget``: 0 = no busy polling, else ``SO_PREFER_BUSY_POLL`` + ``SO_BUSY_POLL`` 20 us
    + that budget, and a ``recvfrom`` on an empty Rx ring (DPDK's default 64).
    ``need_wakeup``: bind with ``XDP_USE_NEED_WAKEUP`` (DPDK always does).  ``xdp_mode``:
    ``auto`` (native, falling back to generic when the driver refuses the MTU), ``native`` or
    ``generic``.  ``rx_size``/``tx_size``/``fill_size``/``comp_size``: ring entries (powers of
    two); ``rx_frames``: frames kept on the fill + Rx rings (default ``rx_size``).
    ``rx_coalesce_us`` (pktbuf's, not DPDK's; 0 = off): a burst that finds fewer than
    ``rx_batch`` frames leaves them until the first has waited that long -- fewer, fuller
    bursts for a bounded added latency, as an AF_PACKET V3 block ring's retire timer does.
    """

    driver = DRIVER
    kind = K_AF_XDP
    _rx_kernel = af_xdp_rx_burst
    _tx_kernel = af_xdp_tx_burst

    def __init__(self, pool, iface: str, *, start_queue: int = 0, queue_count: int = 1,
                 force_copy: bool = False, zero_copy: bool = False, busy_budget: int = 64,
                 need_wakeup: bool = True, xdp_mode: str = "auto",
                 rx_size: int = DEFAULT_DESCS, tx_size: int = DEFAULT_DESCS,
                 fill_size: int = 2 * DEFAULT_DESCS, comp_size: int = DEFAULT_DESCS,
                 rx_frames: int | None = None, rx_coalesce_us: int = 0, rx_batch: int = 32,
                 xsk_map=None, name: str = "net_af_xdp0", port_id: int = 0):
        from ....buf.domain.pools import PktmbufPool
        if not isinstance(pool, PktmbufPool):
            raise InvalidArgument(f"pool must be a PktmbufPool, got {type(pool).__name__}")
        pool._check_open()
        d = DRIVER
        if not isinstance(iface, str) or not iface or len(iface.encode()) >= 16 or "/" in iface:
            raise InvalidArgument(f"{d}: iface={iface!r} is not an interface name "
                                  "(1 to 15 bytes)")
        start_queue = int_arg(d, "start_queue", start_queue, 0, 0xFFFF)
        queue_count = int_arg(d, "queue_count", queue_count, 1, MAX_QUEUES)
        busy_budget = int_arg(d, "busy_budget", busy_budget, 0, 0xFFFF)
        self.rx_coalesce_us = int_arg(d, "rx_coalesce_us", rx_coalesce_us, 0, 1_000_000)
        self.rx_batch = int_arg(d, "rx_batch", rx_batch, 1, RX_MAX_BURST)
        if xdp_mode not in XDP_MODES:
            raise InvalidArgument(f"{d}: xdp_mode={xdp_mode!r}; one of {', '.join(XDP_MODES)}")
        self.xsk_map_owner = None if xsk_map is None else parse_xsk_map(xsk_map)
        if force_copy and zero_copy:
            raise InvalidArgument(f"{d}: force_copy and zero_copy exclude each other")
        sizes = {}
        for k, v in (("rx_size", rx_size), ("tx_size", tx_size), ("fill_size", fill_size),
                     ("comp_size", comp_size)):
            v = int_arg(d, k, v, 1, 1 << 16)
            if not _pow2(v):
                raise InvalidArgument(f"{d}: {k}={v} is not a power of two")
            sizes[k] = v
        if rx_frames is None:
            rx_frames = min(sizes["rx_size"], sizes["fill_size"])
        rx_frames = int_arg(d, "rx_frames", rx_frames, 1, 1 << 20)
        if rx_frames > sizes["fill_size"] + sizes["rx_size"]:
            raise InvalidArgument(f"{d}: rx_frames={rx_frames} does not fit the fill and Rx "
                                  f"rings (fill_size={sizes['fill_size']}, "
                                  f"rx_size={sizes['rx_size']})")
        super().__init__(name, port_id, pool)
        self.iface = iface
        self.start_queue = start_queue
        self.force_copy = bool(force_copy)
        self.zero_copy_requested = bool(zero_copy)
        self.busy_budget = busy_budget
        self.need_wakeup = bool(need_wakeup)
        self.sizes = sizes
        self.rx_frames = rx_frames
        self.xdp_mode = None
        self.zero_copy = False
        self._q: list[_Queue] = []
        self._prog: XdpProgram | XskMap | None = None
        self._probe = None
        self._mtu = 0
        self._mac = bytes(6)
        self.closed = True              # until fully set up
        try:
            self._open(queue_count, xdp_mode)
        except BaseException:
            self._close()
            raise
        self.closed = False

    # -- set-up --------------------------------------------------------------------------------
    def _geometry(self, mtu: int):
        """(chunk, UMEM headroom, Rx data offset) for this pool, or a clear refusal."""
        p = self.pool
        d = DRIVER
        if p.data_room < MIN_CHUNK:
            raise InvalidArgument(f"{d}: the pool's data_room is {p.data_room} bytes; AF_XDP "
                                  f"frames (UMEM chunks) are {MIN_CHUNK} to {PAGE} bytes, so "
                                  f"mbuf buffers must hold at least {MIN_CHUNK}")
        chunk = min(p.data_room, PAGE)
        umem_headroom = max(0, p.headroom - XDP_PACKET_HEADROOM)
        rx_off = umem_headroom + XDP_PACKET_HEADROOM
        room = chunk - rx_off
        need = mtu + ETHER_HDR_LEN
        if room < need:
            raise InvalidArgument(
                f"{d}: the pool leaves {room} bytes per frame after the kernel's "
                f"{XDP_PACKET_HEADROOM}-byte XDP headroom (data_room {p.data_room}, "
                f"headroom {p.headroom}, chunk {chunk}); {self.iface!r}'s MTU {mtu} needs "
                f"{need}: use a data_room of at least {need + rx_off} (at most {PAGE} counts)")
        if p.region.address % PAGE:
            raise InvalidArgument(f"{d}: the pool's region is not page-aligned")
        return chunk, umem_headroom, rx_off

    def _open(self, queue_count: int, xdp_mode: str) -> None:
        d = DRIVER
        try:
            self._probe = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except OSError as e:
            raise xsk_error(e, "socket(AF_PACKET) for interface queries", self.iface) from None
        try:
            self.ifindex = if_index(self._probe, self.iface)
        except OSError:
            raise NoSuchInterface(f"{d}: no interface {self.iface!r} in this network "
                                  "namespace") from None
        check_queues(self._probe, self.iface, self.start_queue, queue_count,
                      f"start_queue={self.start_queue} queue_count={queue_count}")
        self._mtu = if_mtu(self._probe, self.iface)
        self._mac = if_mac(self._probe, self.iface)
        self.chunk, self.umem_headroom, self.rx_data_off = self._geometry(self._mtu)
        flags = XDP_USE_NEED_WAKEUP if self.need_wakeup else 0
        if self.force_copy:
            flags |= XDP_COPY
        if self.zero_copy_requested:
            flags |= XDP_ZEROCOPY
        self.bind_flags = flags
        lcore = facade_lcore()
        for i in range(queue_count):
            q = _Queue()
            self._q.append(q)
            self._setup_queue(q, i, lcore)
        self.zero_copy = self._q[0].xsk.zerocopy()
        self._attach(xdp_mode)

    def _setup_queue(self, q: _Queue, i: int, lcore: int) -> None:
        d = DRIVER
        qid = self.start_queue + i
        p = self.pool
        q.xsk = x = Xsk()
        x.register_umem(p.region.address, page_round(p.region.size), self.chunk,
                        self.umem_headroom)
        s = self.sizes
        x.map_rings(s["fill_size"], s["comp_size"], s["rx_size"], s["tx_size"])
        if self.busy_budget:
            x.busy_poll(self.busy_budget)
        try:
            self._bind(x, qid)
        except OSError as e:
            where = f"queue {qid} of {self.iface!r}"
            if e.errno == errno.EBUSY:
                raise Busy(f"{d}: {where} has an AF_XDP socket already (EBUSY): one socket "
                           "per queue; close the other port or use another queue") from None
            if e.errno == errno.EOPNOTSUPP and self.zero_copy_requested:
                raise PortError(f"{d}: {self.iface!r} has no AF_XDP zero-copy support "
                                "(bind with XDP_ZEROCOPY: EOPNOTSUPP); leave zero_copy off "
                                "for copy mode") from None
            if e.errno == errno.EINVAL:
                raise InvalidArgument(f"{d}: bind to {where} refused (EINVAL): the interface "
                                      "has fewer queues?") from None
            raise xsk_error(e, "bind", self.iface) from None
        u = AF_XDP_UMEM.create({"own": p.n})
        c = u.cfg
        c[U_POOL] = p.id
        c[U_OBJ_BASE] = p.obj_base
        c[U_NB_OBJ] = p.n
        c[U_STRIDE] = p.elt_size
        c[U_PRIV] = p.priv_size
        c[U_CHUNK] = self.chunk
        c[U_RX_OFF] = self.rx_data_off
        c[U_MAX_LEN] = self._mtu + ETHER_HDR_LEN
        rx = AF_XDP_RXQ.create({"scr": max(RX_MAX_BURST, self.rx_frames)})
        c = rx.cfg
        c[RC_FD] = x.fd
        _ring_words(c, RC_FILL, x.rings["fill"])
        _ring_words(c, RC_RX, x.rings["rx"])
        c[RC_UMEM] = u.address
        c[RC_PORT] = self.port_id
        c[RC_TARGET] = self.rx_frames
        c[RC_FLAGS] = RXF_BUSY_POLL if self.busy_budget else 0
        c[RC_BATCH] = self.rx_batch
        c[RC_COALESCE_NS] = self.rx_coalesce_us * 1000
        tx = AF_XDP_TXQ.create({"scr_comp": max(TX_MAX_BURST, s["comp_size"])})
        c = tx.cfg
        c[TC_FD] = x.fd
        _ring_words(c, TC_TX, x.rings["tx"])
        _ring_words(c, TC_COMP, x.rings["comp"])
        c[TC_UMEM] = u.address
        c[TC_PORT] = self.port_id
        q.umem, q.rxq, q.txq = u, rx, tx
        rc = int(af_xdp_fill(p.domain.state, rx, lcore, self.rx_frames))
        if rc < 0:
            raise PoolExhausted(f"{d}: pool {p.name!r} cannot give the {self.rx_frames} "
                                f"frames queue {qid} receives into ({p.avail_count} free)")

    def _bind(self, x: Xsk, qid: int) -> None:
        """Bind, retrying ``EBUSY`` for up to ``BIND_RETRY_S``: the kernel lets go of a
        closed socket's queue from a work item, a moment after ``close()`` returned."""
        end = time.monotonic() + BIND_RETRY_S
        while True:
            try:
                return x.bind(self.ifindex, qid, self.bind_flags)
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > end:
                    raise
            time.sleep(0.005)

    def _attach(self, xdp_mode: str) -> None:
        if self.xsk_map_owner is not None:
            return self._join(*self.xsk_map_owner)
        nq = self.start_queue + len(self._q)
        self._prog = prog = XdpProgram(nq)
        for i, q in enumerate(self._q):
            prog.set_socket(self.start_queue + i, q.xsk.fd)
        self.xdp_mode = attach_program(prog, self.ifindex, self.iface, self._mtu, xdp_mode)

    def _join(self, pid: int, fd: int) -> None:
        """Put the sockets in process ``pid``'s XSKMAP (fd ``fd``) instead of attaching a
        program: the program attached there is the one that must redirect to them."""
        self._prog = m = XskMap.from_process(pid, fd, DRIVER)
        last = self.start_queue + len(self._q) - 1
        if last >= m.max_entries:
            raise InvalidArgument(f"{DRIVER}: xsk_map={pid}:{fd} has {m.max_entries} "
                                  f"entries (queues 0..{m.max_entries - 1}); queue {last} "
                                  "does not fit")
        for i, q in enumerate(self._q):
            try:
                m.set_socket(self.start_queue + i, q.xsk.fd)
            except OSError as e:
                raise xsk_error(e, f"BPF_MAP_UPDATE_ELEM (queue {self.start_queue + i} "
                                "in the shared XSKMAP)", self.iface) from None
        self.xdp_mode = "shared"

    @classmethod
    def from_devargs(cls, name: str, args, pool, *, port_id: int = 0, **kw) -> "AfXdpPort":
        d = DRIVER
        for k, why in REFUSED.items():
            if k in args:
                raise InvalidArgument(f"{d}: {k} is not supported: {why}")
        check_devargs(d, args, ACCEPTED)
        if "iface" not in args:
            raise InvalidArgument(f"{d}: iface=<interface name> is required")
        for k in ("nb_rx_queues", "nb_tx_queues"):     # testpmd's --rxq/--txq: queue_count rules
            kw.pop(k, None)
        return cls(pool, args["iface"],
                   start_queue=arg_int(d, args, "start_queue", 0, 0, 0xFFFF),
                   queue_count=arg_int(d, args, "queue_count", 1, 1, MAX_QUEUES),
                   force_copy=arg_bool(d, args, "force_copy", False),
                   busy_budget=arg_int(d, args, "busy_budget", 64, 0, 0xFFFF),
                   rx_coalesce_us=arg_int(d, args, "rx_coalesce_us", 0, 0, 1_000_000),
                   xsk_map=args.get("xsk_map"), name=name, port_id=port_id, **kw)

    # -- what the port model asks --------------------------------------------------------------
    @property
    def nb_rx_queues(self) -> int:
        return len(self._q)

    @property
    def nb_tx_queues(self) -> int:
        return len(self._q)

    def _queue(self, i: int) -> _Queue:
        self._check_open()
        return self._q[int_arg(DRIVER, "queue", i, 0, len(self._q) - 1)]

    def rx_queue(self, i: int = 0) -> Block:
        return self._queue(i).rxq

    def tx_queue(self, i: int = 0) -> Block:
        return self._queue(i).txq

    def rx_wait(self, queue: int = 0, timeout_ms: int = -1) -> int:
        """Sleep until Rx queue ``queue`` has frames (1) or ``timeout_ms`` passes (0)."""
        q = self.rx_queue(queue)
        return int(af_xdp_rx_wait(q, int_arg(DRIVER, "timeout_ms", timeout_ms, -1, 1 << 30)))

    def rx_count(self, queue: int = 0) -> int:
        """Frames waiting in Rx queue ``queue``'s ring (``rte_eth_rx_queue_count``)."""
        return int(af_xdp_rx_count(self.rx_queue(queue)))

    def fill(self, n: int, queue: int = 0, *, lcore=None) -> int:
        """Post up to ``n`` more frames to the fill ring now (bursts do it by themselves);
        returns how many.  ``NoRoom`` when the fill ring is full, ``PoolExhausted`` when the
        pool cannot give them."""
        q = self._queue(queue)
        n = int_arg(DRIVER, "n", n, 0, 1 << 20)
        rc = int(af_xdp_fill(self.pool.domain.state, q.rxq, self._lcore(lcore), n))
        if rc == -28:
            raise NoRoom(f"{DRIVER}: the fill ring of queue {queue} is full "
                         f"({self.sizes['fill_size']} entries the kernel has not taken)")
        if rc == -2:
            raise PoolExhausted(f"{DRIVER}: pool {self.pool.name!r} has no mbufs for the "
                                f"fill ring of queue {queue}")
        return rc

    def reclaim(self, queue: int = 0, *, lcore=None) -> int:
        """Free the frames the kernel has completed on Tx queue ``queue`` now (bursts do it
        by themselves); returns how many."""
        q = self._queue(queue)
        return int(af_xdp_complete(self.pool.domain.state, q.txq, self._lcore(lcore)))

    def in_flight(self) -> dict:
        """Frames the kernel holds: ``rx`` (fill + Rx rings), ``tx`` (Tx ring + not yet
        completed), summed over queues."""
        return {"rx": sum(int(q.rxq.st[RS_POSTED]) for q in self._q if q.rxq is not None),
                "tx": sum(int(q.txq.st[TS_INFLIGHT]) for q in self._q if q.txq is not None)}

    def _read_xdp_stats(self) -> None:
        for q in self._q:
            if q.xsk is not None and q.xsk.sock is not None:
                q.xdp_stats = q.xsk.statistics()

    def _queue_counters(self):
        if not self.closed:
            self._read_xdp_stats()
        rx, tx = [], []
        for q in self._q:
            r, t, x = q.rxq.st, q.txq.st, q.xdp_stats
            rx.append({"packets": int(r[RS_PACKETS]), "bytes": int(r[RS_BYTES]),
                       "errors": int(r[RS_ERRORS]), "nombuf": int(r[RS_NOMBUF]),
                       "missed": x.get("rx_dropped", 0) + x.get("rx_ring_full", 0)})
            tx.append({"packets": int(t[TS_PACKETS]), "bytes": int(t[TS_BYTES]),
                       "errors": int(t[TS_ERRORS]) + x.get("tx_invalid_descs", 0)})
        return rx, tx

    def xstats(self) -> dict:
        x = super().xstats()
        qs = [q for q in self._q if q.rxq is not None]
        for k in ("rx_dropped", "rx_invalid_descs", "tx_invalid_descs", "rx_ring_full",
                  "rx_fill_ring_empty_descs", "tx_ring_empty_descs"):
            x[k] = sum(q.xdp_stats.get(k, 0) for q in qs)
        x["rx_bad_descs"] = sum(int(q.rxq.st[RS_BAD_DESC]) for q in qs)
        x["rx_bursts"] = sum(int(q.rxq.st[RS_BURSTS]) for q in qs)
        x["rx_fill_ring_full"] = sum(int(q.rxq.st[RS_FILL_FULL]) for q in qs)
        x["tx_bad_completions"] = sum(int(q.txq.st[TS_BAD_COMP]) for q in qs)
        x["tx_copied_packets"] = sum(int(q.txq.st[TS_COPIED]) for q in qs)
        x["tx_not_owned_errors"] = sum(int(q.txq.st[TS_NOT_OWNED]) for q in qs)
        x["tx_nombuf"] = sum(int(q.txq.st[TS_NOMBUF]) for q in qs)
        x["tx_ring_full"] = sum(int(q.txq.st[TS_FULL]) for q in qs)
        x["tx_too_long_errors"] = sum(int(q.txq.st[TS_TOO_LONG]) for q in qs)
        x["tx_runt_errors"] = sum(int(q.txq.st[TS_RUNT]) for q in qs)
        x["tx_kick_errors"] = sum(int(q.txq.st[TS_KICK_ERRORS]) for q in qs)
        x["tx_kick_last_errno"] = max((int(q.txq.st[TS_LAST_ERRNO]) for q in qs), default=0)
        return x

    # -- the interface -------------------------------------------------------------------------
    def _mtu_changed(self, mtu: int) -> None:
        for q in self._q:
            q.umem.cfg[U_MAX_LEN] = mtu + ETHER_HDR_LEN

    def info(self) -> dict:
        i = super().info()
        i.update(iface=self.iface, ifindex=getattr(self, "ifindex", 0),
                 start_queue=self.start_queue, queue_count=len(self._q),
                 xdp_mode=self.xdp_mode, zero_copy=self.zero_copy,
                 xsk_map=None if self.xsk_map_owner is None else "%d:%d" % self.xsk_map_owner,
                 bind_flags=self.bind_flags, busy_budget=self.busy_budget,
                 chunk_size=self.chunk, umem_headroom=self.umem_headroom,
                 rx_data_off=self.rx_data_off, rx_frames=self.rx_frames,
                 rx_coalesce_us=self.rx_coalesce_us, rx_batch=self.rx_batch, **self.sizes)
        return i

    def _close(self) -> None:
        self._read_xdp_stats()
        if isinstance(self._prog, XskMap):  # our entries first: nothing redirected to us now
            for i in range(len(self._q)):
                self._prog.clear_socket(self.start_queue + i)
        if self._prog is not None:
            self._prog.close()          # the link first: no frame is redirected from here on
            self._prog = None
        dom = self.pool.domain.state
        lcore = facade_lcore()
        for q in self._q:
            if q.xsk is not None:
                q.xsk.close()           # the kernel lets go of every frame
            if q.rxq is not None:
                af_xdp_rx_release(dom, q.rxq, lcore)
            if q.txq is not None:
                af_xdp_tx_release(dom, q.txq, lcore)
        if self._probe is not None:
            self._probe.close()
            self._probe = None


def _ring_words(cfg, base: int, r) -> None:
    cfg[base + R_PROD] = r.producer
    cfg[base + R_CONS] = r.consumer
    cfg[base + R_FLAGS] = r.flags
    cfg[base + R_DESC] = r.desc
    cfg[base + R_SIZE] = r.size
