"""``net_af_packet``: a Linux network interface as a port, through TPACKET_V3 mmap rings.

::

    port = AfPacketPort(pool, "veth0")                       # one queue pair, DPDK's defaults
    port = AfPacketPort(pool, "eth1", qpairs=4, fanout_mode="lb")
    ports.open("net_af_packet0,iface=veth0,qpairs=2,blocksz=16384,qdisc_bypass=0")

Each queue pair is one ``AF_PACKET`` socket bound to the interface with a V3 Rx ring (blocks of
variable-size frames, handed over on fill or on the retire timer) and a V3 Tx ring (fixed
frames), one ``mmap`` for both; the kernels :func:`~pktbuf.drivers.af_packet.rx.af_packet_rx_burst` /
:func:`~pktbuf.drivers.af_packet.tx.af_packet_tx_burst` copy frames between the rings and mbufs.  The
sockets of a port with several queue pairs (or any port given ``fanout_mode``/``fanout_id``)
join one ``PACKET_FANOUT`` group, so each frame reaches one queue; sockets of other ports or
processes join the same group with the same ``fanout_id``.

Device arguments are DPDK's (``iface``, ``qpairs``, ``blocksz``, ``framesz``, ``framecnt``,
``qdisc_bypass``; DPDK 25.03's ``fanout_mode``) plus ``fanout_id``; see docs/af_packet.md for
the defaults, what the kernel refuses and how pktbuf differs from DPDK 22.11.  The socket is
opened in the calling thread's network namespace; everything the port reads about the
interface afterwards (MTU, MAC, flags, speed) is asked through its own socket, so it stays
right when the caller has moved to another namespace.
"""
from __future__ import annotations

import ctypes
import errno
import mmap
import os
import socket
import struct

from .layout import (AF_PACKET_RXQ, AF_PACKET_TXQ, ETHER_HDR_LEN, RC_BLOCK_NR,
                     RC_BLOCK_SIZE, RC_FD, RC_FLAGS, RC_MBUF_CAP, RC_POOL, RC_PORT,
                     RC_RING, RS_BAD_RING, RS_BYTES, RS_ERRORS, RS_NOMBUF, RS_NPK,
                     RS_PACKETS, RS_TRUNCATED, RX_MAX_BURST, RXF_VLAN_STRIP,
                     TC_BLOCK_SIZE, TC_FD, TC_FPB, TC_FRAME_NR, TC_FRAME_SIZE,
                     TC_MAX_LEN, TC_PORT, TC_RING, TPACKET3_HDRLEN, TS_BYTES,
                     TS_ERRORS, TS_FULL, TS_KICK_ERRORS, TS_LAST_ERRNO, TS_PACKETS,
                     TS_RUNT, TS_TOO_LONG, TX_DATA_OFF)
from .rx import af_packet_rx_burst, af_packet_rx_wait
from .tx import af_packet_tx_burst
from ...block import Block
from ...errors import InvalidArgument, NoSuchInterface, OutOfMemory, PermissionDenied, PortError
from ..common.kinds import K_AF_PACKET
from ..common.api.netif import InterfacePort, if_index, if_mac, if_mtu
from ..common.api.port import Port, arg_bool, arg_int, check_devargs, int_arg

__all__ = ["AfPacketPort", "FANOUT_MODES"]

ACCEPTED = ("iface", "qpairs", "blocksz", "framesz", "framecnt", "qdisc_bypass", "fanout_mode",
            "fanout_id")

SOL_PACKET = 263
ETH_P_ALL = 0x0003
PACKET_ADD_MEMBERSHIP = 1
PACKET_DROP_MEMBERSHIP = 2
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
PACKET_TX_RING = 13
PACKET_LOSS = 14
PACKET_FANOUT = 18
PACKET_QDISC_BYPASS = 20
PACKET_IGNORE_OUTGOING = 23
PACKET_MR_PROMISC = 1
TPACKET_V3 = 2
FANOUT_FLAG_ROLLOVER = 0x1000
FANOUT_FLAG_DEFRAG = 0x8000
FANOUT_MODES = {"hash": 0, "lb": 1, "cpu": 2, "rollover": 3, "rnd": 4, "qm": 5}


PAGE = mmap.PAGESIZE
MAX_QPAIRS = 16             # DPDK's RTE_PMD_AF_PACKET_MAX_RINGS
MAX_BLOCKSZ = 1 << 24
RX_MAC_OFF = 82             # where V3 puts an Ethernet frame after its packet header
DEFAULT_RING_BYTES = 512 * 2048   # DPDK's framecnt x framesz

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long)
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p <<= 1
    return p


