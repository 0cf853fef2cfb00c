"""The :class:`PcapPort` facade: DPDK ``net_pcap``'s port over capture files.

::

    pool = pktbuf.PktmbufPool(8192)
    with PcapPort(pool, rx_pcap="in.pcap", tx_pcap="out.pcap") as port:
        while not port.rx_eof():
            pkts = port.rx_burst(32)           # int32 mbuf handles, yours
            port.tx_burst(pkts)                # the first k are the port's now (written, freed)

    port = PcapPort.from_devargs("net_pcap0", {"rx_pcap": "in.pcap", "infinite_rx": "1"}, pool)

``port.rx_queue(i)`` / ``port.tx_queue(i)`` are the queue blocks to pass to
:func:`~pktbuf.drivers.pcap.rx.pcap_rx_burst` / :func:`~pktbuf.drivers.pcap.tx.pcap_tx_burst` from your own
``@njit`` loop.  Rx packets carry their capture time, in ns since the epoch, in the dynamic
field ``rte_dynfield_timestamp`` with the flag ``rte_dynflag_rx_timestamp`` set
(:meth:`PcapPort.rx_timestamp` reads it); Tx writes it back into the record when a packet
carries it.  docs/pcap.md has the design.
"""
from __future__ import annotations

import itertools
import os
import stat
import threading

import numpy as np

from ...._jit import kernel
from ....block import Block
from ...common.kinds import K_PCAP
from ....errors import (E_NOMEM, InvalidArgument, PcapError, PcapFormatError, PcapWriteError,
                        check_count, check_flag, check_handles)
from ....lcore import check_lcore
from ....buf.mbuf.dynfield import DYN_START
from .. import format as F
from .. import layout as L
from ..header import pcap_file_header, pcapng_file_header, probe_header
from ..linktype import MODES as LINK_MODES
from ..ngcall import pcapng_parser
from ..rx import pcap_rx_burst, pcap_rx_close, pcap_rx_eof
from ..tx import pcap_tx_burst, pcap_tx_flush
from ....buf.domain.pools import PktmbufPool
from ...common.api.port import raise_tx_check, tx_check
from .failures import port_error, port_warnings, rx_format_error

__all__ = ["PcapPort", "DEVARGS", "UNSUPPORTED_DEVARGS"]

DRIVER = "net_pcap"
DEVARGS = ("rx_pcap", "tx_pcap", "infinite_rx", "snaplen", "linktypes")
UNSUPPORTED_DEVARGS = ("rx_iface", "rx_iface_in", "tx_iface", "iface", "phy_mac")
MAX_QUEUES = 16                   # RTE_PMD_PCAP_MAX_QUEUES
MAX_BURST = L.BURST_MAX
DEFAULT_WINDOW = 16 << 20         # bytes of a file mapped at once
MIN_WINDOW = 2 * F.MAX_BLOCK      # longer than any block we accept, plus a page
MIN_MBUF_ROOM = 64                # a record of MAX_SNAPLEN then needs at most 4096 mbufs
LINK_SPEED = 10000                # Mb/s, what DPDK 22.11's net_pcap reports (10G)
MTU = 1500                        # RTE_ETHER_MTU
TS_FIELD = "rte_dynfield_timestamp"
TS_FLAG = "rte_dynflag_rx_timestamp"
_SCRATCH = 2048

_mac_seq = itertools.count()      # DPDK: 02:70:63:61:70:<n>, n counting pcap ports per process

# -- entry points ---------------------------------------------------------------------------------
@kernel
def _py_rx(dom, q, lcore, out, n):
    return pcap_rx_burst(dom, q, lcore, out, n)


@kernel
def _py_tx(dom, q, lcore, pk, n, scratch):
    """Check every packet, then write: ``(0, taken, 0)``, ``(1, CHK_* reason, index)`` or
    ``(2, E_* code, 0)`` -- then nothing was taken."""
    kind, val, idx = tx_check(dom, pk, n, scratch)
    if kind != 0:
        return kind, val, idx
    return 0, np.int64(pcap_tx_burst(dom, q, lcore, pk, n)), np.int64(0)


