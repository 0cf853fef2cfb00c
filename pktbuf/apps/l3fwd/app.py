"""The run of ``pktbuf l3fwd``: options, tables, ports, the stage loop per lcore, the stop.

In l3fwd's order (``main.c``, ``main``): parse the command line; read the rule files (or take
the defaults); open the ports (``--vdev``, in order: port ids 0, 1, ...); refuse to go on
without ``--parse-ptype`` when a port cannot classify packets -- every pktbuf port type, as
net_pcap in DPDK (``port N cannot parse packet type, please add --parse-ptype``, status 1;
the Tx capture files exist by then, holding their header only, as DPDK's do); fill the tables,
skipping routes to ports outside ``-p``; then forward on every ``(port, queue, lcore)`` of
``--config``: one thread per lcore, each Rx queue polled by its lcore, Tx on queue ``i`` of
every port for the ``i``-th lcore.

The stage (:func:`pktbuf.apps.l3fwd.kernels.l3fwd_stage`) and its loop are compiled -- or
loaded from the cache -- before any port opens: a failure is reported then.

It stops on SIGINT or SIGTERM (exit status 0, every port closed, so every capture file is
complete), and -- unlike DPDK's l3fwd, which polls on -- once every Rx queue is at the end of
its input (a capture file without ``infinite_rx``), as ``pktbuf fwd`` does; ``--seconds`` of
:func:`run` bounds it too.  A port error stops it with status 1.
"""
from __future__ import annotations

import signal
import sys
import threading
import time

import numpy as np

from ...drivers.common.kinds import MAX_PORTS
from ...errors import PktbufError
from ...ethdev.api import kinds_of_devices
from ..stage.abi import F_RX, F_STAGE_DROP, R_ALL_EOF, R_PORT_ERROR
from ..stage.api import Stage, StageRunner
from . import kernels as K
from . import options as O
from . import routes as R

__all__ = ["main", "run", "make_state", "Tables", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE"]

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
            np.zeros(64, np.uint8), np.zeros(4, np.int64), np.zeros(4, np.int64))


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


def run(argv, *, out=None, seconds: float | None = None, stop: threading.Event | None = None,
        report: threading.Event | None = None):
    """Run ``pktbuf l3fwd`` with ``argv`` (the words after ``l3fwd``); returns the exit
    status.  ``stop``: an event that ends the run (the signal handlers set it); ``report``:
    with ``--record-core-cycles``, print the cycle line so far when it is set (SIGUSR1),
    then clear it."""
    import pktbuf
    out = out or sys.stdout
    err = sys.stderr

    def say(*a):
        print(*a, file=out, flush=True)

    try:
        o = O.parse(argv)
    except O.UsageError as e:
        print(f"pktbuf l3fwd: {e}", file=err)
        return EXIT_USAGE
    if not o.vdevs:
        print("pktbuf l3fwd: no ports: give --vdev DEV", file=err)
        return EXIT_USAGE
    if not o.lookup_given:
        print("Neither ACL, LPM, EM, or FIB selected, defaulting to LPM", file=err)
    if o.parse_ptype:
        say("soft parse-ptype is enabled")
    try:
        v4, v6 = read_routes(o)
    except R.RouteFileError as e:
        print(f"L3FWD: {e}", file=err)
        print("EAL: Error - exit with code: 1\n  Cause: Failed to add rules", file=err)
        return EXIT_FAILURE
    lcores = o.lcores()
    stop = stop or threading.Event()
    pools, ports, runners = [], None, []
    try:
        pool = pktbuf.PktmbufPool(max(NB_MBUF, 2048 * len(o.vdevs)), 256)
        pools.append(pool)
        ports = pktbuf.Ports(pool)
        tables = Tables(o.lookup, o.portmask, v4, v6, ipv6_em=o.ipv6)
        cfg = make_cfg(o)
        eth = np.zeros((MAX_PORTS, 12), np.uint8)
        states = [make_state(tables, cfg, eth) for _ in lcores]
        stages = [Stage(K.l3fwd_stage, st, counters=K.COUNTERS, drop_reasons=K.DROP_REASONS)
                  for st in states]
        kinds = kinds_of_devices(o.vdevs)   # the loop serves these port types only
        stages[0].check(ports, kinds)       # compiled or loaded before any port opens
        for i, dev in enumerate(o.vdevs):
            pp = None
            if o.per_port_pool and i > 0:
                pp = pktbuf.PktmbufPool(NB_MBUF, 256, domain=pool.domain)
                pools.append(pp)
            p = ports.open(pcap_as_dpdk(dev), pool=pp)
            mac = ":".join(f"{b:02X}" for b in bytes(p.mac_addr))
            say(f"Initializing port {p.port_id} ... Address:{mac}")
        ids = set(ports.ids())
        if not o.parse_ptype:
            for port, _, _ in o.config:
                if port in ids and not _supports_ptypes(ports[port]):
                    say(f"port {port} cannot parse packet type, please add --parse-ptype")
                    print("EAL: Error - exit with code: 1\n  Cause: ptype check fails",
                          file=err)
                    return EXIT_FAILURE
        for port, queue, _ in o.config:
            if port not in ids:
                raise Failure(f"port {port} is not present on the board")
            if queue >= ports[port].nb_rx_queues:
                raise Failure(f"Cannot configure device: port {port} has "
                              f"{ports[port].nb_rx_queues} Rx queue(s), --config uses "
                              f"queue {queue}")
        for pid in ids:
            if (o.portmask >> pid) & 1 and ports[pid].nb_tx_queues < len(lcores):
                raise Failure(f"Cannot configure device: port {pid} has "
                              f"{ports[pid].nb_tx_queues} Tx queue(s), {len(lcores)} lcores "
                              "need one each")
        fill_eth(eth, o, ports)
        for i, lc in enumerate(lcores):
            streams = [(p, q, p) for p, q, c in o.config if c == lc]
            runners.append(StageRunner(ports, stages[i], streams, lcore=i, txq=i, kinds=kinds,
                                       burst=o.burst, idle_backoff=o.idle_backoff,
                                       record_cycles=o.record_cycles))
        hz = None
        if o.record_cycles:
            from ..fwd.forwarder import tsc_hz
            hz = tsc_hz()                   # measured now: a report must not pause the loop

        def tick():
            if report is not None and report.is_set():
                report.clear()
                if hz is not None:
                    say(cycles_line(runners, hz))

        say("L3FWD: entering main loop")
        status = _forward(runners, stop, seconds, tick)
        _summary(say, runners, ports)
        if hz is not None:
            say(cycles_line(runners, hz))
        return status
    except Failure as e:
        print(f"EAL: Error - exit with code: 1\n  Cause: {e}", file=err)
        return EXIT_FAILURE
    except PktbufError as e:
        print(f"pktbuf l3fwd: {e}", file=err)
        return EXIT_FAILURE
    finally:
        if ports is not None:
            for pid in sorted(ports.ids()):
                ports.close_port(pid)
                say(f"Closing port {pid}... Done")
        for p in reversed(pools):
            try:
                p.close()
            except PktbufError:
                pass