def _os_error(e: OSError, what: str, iface: str) -> Exception:
    if e.errno in (errno.EPERM, errno.EACCES):
        return PermissionDenied(f"net_af_packet: {what} on {iface!r}: {e.strerror} (AF_PACKET "
                                "sockets need CAP_NET_RAW)")
    if e.errno in (errno.ENODEV, errno.ENXIO):
        return NoSuchInterface(f"net_af_packet: no interface {iface!r} in this network "
                               "namespace")
    if e.errno == errno.ENOMEM:
        return OutOfMemory(f"net_af_packet: {what} on {iface!r}: {e.strerror}")
    if e.errno == errno.EINVAL:
        return InvalidArgument(f"net_af_packet: {what} on {iface!r}: the kernel refused it "
                               "(EINVAL)")
    return PortError(f"net_af_packet: {what} on {iface!r}: {e.strerror or e}")


class _QueuePair:
    """One socket, its mmap'ed rings and their queue blocks."""

    def __init__(self):
        self.sock = None
        self.addr = 0
        self.size = 0
        self.rxq: Block | None = None
        self.txq: Block | None = None
        self.missed = 0          # PACKET_STATISTICS drops, accumulated (the kernel resets them)
        self.freezes = 0

    def close(self) -> None:
        if self.addr:
            _libc.munmap(self.addr, self.size)
            self.addr = 0
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class AfPacketPort(InterfacePort, Port):
    """An ``AF_PACKET`` port on the interface ``iface`` of the caller's network namespace.

    ``pool``: the :class:`~pktbuf.PktmbufPool` Rx takes mbufs from.  ``qpairs``: queue pairs
    (one socket each, in one fanout group when more than one).  ``blocksz``, ``framesz``,
    ``framecnt``: ring geometry as DPDK's devargs (defaults: DPDK's, enlarged for an MTU above
    1500; see docs/af_packet.md).  ``qdisc_bypass``: send with ``PACKET_QDISC_BYPASS`` (DPDK's
    default).  ``fanout_mode``: hash, lb, cpu, rollover, rnd or qm; ``fanout_id``: the group
    id (default DPDK's ``(pid ^ ifindex) & 0xffff``).  ``promisc``: make the interface
    promiscuous while the port is open (as testpmd does; undone on close).  ``vlan_strip``:
    keep a stripped VLAN tag in ``vlan_tci`` only instead of putting it back into the frame.
    ``ignore_outgoing``: do not receive frames sent on the interface by this host
    (``PACKET_IGNORE_OUTGOING``; default on, as a NIC does not see its own Tx).
    ``block_timeout_ms``: the Rx block retire timeout (0: the kernel's choice).
    """

    driver = "net_af_packet"
    kind = K_AF_PACKET
    _rx_kernel = af_packet_rx_burst
    _tx_kernel = af_packet_tx_burst

    def __init__(self, pool, iface: str, *, qpairs: int = 1, blocksz: int | None = None,
                 framesz: int | None = None, framecnt: int | None = None,
                 qdisc_bypass: bool = True, fanout_mode: str | None = None,
                 fanout_id: int | None = None, promisc: bool = True, vlan_strip: bool = False,
                 ignore_outgoing: bool = True, block_timeout_ms: int = 0,
                 name: str = "net_af_packet0", port_id: int = 0):
        from ...buf.domain.pools import PktmbufPool
        if not isinstance(pool, PktmbufPool):
            raise InvalidArgument(f"pool must be a PktmbufPool, got {type(pool).__name__}")
        pool._check_open()
        d = "net_af_packet"
        if not isinstance(iface, str) or not iface or len(iface.encode()) >= 16 or "/" in iface:
            raise InvalidArgument(f"{d}: iface={iface!r} is not an interface name "
                                  "(1 to 15 bytes)")
        qpairs = int_arg(d, "qpairs", qpairs, 1, MAX_QPAIRS)
        if fanout_mode is not None and fanout_mode not in FANOUT_MODES:
            raise InvalidArgument(f"{d}: fanout_mode={fanout_mode!r}; one of "
                                  f"{', '.join(FANOUT_MODES)}")
        if fanout_id is not None:
            fanout_id = int_arg(d, "fanout_id", fanout_id, 0, 0xFFFF)
        block_timeout_ms = int_arg(d, "block_timeout_ms", block_timeout_ms, 0, 0xFFFF)
        cap = pool.data_room - pool.headroom
        if cap < 64:
            raise InvalidArgument(f"{d}: the pool's mbufs hold {cap} bytes of data; at least "
                                  "64 are needed")
        super().__init__(name, port_id, pool)
        self.iface = iface
        self.qdisc_bypass = bool(qdisc_bypass)
        self.vlan_strip = bool(vlan_strip)
        self.ignore_outgoing = bool(ignore_outgoing)
        self.block_timeout_ms = block_timeout_ms
        self._qp: list[_QueuePair] = []
        self._promisc = False
        self._mtu = 0
        self._mac = bytes(6)
        self.closed = True              # until fully set up: close() must not run _close twice
        try:
            self._open(qpairs, blocksz, framesz, framecnt, fanout_mode, fanout_id, cap)
            if promisc:
                self.promiscuous_enable()
        except BaseException:
            self._close()
            raise
        self.closed = False

    # -- set-up --------------------------------------------------------------------------------
    def _socket(self) -> socket.socket:
        try:
            # protocol 0: no frames reach the socket before it is bound to the interface
            return socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except OSError as e:
            raise _os_error(e, "socket()", self.iface) from None

    def _geometry(self, mtu, blocksz, framesz, framecnt):
        d = "net_af_packet"
        max_frame = mtu + ETHER_HDR_LEN + 4
        if framesz is None:
            framesz = max(2048, _round_up(TX_DATA_OFF + max_frame, 16))
        framesz = int_arg(d, "framesz", framesz, 1, MAX_BLOCKSZ)
        if framesz % 16 or framesz < TPACKET3_HDRLEN + 12:
            raise InvalidArgument(f"{d}: framesz={framesz} must be a multiple of 16 and at "
                                  f"least {_round_up(TPACKET3_HDRLEN + 12, 16)}")
        if blocksz is None:
            blocksz = _pow2_at_least(max(PAGE, framesz, 48 + RX_MAC_OFF + max_frame))
        blocksz = int_arg(d, "blocksz", blocksz, 1, MAX_BLOCKSZ)
        if blocksz % PAGE:
            raise InvalidArgument(f"{d}: blocksz={blocksz} is not a multiple of the page size "
                                  f"({PAGE})")
        if framesz > blocksz:
            raise InvalidArgument(f"{d}: framesz={framesz} is larger than blocksz={blocksz}")
        fpb = blocksz // framesz
        if framecnt is None:
            framecnt = max(fpb, DEFAULT_RING_BYTES // framesz // fpb * fpb)
        framecnt = int_arg(d, "framecnt", framecnt, 1, 1 << 24)
        if framecnt % fpb:
            raise InvalidArgument(f"{d}: framecnt={framecnt} is not a multiple of the "
                                  f"{fpb} frames a block holds (blocksz / framesz)")
        if framecnt // fpb * blocksz > 1 << 31:
            raise InvalidArgument(f"{d}: the rings would take more than 2 GiB")
        return blocksz, framesz, framecnt, fpb

    def _open(self, qpairs, blocksz, framesz, framecnt, fanout_mode, fanout_id, cap):
        probe = self._socket()
        self._probe = probe
        try:
            self.ifindex = if_index(probe, self.iface)
        except OSError as e:
            raise _os_error(e, "SIOCGIFINDEX", self.iface) from None
        mtu = self._mtu = if_mtu(probe, self.iface)
        self._mac = if_mac(probe, self.iface)
        self.blocksz, self.framesz, self.framecnt, fpb = self._geometry(mtu, blocksz, framesz,
                                                                        framecnt)
        nblk = self.framecnt // fpb
        use_fanout = qpairs > 1 or fanout_mode is not None or fanout_id is not None
        self.fanout_mode = (fanout_mode or "hash") if use_fanout else None
        self.fanout_id = ((os.getpid() ^ self.ifindex) & 0xFFFF if fanout_id is None
                          else fanout_id) if use_fanout else None
        for i in range(qpairs):
            qp = _QueuePair()
            self._qp.append(qp)
            qp.sock = self._socket()
            self._setup_queue(qp, i, nblk, fpb, cap, mtu)
        if use_fanout:
            mode = FANOUT_MODES[self.fanout_mode]
            flags = 0 if mode == FANOUT_MODES["rollover"] else FANOUT_FLAG_ROLLOVER
            if mode == FANOUT_MODES["hash"]:
                flags |= FANOUT_FLAG_DEFRAG
            arg = self.fanout_id | ((mode | flags) << 16)
            for qp in self._qp:
                try:
                    qp.sock.setsockopt(SOL_PACKET, PACKET_FANOUT, struct.pack("I", arg))
                except OSError as e:
                    raise PortError(f"net_af_packet: cannot join fanout group "
                                    f"{self.fanout_id} ({self.fanout_mode}) on {self.iface!r}: "
                                    f"{e.strerror} (another group with that id has another "
                                    "mode, or it is full)") from None

    def _setup_queue(self, qp, i, nblk, fpb, cap, mtu):
        s = qp.sock
        what = "setsockopt"
        try:
            s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
            s.setsockopt(SOL_PACKET, PACKET_LOSS, 1)
            if self.qdisc_bypass:
                s.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
            if self.ignore_outgoing:
                s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            what = "PACKET_RX_RING"
            s.setsockopt(SOL_PACKET, PACKET_RX_RING,
                         struct.pack("7I", self.blocksz, nblk, self.framesz, self.framecnt,
                                     self.block_timeout_ms, 0, 0))
            what = "PACKET_TX_RING"
            s.setsockopt(SOL_PACKET, PACKET_TX_RING,
                         struct.pack("7I", self.blocksz, nblk, self.framesz, self.framecnt,
                                     0, 0, 0))
        except OSError as e:
            raise _os_error(e, what, self.iface) from None
        size = 2 * nblk * self.blocksz
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED,
                          s.fileno(), 0)
        if addr in (None, _MAP_FAILED):
            e = ctypes.get_errno()
            raise _os_error(OSError(e, os.strerror(e)), "mmap of the rings", self.iface)
        qp.addr, qp.size = addr, size
        try:
            s.bind((self.iface, ETH_P_ALL))
        except OSError as e:
            raise _os_error(e, "bind", self.iface) from None
        half = nblk * self.blocksz
        rx = AF_PACKET_RXQ.create({"scr_mb": RX_MAX_BURST + 2 * (self.blocksz // cap + 1)})
        c = rx.cfg
        c[RC_FD] = s.fileno()
        c[RC_RING] = addr
        c[RC_BLOCK_SIZE] = self.blocksz
        c[RC_BLOCK_NR] = nblk
        c[RC_POOL] = self.pool.id
        c[RC_PORT] = self.port_id
        c[RC_FLAGS] = RXF_VLAN_STRIP if self.vlan_strip else 0
        c[RC_MBUF_CAP] = cap
        rx.st[RS_NPK] = -1
        tx = AF_PACKET_TXQ.create()
        c = tx.cfg
        c[TC_FD] = s.fileno()
        c[TC_RING] = addr + half
        c[TC_BLOCK_SIZE] = self.blocksz
        c[TC_FRAME_SIZE] = self.framesz
        c[TC_FRAME_NR] = self.framecnt
        c[TC_FPB] = fpb
        c[TC_PORT] = self.port_id
        c[TC_MAX_LEN] = mtu + ETHER_HDR_LEN
        qp.rxq, qp.txq = rx, tx

    @classmethod
    def from_devargs(cls, name: str, args, pool, *, port_id: int = 0, **kw) -> "AfPacketPort":
        d = "net_af_packet"
        check_devargs(d, args, ACCEPTED)
        if "iface" not in args:
            raise InvalidArgument(f"{d}: iface=<interface name> is required")
        for k in ("nb_rx_queues", "nb_tx_queues"):     # testpmd's --rxq/--txq: qpairs rules
            kw.pop(k, None)
        fm = args.get("fanout_mode")
        return cls(pool, args["iface"], qpairs=arg_int(d, args, "qpairs", 1, 1, MAX_QPAIRS),
                   blocksz=arg_int(d, args, "blocksz", None, 1, MAX_BLOCKSZ),
                   framesz=arg_int(d, args, "framesz", None, 1, MAX_BLOCKSZ),
                   framecnt=arg_int(d, args, "framecnt", None, 1, 1 << 24),
                   qdisc_bypass=arg_bool(d, args, "qdisc_bypass", True),
                   fanout_mode=fm,
                   fanout_id=arg_int(d, args, "fanout_id", None, 0, 0xFFFF),
                   name=name, port_id=port_id, **kw)

    # -- what the port model asks --------------------------------------------------------------
    @property
    def nb_rx_queues(self) -> int:
        return len(self._qp)

    @property
    def nb_tx_queues(self) -> int:
        return len(self._qp)

    def rx_queue(self, i: int = 0) -> Block:
        self._check_open()
        return self._qp[int_arg("net_af_packet", "queue", i, 0, len(self._qp) - 1)].rxq

    def tx_queue(self, i: int = 0) -> Block:
        self._check_open()
        return self._qp[int_arg("net_af_packet", "queue", i, 0, len(self._qp) - 1)].txq

    def rx_wait(self, queue: int = 0, timeout_ms: int = -1) -> int:
        """Sleep until Rx queue ``queue`` has frames (1) or ``timeout_ms`` passes (0)."""
        q = self.rx_queue(queue)
        return int(af_packet_rx_wait(q, int_arg("net_af_packet", "timeout_ms", timeout_ms,
                                                 -1, 1 << 30)))

    def _read_stats(self) -> None:
        for qp in self._qp:
            if qp.sock is None:
                continue
            try:
                _packets, drops, freezes = struct.unpack(
                    "3I", qp.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12))
            except OSError:
                continue
            qp.missed += drops
            qp.freezes += freezes

    def _queue_counters(self):
        if not self.closed:
            self._read_stats()
        rx, tx = [], []
        for qp in self._qp:
            r, t = qp.rxq.st, qp.txq.st
            rx.append({"packets": int(r[RS_PACKETS]), "bytes": int(r[RS_BYTES]),
                       "errors": int(r[RS_ERRORS]), "nombuf": int(r[RS_NOMBUF]),
                       "missed": qp.missed})
            tx.append({"packets": int(t[TS_PACKETS]), "bytes": int(t[TS_BYTES]),
                       "errors": int(t[TS_ERRORS])})
        return rx, tx

    def xstats(self) -> dict:
        x = super().xstats()
        x["rx_truncated_errors"] = sum(int(qp.rxq.st[RS_TRUNCATED]) for qp in self._qp)
        x["rx_ring_errors"] = sum(int(qp.rxq.st[RS_BAD_RING]) for qp in self._qp)
        x["rx_queue_freezes"] = sum(qp.freezes for qp in self._qp)
        x["tx_too_long_errors"] = sum(int(qp.txq.st[TS_TOO_LONG]) for qp in self._qp)
        x["tx_runt_errors"] = sum(int(qp.txq.st[TS_RUNT]) for qp in self._qp)
        x["tx_ring_full"] = sum(int(qp.txq.st[TS_FULL]) for qp in self._qp)
        x["tx_kick_errors"] = sum(int(qp.txq.st[TS_KICK_ERRORS]) for qp in self._qp)
        x["tx_kick_last_errno"] = max((int(qp.txq.st[TS_LAST_ERRNO]) for qp in self._qp),
                                      default=0)
        return x

    # -- the interface -------------------------------------------------------------------------
    def _mtu_changed(self, mtu: int) -> None:
        for qp in self._qp:
            qp.txq.cfg[TC_MAX_LEN] = mtu + ETHER_HDR_LEN

    def info(self) -> dict:
        i = super().info()
        i.update(iface=self.iface, ifindex=self.ifindex, tpacket_version=3,
                 blocksz=self.blocksz, framesz=self.framesz, framecnt=self.framecnt,
                 qdisc_bypass=self.qdisc_bypass, fanout_mode=self.fanout_mode,
                 fanout_id=self.fanout_id, promiscuous=self._promisc,
                 vlan_strip=self.vlan_strip, ignore_outgoing=self.ignore_outgoing)
        return i

    def promiscuous_enable(self) -> None:
        """Count this port in the interface's promiscuity (``PACKET_MR_PROMISC``); the kernel
        drops it when the socket closes, so it never outlives the port."""
        if self._promisc:
            return
        self._membership(PACKET_ADD_MEMBERSHIP)
        self._promisc = True

    def promiscuous_disable(self) -> None:
        if not self._promisc:
            return
        self._membership(PACKET_DROP_MEMBERSHIP)
        self._promisc = False

    def _membership(self, op: int) -> None:
        mreq = struct.pack("iHH8s", self.ifindex, PACKET_MR_PROMISC, 0, b"")
        try:
            self._probe.setsockopt(SOL_PACKET, op, mreq)
        except OSError as e:
            raise _os_error(e, "PACKET_MR_PROMISC", self.iface) from None

    @property
    def promiscuous(self) -> bool:
        return self._promisc

    def _close(self) -> None:
        if not self.closed or self._qp:
            self._read_stats()
        for qp in self._qp:
            qp.close()
        probe = getattr(self, "_probe", None)
        if probe is not None:
            probe.close()         # drops the promiscuity this port added
        self._promisc = False
