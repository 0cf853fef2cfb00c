"""What every ``pktbuf l3fwd`` process sets up the same way -- its tables (filled as l3fwd fills
them), its lcores' stage states, its pools and ports (:class:`Board`) -- whether its lcores are
threads of one process or processes of their own (:mod:`.lcores`)."""
from __future__ import annotations

import numpy as np

from ...drivers.common.kinds import MAX_PORTS
from ...errors import PktbufError
from ...ethdev.api import kinds_of_devices
from ..stage.api import Stage
from . import kernels as K
from . import options as O
from . import routes as R

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
SLICE = 0.1
DPDK_PCAP_SNAPLEN = 65535            # the snaplen DPDK 22.11's net_pcap writes in its headers
NB_MBUF = 8192                       # l3fwd's floor (NB_MBUF)
LPM_MAX_RULES, LPM_TBL8S = 1024, 1 << 8           # IPV4_L3FWD_LPM_*
LPM6_MAX_RULES, LPM6_TBL8S = 1024, 1 << 16        # IPV6_L3FWD_LPM_*


class Failure(Exception):
    """l3fwd's ``rte_exit(EXIT_FAILURE, ...)``."""


def _port_enabled(mask: int, port: int) -> bool:
    # l3fwd tests `1 << if_out & enabled_port_mask` on an int: x86 takes the shift count mod 32
    return bool((1 << (port & 31)) & mask)


class Tables:
    """The lookup tables of one run, filled from ``routes`` as l3fwd fills them."""

    def __init__(self, lookup: str, portmask: int, v4, v6, *, ipv6_em: bool = False,
                 em_entries: int = 1 << 16):
        from ...net.hash.api import Hash
        from ...net.lpm.api import Lpm, Lpm6
        self.lookup = lookup
        small = lookup == "em"
        self.lpm4 = Lpm(8 if small else LPM_MAX_RULES, 1 if small else LPM_TBL8S)
        self.lpm6 = Lpm6(8 if small else LPM6_MAX_RULES, 1 if small else LPM6_TBL8S)
        em = lookup == "em"
        self.em4 = Hash(em_entries if em and not ipv6_em else 8, 16)
        self.em6 = Hash(em_entries if em and ipv6_em else 8, 48)
        if lookup in ("lpm", "fib"):
            for r in v4:
                if _port_enabled(portmask, r.port):
                    self._add(self.lpm4, r, 32)
            for r in v6:
                if _port_enabled(portmask, r.port):
                    self._add(self.lpm6, r, 128)
        elif not ipv6_em:                  # EM fills one table only (l3fwd_em.c)
            for r in v4:
                if _port_enabled(portmask, r.port):
                    self.em4.add(em4_key(r), data=r.port)
        else:
            for r in v6:
                if _port_enabled(portmask, r.port):
                    self.em6.add(em6_key(r), data=r.port)

    @staticmethod
    def _add(tbl, r, bits):
        if not 1 <= r.depth <= bits:
            raise Failure(f"Unable to add entry {r} to the l3fwd LPM table")
        ip = int.from_bytes(r.addr, "big")
        mask = ((1 << r.depth) - 1) << (bits - r.depth)
        try:
            tbl.add(ip & mask, r.depth, r.port)
        except PktbufError as e:
            raise Failure(f"Unable to add entry {r} to the l3fwd LPM table: {e}") from None


def em4_key(r: R.EmRule) -> bytes:
    """``union ipv4_5tuple_host`` of a rule: pad, proto, pad, src, dst, sport, dport."""
    return bytes((0, r.proto, 0, 0)) + r.src + r.dst + r.src_port.to_bytes(2, "big") + \
        r.dst_port.to_bytes(2, "big")


def em6_key(r: R.EmRule) -> bytes:
    """``union ipv6_5tuple_host``: pad, proto, pad, src, dst, sport, dport, 8 reserved."""
    return bytes((0, 0, r.proto, 0)) + r.src + r.dst + r.src_port.to_bytes(2, "big") + \
        r.dst_port.to_bytes(2, "big") + bytes(8)


def read_routes(o: O.Options):
    """(v4, v6) rules: both files, or (if either is missing) both built-in sets."""
    em = o.lookup == "em"
    if o.rule_ipv4 is not None and o.rule_ipv6 is not None:
        rd = R.read_em if em else R.read_lpm
        return rd(o.rule_ipv4, False), rd(o.rule_ipv6, True)
    d = R.default_em if em else R.default_lpm
    return d(False), d(True)


def make_state(tables: Tables, cfg: np.ndarray, eth: np.ndarray):
    """One lcore's stage state (see :mod:`pktbuf.apps.l3fwd.kernels`)."""
    return (cfg, tables.lpm4.block, tables.lpm6.block, tables.em4.block, tables.em6.block, eth,
            np.zeros((K.EM_GROUP, 64), np.uint8), np.zeros(4, np.int64), np.zeros(4, np.int64),
            np.zeros(K.EM_GROUP + 1, np.uint64))