# -- files ----------------------------------------------------------------------------------------
def _paths(v, key: str) -> list[str]:
    if v is None:
        return []
    vals = [v] if isinstance(v, (str, os.PathLike)) else v
    if not isinstance(vals, (list, tuple)):
        raise InvalidArgument(f"{key} must be a path or a list of paths, got {type(v).__name__}")
    out = []
    for p in vals:
        if not isinstance(p, (str, os.PathLike)) or not os.fspath(p):
            raise InvalidArgument(f"{key} must hold non-empty paths, got {p!r}")
        out.append(os.fspath(p))
    return out


def _check_distinct(rx: list, tx: list) -> None:
    """A Tx file is created or truncated: it must be none of the Rx files (a mapped file that
    shrinks kills the reader with SIGBUS) and appear once."""
    for i, t in enumerate(tx):
        if t in tx[:i]:
            raise InvalidArgument(f"tx_pcap {t!r} is given twice")
        for r in rx:
            try:
                same = os.path.samefile(t, r)
            except OSError:
                same = os.path.abspath(t) == os.path.abspath(r)
            if same:
                raise InvalidArgument(f"tx_pcap {t!r} is also an rx_pcap file: writing would "
                                      "truncate the file being replayed")


def _page_round(n: int) -> int:
    return -(-n // 4096) * 4096


class PcapPort:
    """A pcap port: each ``rx_pcap`` file is an Rx queue (replayed, ``infinite_rx`` looping),
    each ``tx_pcap`` file a Tx queue (created or truncated).  As DPDK's ``net_pcap``: without
    Rx files the port has one null Rx queue per Tx queue, without Tx files one drop Tx queue
    (counts and frees) per Rx queue.

    ``pool``: the :class:`~pktbuf.PktmbufPool` Rx allocates from (its data room after the
    headroom must be at least 64 bytes); ``infinite_rx``: replay the Rx files forever;
    ``nano``: Tx writes ns timestamps (DPDK's net_pcap does; False: µs); ``snaplen``: Tx cuts
    longer packets to it (1..262144, the header says it); ``tx_format``: "pcap" or "pcapng"
    (default: "pcapng" for a ``.pcapng`` file name, else "pcap"); ``strict``: Rx refuses records
    longer than the file's snaplen (False: up to 262144, as Wireshark and dpkt read them);
    ``window``: bytes of an Rx file mapped at once (at least 2 MiB; memory stays bounded by it
    whatever the file size); ``timestamps``: register DPDK's Rx timestamp dynamic field and flag
    in the pool's domain and use them; ``flush_every_burst``: write the Tx buffer at the end of
    every burst (DPDK flushes every burst; default: when 1 MiB is full, on flush and close);
    ``port_id``: stored in received mbufs; ``name``: the device name; ``linktypes``: which
    link types Rx reads (docs/pcap.md, "Link types"): ``"convertible"`` (the default here:
    Ethernet, and LINUX_SLL, LINUX_SLL2 and raw IP converted to Ethernet; any other link type
    is a format error), ``"any"`` (the same, but frames of other link types are skipped and
    counted in ``rx_qN_skipped_frames``: the device argument's default) or ``"ethernet"``
    (only Ethernet).
    """

    def __init__(self, pool, rx_pcap=None, tx_pcap=None, *, infinite_rx: bool = False,
                 nano: bool = True, snaplen: int = F.DEFAULT_SNAPLEN, tx_format: str | None = None,
                 strict: bool = True, window: int = DEFAULT_WINDOW, timestamps: bool = True,
                 flush_every_burst: bool = False, port_id: int = 0, name: str = "net_pcap0",
                 linktypes: str = "convertible"):
        self._closed = True
        self._rxq: list[Block] = []
        self._txq: list[Block] = []
        self._fds: list[int] = []
        if not isinstance(pool, PktmbufPool):
            raise InvalidArgument(f"pool must be a PktmbufPool, got {type(pool).__name__}")
        if pool.closed:
            raise InvalidArgument(f"pool {pool.name!r} is closed")
        rx = _paths(rx_pcap, "rx_pcap")
        tx = _paths(tx_pcap, "tx_pcap")
        if not rx and not tx:
            raise InvalidArgument("a pcap port needs rx_pcap or tx_pcap")
        if len(rx) > MAX_QUEUES or len(tx) > MAX_QUEUES:
            raise InvalidArgument(f"at most {MAX_QUEUES} rx_pcap and {MAX_QUEUES} tx_pcap files")
        self.infinite_rx = check_flag(infinite_rx, "infinite_rx")
        if self.infinite_rx and not rx:
            raise InvalidArgument("infinite_rx needs rx_pcap")
        self.nano = check_flag(nano, "nano")
        self.snaplen = check_count(snaplen, "snaplen", lo=1, hi=F.MAX_SNAPLEN)
        self.strict = check_flag(strict, "strict")
        self.window = _page_round(check_count(window, "window", lo=MIN_WINDOW, hi=1 << 40))
        timestamps = check_flag(timestamps, "timestamps")
        flush_every_burst = check_flag(flush_every_burst, "flush_every_burst")
        self.port_id = check_count(port_id, "port_id", lo=0, hi=0xFFFE)
        if not isinstance(name, str) or not name:
            raise InvalidArgument("name must be a non-empty str")
        if linktypes not in LINK_MODES:
            raise InvalidArgument(f"linktypes must be one of {', '.join(LINK_MODES)}, got "
                                  f"{linktypes!r}")
        self.linktypes = linktypes
        self._linkmode = LINK_MODES[linktypes]
        if tx_format is not None and tx_format not in ("pcap", "pcapng"):
            raise InvalidArgument(f"tx_format must be 'pcap' or 'pcapng', got {tx_format!r}")
        _check_distinct(rx, tx)
        room = int(pool.data_room) - int(pool.headroom)
        if room < MIN_MBUF_ROOM:
            raise InvalidArgument(f"the pool's mbufs hold {room} bytes after the headroom; a "
                                  f"pcap port needs at least {MIN_MBUF_ROOM}")
        self.name = name
        self.pool = pool
        self.domain = pool.domain
        self._dom = pool.domain.state
        self._tls = threading.local()
        self.mac_addr = bytes([0x02, 0x70, 0x63, 0x61, 0x70, next(_mac_seq) & 0xFF])
        self.mtu = MTU
        self.rx_files = rx
        self.tx_files = tx
        self._ts_word, self._ts_flag = -1, 0
        if timestamps:
            off = self.domain.dyn.register_field(TS_FIELD, 8, 8)
            self._ts_word = (off - DYN_START) // 4
            self._ts_flag = 1 << self.domain.dyn.register_flag(TS_FLAG)
        self._closed = False
        try:
            for p in rx:
                self._rxq.append(self._open_rx(p))
            for p in tx:
                fmt = tx_format or ("pcapng" if p.endswith(".pcapng") else "pcap")
                self._txq.append(self._open_tx(p, fmt, flush_every_burst))
            while len(self._rxq) < len(self._txq):
                self._rxq.append(self._null_rxq())
            while len(self._txq) < len(self._rxq):
                self._txq.append(self._drop_txq())
        except BaseException:
            self._release()
            raise

    # -- opening ---------------------------------------------------------------------------------
    def _null_rxq(self) -> Block:
        q = L.rxq_alloc()
        q.cfg[L.C_POOL] = self.pool.id
        q.cfg[L.C_PORT] = self.port_id
        return q

    def _drop_txq(self) -> Block:
        return L.txq_alloc()

    def _open_rx(self, path: str) -> Block:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise InvalidArgument(f"rx_pcap {path!r}: {e.strerror}") from None
        self._fds.append(fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidArgument(f"rx_pcap {path!r} is not a regular file")
        kind, swap, nano, snaplen, lt = probe_header(path, os.pread(fd, F.PCAP_HDR_LEN, 0),
                                                     self._linkmode)
        q = self._null_rxq()
        c = q.cfg
        c[L.C_FD] = fd
        c[L.C_SIZE] = st.st_size
        c[L.C_WINDOW] = min(self.window, _page_round(st.st_size))
        c[L.C_SWAP] = int(swap)
        c[L.C_NANO] = int(nano)
        limit = F.MAX_SNAPLEN
        if self.strict and 0 < snaplen < F.MAX_SNAPLEN:
            limit = snaplen
        c[L.C_SNAPLIMIT] = limit
        c[L.C_STRICT] = int(self.strict)
        c[L.C_START] = F.PCAP_HDR_LEN if kind == "pcap" else 0
        c[L.C_LOOP] = int(self.infinite_rx)
        c[L.C_TS_WORD] = self._ts_word
        c[L.C_TS_FLAG] = self._ts_flag
        c[L.C_LINKTYPE] = lt
        c[L.C_LINKMODE] = self._linkmode
        q.st[L.S_CUR] = c[L.C_START]
        if kind != "pcap":
            c[L.C_PARSE] = pcapng_parser()          # compiled on the first pcapng file
        c[L.C_FORMAT] = L.FMT_PCAP if kind == "pcap" else L.FMT_PCAPNG
        return q

    def _open_tx(self, path: str, fmt: str, flush_every_burst: bool) -> Block:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise InvalidArgument(f"tx_pcap {path!r}: {e.strerror}") from None
        self._fds.append(fd)
        head = (pcap_file_header(self.nano, self.snaplen) if fmt == "pcap"
                else pcapng_file_header(self.snaplen))
        try:
            os.write(fd, head)
        except OSError as e:
            raise PcapWriteError(f"tx_pcap {path!r}: {e.strerror}", e.errno) from None
        q = L.txq_alloc()
        c = q.cfg
        c[L.T_FD] = fd
        c[L.T_FORMAT] = L.TFMT_PCAP if fmt == "pcap" else L.TFMT_PCAPNG
        c[L.T_NANO] = int(self.nano)
        c[L.T_SNAPLEN] = self.snaplen
        c[L.T_TS_WORD] = self._ts_word
        c[L.T_TS_FLAG] = self._ts_flag
        c[L.T_FLUSH_BURST] = int(flush_every_burst)
        return q

    @classmethod
    def from_devargs(cls, name: str, args: dict, pool, *, port_id: int = 0) -> "PcapPort":
        """A port from DPDK devargs: ``{"rx_pcap": "in.pcap", "tx_pcap": "out.pcap",
        "infinite_rx": "1"}`` (a list of strings for a key given several times: one queue
        each), and pktbuf's own ``snaplen=N`` (Tx; default 262144) and
        ``linktypes=any|convertible|ethernet`` (Rx; default ``any``: frames of link types
        that cannot be converted are skipped and counted).  Interface arguments are refused:
        pcap ports never touch interfaces here."""
        if not isinstance(args, dict):
            raise InvalidArgument(f"args must be a dict, got {type(args).__name__}")
        if hasattr(args, "getall"):       # a parsed device string: repeated keys as lists
            args = {k: (lambda v: v[0] if len(v) == 1 else v)(args.getall(k)) for k in args}
        for k in args:
            if k in UNSUPPORTED_DEVARGS:
                raise InvalidArgument(f"{name}: devarg {k!r} is not supported (pcap ports read "
                                      "and write files only; live interfaces are the AF_PACKET "
                                      f"port's); accepted: {', '.join(DEVARGS)}")
            if k not in DEVARGS:
                raise InvalidArgument(f"{name}: unknown devarg {k!r}; accepted: "
                                      f"{', '.join(DEVARGS)}")
        inf = args.get("infinite_rx", "0")
        if isinstance(inf, (list, tuple)):
            if len(inf) != 1:
                raise InvalidArgument(f"{name}: infinite_rx must be given once")
            inf = inf[0]
        if inf not in ("0", "1"):
            raise InvalidArgument(f"{name}: infinite_rx must be 0 or 1, got {inf!r}")
        kw = {}
        for k in ("snaplen", "linktypes"):
            v = args.get(k)
            if isinstance(v, (list, tuple)):
                raise InvalidArgument(f"{name}: {k} must be given once")
            if v is not None:
                kw[k] = v
        if "snaplen" in kw:
            try:
                kw["snaplen"] = int(kw["snaplen"], 0)
            except ValueError:
                raise InvalidArgument(f"{name}: snaplen={kw['snaplen']!r} is not an integer") \
                    from None
            if not 1 <= kw["snaplen"] <= F.MAX_SNAPLEN:
                raise InvalidArgument(f"{name}: snaplen={kw['snaplen']} is out of range "
                                      f"1..{F.MAX_SNAPLEN}")
        if kw.get("linktypes", "any") not in LINK_MODES:
            raise InvalidArgument(f"{name}: linktypes={kw['linktypes']!r}; accepted: "
                                  f"{', '.join(LINK_MODES)}")
        kw.setdefault("linktypes", "any")
        return cls(pool, rx_pcap=args.get("rx_pcap"), tx_pcap=args.get("tx_pcap"),
                   infinite_rx=inf == "1", port_id=port_id, name=name, **kw)

    # -- description -----------------------------------------------------------------------------
    driver = DRIVER
    kind = K_PCAP                 # its kind in the port table (pktbuf.Ports)

    @property
    def nb_rx_queues(self) -> int:
        return len(self._rxq)

    @property
    def nb_tx_queues(self) -> int:
        return len(self._txq)

    @property
    def closed(self) -> bool:
        return self._closed

    def rx_queue(self, qid: int = 0) -> Block:
        """Rx queue ``qid``'s block, for :func:`~pktbuf.drivers.pcap.rx.pcap_rx_burst`."""
        return self._rxq[check_count(qid, "qid", lo=0, hi=len(self._rxq) - 1)]

    def tx_queue(self, qid: int = 0) -> Block:
        """Tx queue ``qid``'s block, for :func:`~pktbuf.drivers.pcap.tx.pcap_tx_burst`."""
        return self._txq[check_count(qid, "qid", lo=0, hi=len(self._txq) - 1)]

    @property
    def mac_str(self) -> str:
        return ":".join(f"{b:02x}" for b in self.mac_addr)

    def link(self) -> dict:
        """As DPDK telemetry's ``/ethdev/link_status``."""
        if self._closed:
            return {"status": "DOWN"}
        return {"status": "UP", "speed": LINK_SPEED, "duplex": "full-duplex"}

    def info(self) -> dict:
        """As DPDK telemetry's ``/ethdev/info`` (the fields that mean something here)."""
        return {"name": self.name, "driver_name": DRIVER, "port_id": self.port_id,
                "state": 0 if self._closed else 1, "mtu": self.mtu, "mac_addr": self.mac_str,
                "nb_rx_queues": self.nb_rx_queues, "nb_tx_queues": self.nb_tx_queues,
                "rx_mbuf_size": int(self.pool.data_room),
                "rx_mbuf_alloc_fail": self.stats()["rx_nombuf"], "promiscuous": 1,
                "scattered_rx": 1, "rx_pcap": list(self.rx_files), "tx_pcap": list(self.tx_files),
                # a queue an error stopped is shown stopped (RTE_ETH_QUEUE_STATE_STOPPED)
                "rxq_state": [0 if self._closed or q.st[L.S_ERR] else 1 for q in self._rxq],
                "txq_state": [0 if self._closed or q.st[L.TS_ERRNO] else 1 for q in self._txq],
                "linktypes": self.linktypes}

    # -- counters --------------------------------------------------------------------------------
    def stats(self) -> dict:
        """DPDK's ``rte_eth_stats``: totals and per-queue lists."""
        rx = [q.st for q in self._rxq]
        tx = [q.st for q in self._txq]
        qi = [int(s[L.S_IPACKETS]) for s in rx]
        qib = [int(s[L.S_IBYTES]) for s in rx]
        qo = [int(s[L.TS_OPACKETS]) for s in tx]
        qob = [int(s[L.TS_OBYTES]) for s in tx]
        qe = [int(s[L.S_IERRORS]) for s in rx]
        return {"ipackets": sum(qi), "opackets": sum(qo), "ibytes": sum(qib), "obytes": sum(qob),
                "imissed": sum(int(s[L.S_IMISSED]) for s in rx), "ierrors": sum(qe),
                "oerrors": sum(int(s[L.TS_OERRORS]) for s in tx),
                "rx_nombuf": sum(int(s[L.S_RX_NOMBUF]) for s in rx),
                "q_ipackets": qi, "q_opackets": qo, "q_ibytes": qib, "q_obytes": qob,
                "q_errors": qe}

    def xstats(self) -> dict:
        """DPDK's generic xstat names, then per-queue ones, then pcap's own
        (``tx_qN_truncated``: packets cut to the snaplen; ``rx_qN_wraps``: infinite_rx
        restarts; ``rx_qN_skipped_blocks``: pcapng blocks of types not read;
        ``rx_qN_skipped_frames``: packet records not delivered, of a link type not converted;
        ``rx_qN_converted``: frames of another link type delivered as Ethernet)."""
        s = self.stats()
        out = {"rx_good_packets": s["ipackets"], "tx_good_packets": s["opackets"],
               "rx_good_bytes": s["ibytes"], "tx_good_bytes": s["obytes"],
               "rx_missed_errors": s["imissed"], "rx_errors": s["ierrors"],
               "tx_errors": s["oerrors"], "rx_mbuf_allocation_errors": s["rx_nombuf"]}
        for i, q in enumerate(self._rxq):
            out[f"rx_q{i}_packets"] = int(q.st[L.S_IPACKETS])
            out[f"rx_q{i}_bytes"] = int(q.st[L.S_IBYTES])
            out[f"rx_q{i}_errors"] = int(q.st[L.S_IERRORS])
        for i, q in enumerate(self._txq):
            out[f"tx_q{i}_packets"] = int(q.st[L.TS_OPACKETS])
            out[f"tx_q{i}_bytes"] = int(q.st[L.TS_OBYTES])
        for i, q in enumerate(self._rxq):
            out[f"rx_q{i}_wraps"] = int(q.st[L.S_WRAPS])
            out[f"rx_q{i}_skipped_blocks"] = int(q.st[L.S_SKIPPED])
            out[f"rx_q{i}_skipped_frames"] = int(q.st[L.S_SKIPPED_FRAMES])
            out[f"rx_q{i}_converted"] = int(q.st[L.S_CONVERTED])
        for i, q in enumerate(self._txq):
            out[f"tx_q{i}_truncated"] = int(q.st[L.TS_TRUNCATED])
        return out

    def stats_reset(self) -> None:
        for q in self._rxq:
            for w in (L.S_IPACKETS, L.S_IBYTES, L.S_IMISSED, L.S_IERRORS, L.S_RX_NOMBUF,
                      L.S_WRAPS, L.S_SKIPPED, L.S_SKIPPED_FRAMES, L.S_CONVERTED):
                q.st[w] = 0
        for q in self._txq:
            for w in (L.TS_OPACKETS, L.TS_OBYTES, L.TS_OERRORS, L.TS_TRUNCATED):
                q.st[w] = 0

    # -- bursts ----------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise PcapError(f"{self.name} is closed")
        if self.pool.closed:
            raise InvalidArgument(f"pool {self.pool.name!r} is closed")

    def rx_format_error(self, qid: int = 0) -> PcapFormatError | None:
        """The format error that stopped Rx queue ``qid``, as an exception (None if none)."""
        return rx_format_error(self, qid)

    def error(self):
        """The error that stopped one of the port's queues, as an exception (None if none):
        a :class:`~pktbuf.PcapFormatError` of an Rx queue (``path``, ``offset``, ``reason``)
        or a :class:`~pktbuf.PcapWriteError` of a Tx queue (``errno``); ``queue`` and
        ``direction`` ("rx"/"tx") say which.  A stopped queue never delivers or takes a
        packet again: an application must treat this as the end of its run, not as an end
        of input (``pktbuf fwd`` does: docs/failures.md)."""
        return port_error(self)

    def warnings(self) -> list[dict]:
        """What was lost without stopping the port: one dict per non-zero counter --
        ``xstat`` (its name in :meth:`xstats`), ``count``, ``what`` (in words)."""
        return port_warnings(self)

    def _rx_name(self, i: int) -> str:
        return self.rx_files[i] if i < len(self.rx_files) else f"rx queue {i}"

    def _tx_name(self, i: int) -> str:
        return self.tx_files[i] if i < len(self.tx_files) else f"tx queue {i}"

    def rx_eof(self, qid: int = 0) -> bool:
        """True once Rx queue ``qid`` can never deliver again: its file is read to the end
        (not looping), or it is a null queue.  A queue that a format error stopped raises
        that PcapFormatError here (so ``while not port.rx_eof()`` never ends silently at a
        broken record); the kernel :func:`pcap_rx_eof` just returns True."""
        err = self.rx_format_error(qid)
        if err is not None:
            raise err
        return bool(pcap_rx_eof(self.rx_queue(qid)))

    def rx_burst(self, n: int = 32, qid: int = 0, *, out: np.ndarray | None = None,
                 lcore: int | None = None) -> np.ndarray:
        """Read up to ``n`` (at most 1024) packets; returns their mbuf handles (yours to free).
        Empty at the end of the file or when the pool is short; PcapFormatError when the
        file breaks its format and every packet before that point has been delivered."""
        self._check_open()
        n = check_count(n, "n", lo=0, hi=MAX_BURST)
        q = self.rx_queue(qid)
        lc = check_lcore(lcore)
        if out is None:
            out = np.empty(n, np.int32)
        elif not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.ndim == 1
                  and out.flags.c_contiguous and out.flags.writeable and out.size >= n):
            raise InvalidArgument("out must be a writeable C-contiguous 1-d int32 array of at "
                                  "least n handles")
        k = int(_py_rx(self._dom, q, lc, out, n))
        if k == 0 and n > 0:
            err = self.rx_format_error(qid)
            if err is not None:
                raise err
        return out[:k]

    def tx_burst(self, mbufs, qid: int = 0, *, lcore: int | None = None) -> int:
        """Write packets (mbuf handles); returns how many were taken, from the front: those
        are the port's now (written and freed), the rest still yours.  Each handle must be a
        live packet of this domain listed once (InvalidHandle, DoubleFree, SanityCheckError:
        then nothing is taken).  PcapWriteError once a write has failed."""
        self._check_open()
        q = self.tx_queue(qid)
        a = check_handles(mbufs, "mbufs")
        if not a.flags.writeable:
            a = a.copy()
        lc = check_lcore(lcore)
        self._raise_write_error(qid)
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

    def _raise_write_error(self, qid: int) -> None:
        e = int(self._txq[qid].st[L.TS_ERRNO])
        if e:
            path = self.tx_files[qid] if qid < len(self.tx_files) else None
            raise PcapWriteError(f"{path}: write failed: {os.strerror(e)}", e)

    def rx_timestamp(self, mbuf) -> int | None:
        """The capture time (ns since the epoch) an Rx packet carries, or None."""
        if self._ts_word < 0:
            return None
        h = int(mbuf)
        m = self.domain.state.mb[h]
        if not int(m["ol_flags"]) & self._ts_flag:
            return None
        w = m["dynfield1"]
        return int(w[self._ts_word]) | (int(w[self._ts_word + 1]) << 32)

    # -- life cycle ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every Tx queue's buffered records to its file (PcapWriteError if one fails)."""
        self._check_open()
        for i, q in enumerate(self._txq):
            if q.cfg[L.T_FD] >= 0:
                pcap_tx_flush(q)
                self._raise_write_error(i)

    def _release(self) -> list:
        errs = []
        for i, q in enumerate(self._txq):
            if q.cfg[L.T_FD] >= 0:
                if pcap_tx_flush(q) != 0:
                    errs.append(i)
                q.cfg[L.T_FD] = -1
                q.cfg[L.T_FORMAT] = L.TFMT_DROP
        for q in self._rxq:
            pcap_rx_close(q)
            q.cfg[L.C_FD] = -1
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        self._closed = True
        return errs

    def close(self) -> None:
        """Flush the Tx buffers, unmap and close every file (idempotent).  The port holds no
        mbuf between bursts, so every mbuf it ever took is back in its pool."""
        if self._closed:
            return
        errs = self._release()
        if errs:
            self._raise_write_error(errs[0])

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
        return (f"PcapPort({self.name}, rx={self.rx_files}, tx={self.tx_files}, "
                f"{'closed' if self._closed else 'open'})")