def _forward(runners, stop, seconds, tick=lambda: None) -> int:
    deadline = None if seconds is None else time.monotonic() + seconds
    status = [EXIT_OK] * len(runners)

    def one(i, r):
        while not stop.is_set():
            rc = r.run(SLICE)
            if len(runners) == 1:
                tick()
            if rc == R_PORT_ERROR:
                status[i] = EXIT_FAILURE
                stop.set()
                return
            if rc == R_ALL_EOF:
                return
            if deadline is not None and time.monotonic() >= deadline:
                return

    if len(runners) == 1:
        one(0, runners[0])
    else:
        ts = [threading.Thread(target=one, args=(i, r), daemon=True)
              for i, r in enumerate(runners)]
        for t in ts:
            t.start()
        while any(t.is_alive() for t in ts):
            for t in ts:
                t.join(0.1)
            tick()
    return max(status)


def _summary(say, runners, ports):
    tot = np.zeros_like(runners[0].cnt)
    for r in runners:
        tot += r.cnt
    drops, counters = {}, {}
    for r in runners:
        for k, v in r.drop_counts().items():
            drops[k] = drops.get(k, 0) + v
        for k, v in r.counters().items():
            counters[k] = counters.get(k, 0) + v
    for pid in ports.ids():
        c = tot[pid]
        say(f"port {pid}: rx {int(c[0])} tx {int(c[1])} tx-dropped {int(c[2])} "
            f"l3fwd-dropped {int(c[F_STAGE_DROP])}")
    say("l3fwd: " + " ".join(f"{k} {v}" for k, v in {**counters, **drops}.items()))


def cycles_line(runners, hz: float) -> str:
    """``--record-core-cycles``' line -- the one the reference's ``cycles.patch`` prints
    (:mod:`pktbuf.bench.l3fwd_ref.build`): busy TSC cycles and the packets received in those
    iterations so far, over every lcore, and the TSC's rate."""
    cyc = sum(r.busy_cycles() for r in runners)
    pkts = sum(int(r.cnt[:, F_RX].sum()) for r in runners)
    return f"L3FWD: busy cycles={cyc} packets={pkts} tsc_hz={int(hz)}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stop = threading.Event()

    def on_signal(signum, frame):
        print(f"\n\nSignal {signum} received, preparing to exit...", flush=True)
        stop.set()

    report = threading.Event()
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    old[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lambda signum, frame: report.set())
    try:
        return run(argv, stop=stop, report=report)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