def make_cfg(o: O.Options) -> np.ndarray:
    cfg = np.zeros(K.CFG_WORDS, np.int64)
    cfg[K.C_LOOKUP] = K.LOOKUPS.index(o.lookup)
    cfg[K.C_STRICT] = int(o.ttl_expiry)
    cfg[K.C_PORTMASK] = o.portmask & ((1 << 63) - 1)
    return cfg


def fill_eth(eth: np.ndarray, o: O.Options, ports) -> None:
    """``val_eth``: per port the destination MAC (``--eth-dest`` or 02:00:00:00:00:<port>) and
    the port's own MAC as the source."""
    for pid in range(eth.shape[0]):
        eth[pid, :6] = np.frombuffer(o.eth_dest.get(pid, bytes((2, 0, 0, 0, 0, pid))),
                                     np.uint8)
    for p in ports:
        eth[p.port_id, 6:12] = np.frombuffer(bytes(p.mac_addr), np.uint8)


def pcap_as_dpdk(dev: str) -> str:
    """A net_pcap device writes the capture header DPDK's net_pcap writes: snaplen 65535
    (pktbuf's own default is 262144), unless the device string sets ``snaplen``."""
    from ...ethdev.api import driver_of
    name = dev.split(",", 1)[0]
    try:
        drv = driver_of(name)
    except PktbufError:
        return dev
    if drv == "net_pcap" and "snaplen=" not in dev:
        return dev + ",snaplen=" + str(DPDK_PCAP_SNAPLEN)
    return dev


def _supports_ptypes(port) -> bool:
    """Whether a port classifies packets itself (``rte_eth_dev_get_supported_ptypes``): no
    pktbuf driver does yet; a driver that does would say so with ``supported_ptypes``."""
    return bool(getattr(port, "supported_ptypes", ()))


class Board:
    """One process's pools, ports, tables and stages (``nstates`` lcore states, each its own
    scratch over the same tables), set up in l3fwd's order: tables, the stage compiled or
    loaded before any port opens, then the ports (``vdevs``, port ids 0, 1, ... in order,
    each announced with ``say``), then the ``--parse-ptype`` check (:meth:`ptype_refusal`)."""

    def __init__(self, o: O.Options, v4, v6, nstates: int):
        import pktbuf
        self.o = o
        self.pools, self.ports = [], None
        self.pool = pktbuf.PktmbufPool(max(NB_MBUF, 2048 * len(o.vdevs)), 256)
        self.pools.append(self.pool)
        self.ports = pktbuf.Ports(self.pool)
        self.tables = Tables(o.lookup, o.portmask, v4, v6, ipv6_em=o.ipv6)
        self.cfg = make_cfg(o)
        self.eth = np.zeros((MAX_PORTS, 12), np.uint8)
        self.states = [make_state(self.tables, self.cfg, self.eth) for _ in range(nstates)]
        self.stages = [Stage(K.l3fwd_stage, st, counters=K.COUNTERS,
                             drop_reasons=K.DROP_REASONS) for st in self.states]

    def open(self, vdevs, say) -> None:
        import pktbuf
        self.kinds = kinds_of_devices(vdevs)       # the loop serves these port types only
        self.stages[0].check(self.ports, self.kinds)  # compiled or loaded before ports open
        for i, dev in enumerate(vdevs):
            pp = None
            if self.o.per_port_pool and i > 0:
                pp = pktbuf.PktmbufPool(NB_MBUF, 256, domain=self.pool.domain)
                self.pools.append(pp)
            p = self.ports.open(pcap_as_dpdk(dev), pool=pp)
            mac = ":".join(f"{b:02X}" for b in bytes(p.mac_addr))
            say(f"Initializing port {p.port_id} ... Address:{mac}")

    def ptype_refusal(self) -> int | None:
        """Without ``--parse-ptype``, the first config port that cannot classify packets."""
        ids = set(self.ports.ids())
        if not self.o.parse_ptype:
            for port, _, _ in self.o.config:
                if port in ids and not _supports_ptypes(self.ports[port]):
                    return port
        return None

    def close_ports(self, say=None) -> None:
        if self.ports is not None:
            for pid in sorted(self.ports.ids()):
                self.ports.close_port(pid)
                if say is not None:
                    say(f"Closing port {pid}... Done")

    def close_pools(self) -> None:
        for p in reversed(self.pools):
            try:
                p.close()
            except PktbufError:
                pass


def summary_lines(rows: dict, counters: dict, drops: dict) -> list[str]:
    """The end report: per port ``(rx, tx, tx-dropped, l3fwd-dropped)``, then the stage's
    counters and drops."""
    out = [f"port {pid}: rx {rx} tx {tx} tx-dropped {td} l3fwd-dropped {sd}"
           for pid, (rx, tx, td, sd) in rows.items()]
    out.append("l3fwd: " + " ".join(f"{k} {v}" for k, v in {**counters, **drops}.items()))
    return out


def cycles_text(cyc: int, pkts: int, hz: float) -> str:
    return f"L3FWD: busy cycles={cyc} packets={pkts} tsc_hz={int(hz)}"
