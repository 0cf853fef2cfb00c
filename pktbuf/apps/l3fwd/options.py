"""The command line of ``pktbuf l3fwd``: DPDK's, unchanged.

``pktbuf l3fwd [EAL options] -- [l3fwd options]``, as ``dpdk-l3fwd`` takes them (DPDK 22.11
``examples/l3fwd/main.c``, ``parse_args`` and its helpers), so that a user's command line
works as it is:

* before ``--``: ``--vdev DEV`` (repeatable: the ports, in order), ``-l CORELIST`` /
  ``-c COREMASK`` (lcore N runs on CPU N, the control threads elsewhere, as EAL places them:
  :mod:`.placement`; the first of the two given counts) and EAL's other common options,
  accepted and ignored (``--lcores``, ``-n``, ``-m``, ``--no-huge``, ``--no-pci``,
  ``--file-prefix``, ...): pktbuf has no EAL;
* after ``--``: ``-p PORTMASK`` (hex, required), ``--config "(port,queue,lcore)[,...]"``,
  ``--lookup lpm|em|fib`` (or ``-L`` / ``-E``), ``--rule_ipv4 FILE``, ``--rule_ipv6 FILE``,
  ``--eth-dest X,MAC`` (repeatable), ``--parse-ptype``, ``-P``, ``--ipv6``,
  ``--max-pkt-len N``, ``--per-port-pool``, ``--no-numa``, ``--rx-queue-size N``,
  ``--tx-queue-size N``, ``--mode poll``; and pktbuf's own ``--ttl-expiry`` (drop expired
  TTLs, as a router must; DPDK's l3fwd does not), ``--burst N``, ``--record-core-cycles``
  (count the busy TSC cycles, as testpmd's option of that name, and print them at the end)
  and ``--no-idle-backoff`` (poll without backing off when idle, as DPDK's l3fwd polls).

Long options take ``--opt=value`` or ``--opt value``, and unique prefixes, as
``getopt_long`` does.  The values are read as DPDK reads them: the port mask with
``strtoul(.., 16)``, the ``--config`` fields with ``strtoul(.., 0)`` (a field must start with
a number; what follows it is ignored, as DPDK ignores it), the ``--eth-dest`` port in decimal
and the MAC as ``rte_ether_unformat_addr`` does (six groups of up to two hex digits, or three
of up to four, separated by ``:`` or ``-``; either case).

:func:`parse` returns :class:`Options` or raises :class:`UsageError`.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field

from ...errors import cli_number
from .placement import parse_corelist, parse_coremask

__all__ = ["Options", "UsageError", "parse", "parse_portmask", "parse_config",
           "parse_eth_dest", "parse_mac"]

MAX_ETHPORTS = 32           # RTE_MAX_ETHPORTS
MAX_QUEUES_PER_PORT = 1024  # RTE_MAX_QUEUES_PER_PORT
MAX_LCORE = 128             # RTE_MAX_LCORE
MAX_LCORE_PARAMS = 1024     # MAX_LCORE_PARAMS
MAX_RX_QUEUE_PER_PORT = 128

# l3fwd's --config when none is given (main.c, lcore_params_array_default)
DEFAULT_CONFIG = [(0, 0, 2), (0, 1, 2), (0, 2, 2), (1, 0, 2), (1, 1, 2), (1, 2, 2),
                  (2, 0, 2), (3, 0, 3), (3, 1, 3)]

EAL_WITH_ARG = {"-l", "-c", "-n", "-m", "-a", "-b", "--lcores", "--file-prefix",
                "--log-level", "--socket-mem", "--socket-limit", "--huge-dir", "--proc-type",
                "--iova-mode", "--allow", "--block", "--main-lcore", "--base-virtaddr",
                "--trace", "--trace-dir", "--mbuf-pool-ops-name", "--service-corelist",
                "-s", "-r"}
EAL_FLAGS = {"--no-huge", "--no-pci", "--no-shconf", "--no-telemetry", "--in-memory",
             "--no-hpet", "--legacy-mem", "--single-file-segments", "--match-allocations",
             "-v", "--huge-unlink", "--create-uio-dev", "--vmware-tsc-map", "--no-shconf"}


class UsageError(ValueError):
    """A command line l3fwd would refuse (``print_usage``)."""


@dataclass
class Options:
    vdevs: list = field(default_factory=list)
    portmask: int = 0
    config: list = field(default_factory=lambda: list(DEFAULT_CONFIG))
    lookup: str = "lpm"
    lookup_given: bool = False
    rule_ipv4: str | None = None
    rule_ipv6: str | None = None
    eth_dest: dict = field(default_factory=dict)
    parse_ptype: bool = False
    promiscuous: bool = False
    ipv6: bool = False
    max_pkt_len: int | None = None
    per_port_pool: bool = False
    ttl_expiry: bool = False
    burst: int = 32
    rx_queue_size: int | None = None
    tx_queue_size: int | None = None
    record_cycles: bool = False
    idle_backoff: bool = True
    cpus: list | None = None     # -l / -c: the enabled lcores, each on the CPU of its id

    def lcores(self) -> list[int]:
        return sorted({lc for _, _, lc in self.config})


def _strtoul_prefix(s: str, base: int = 0):
    """``strtoul(s, &end, base)``: (value, characters consumed); consumed 0 when no number
    starts ``s``."""
    i, n = 0, len(s)
    while i < n and s[i] in " \t\n\v\f\r":
        i += 1
    neg = False
    if i < n and s[i] in "+-":
        neg = s[i] == "-"
        i += 1
    b = base
    if (b in (0, 16)) and s[i:i + 2].lower() == "0x" and i + 2 < n and \
            s[i + 2].lower() in "0123456789abcdef":
        b, i = 16, i + 2
    elif b == 0:
        b = 8 if s[i:i + 1] == "0" else 10
    digits = "0123456789abcdef"[:b]
    j = i
    while j < n and s[j].lower() in digits:
        j += 1
    if j == i:
        return 0, 0
    v = int(s[i:j], b)
    if v >= 1 << 64:
        v = (1 << 64) - 1
    return ((-v) % (1 << 64) if neg else v), j


def parse_portmask(s: str) -> int:
    """``-p``: hex, all of it; 0 is refused (``Invalid portmask``)."""
    v, k = _strtoul_prefix(s, 16)
    if not s or k != len(s) or v == 0:
        raise UsageError(f"Invalid portmask: {s!r}")
    return v


def parse_config(s: str) -> list[tuple[int, int, int]]:
    """``--config``: every ``(port,queue,lcore)`` group in ``s``."""
    out = []
    pos = 0
    maxes = (MAX_ETHPORTS, MAX_QUEUES_PER_PORT, MAX_LCORE)
    while True:
        a = s.find("(", pos)
        if a < 0:
            break
        b = s.find(")", a + 1)
        if b < 0:
            raise UsageError(f"Invalid config: {s!r} (a group has no ')')")
        inner = s[a + 1:b]
        if len(inner) >= 256:
            raise UsageError("Invalid config: a group is too long")
        parts = inner.split(",", 2)
        if len(parts) != 3:
            raise UsageError(f"Invalid config: ({inner}) needs port,queue,lcore")
        vals = []
        for p, mx in zip(parts, maxes):
            v, k = _strtoul_prefix(p, 0)
            if k == 0 or v > mx:
                raise UsageError(f"Invalid config: ({inner})")
            vals.append(v)
        if len(out) >= MAX_LCORE_PARAMS:
            raise UsageError(f"exceeded max number of lcore params: {MAX_LCORE_PARAMS}")
        out.append(tuple(vals))
        pos = b + 1
    return out


_MAC6 = re.compile(r"^([0-9a-fA-F]{1,2})([:-])([0-9a-fA-F]{1,2})\2([0-9a-fA-F]{1,2})\2"
                   r"([0-9a-fA-F]{1,2})\2([0-9a-fA-F]{1,2})\2([0-9a-fA-F]{1,2})$")
_MAC3 = re.compile(r"^([0-9a-fA-F]{1,4})([:-])([0-9a-fA-F]{1,4})\2([0-9a-fA-F]{1,4})$")


def parse_mac(s: str) -> bytes:
    m = _MAC6.match(s)
    if m:
        return bytes(int(m.group(i), 16) for i in (1, 3, 4, 5, 6, 7))
    m = _MAC3.match(s)
    if m:
        return b"".join(int(m.group(i), 16).to_bytes(2, "big") for i in (1, 3, 4))
    raise UsageError(f"Invalid ethernet address: {s}")


def parse_eth_dest(s: str) -> tuple[int, bytes]:
    """``--eth-dest X,MAC``."""
    m = re.match(r"^\s*[+]?([0-9]+)", s)
    if not m or s[m.end():m.end() + 1] != ",":
        raise UsageError(f"Invalid eth-dest: {s}")
    port = int(m.group(1))
    if port >= MAX_ETHPORTS:
        raise UsageError(f"eth-dest: port {port} >= RTE_MAX_ETHPORTS({MAX_ETHPORTS})")
    return port, parse_mac(s[m.end() + 1:])


def _eal(args: list[str]) -> tuple[list[str], list[int] | None]:
    """The ports (``--vdev``) and the lcores of ``-l`` / ``-c`` (None when neither)."""
    vdevs, cpus = [], None
    i = 0
    while i < len(args):
        a = args[i]
        name, eq, val = a.partition("=")
        if name == "--vdev":
            if not eq:
                if i + 1 >= len(args):
                    raise UsageError("--vdev needs a device string")
                i += 1
                val = args[i]
            vdevs.append(val)
        elif name in EAL_WITH_ARG or (len(a) > 2 and a[:2] in EAL_WITH_ARG
                                      and not a.startswith("--")):
            if not eq and a in EAL_WITH_ARG:
                i += 1                             # -l 0 / --file-prefix x: skip the value
                val = args[i] if i < len(args) else ""
            elif not eq and not a.startswith("--"):
                name, val = a[:2], a[2:]           # -l1
            if name in ("-l", "-c") and cpus is None:
                try:
                    cpus = parse_corelist(val) if name == "-l" else parse_coremask(val)
                except ValueError as e:
                    raise UsageError(f"{name}: {e}") from None
        elif name in EAL_FLAGS:
            pass
        else:
            raise UsageError(f"unknown EAL option {a!r} (pktbuf l3fwd takes --vdev and "
                             "ignores EAL's common options)")
        i += 1
    return vdevs, cpus


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _l3fwd_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pktbuf l3fwd", add_help=False, allow_abbrev=True)
    p.add_argument("-p", dest="portmask")
    p.add_argument("-P", dest="promiscuous", action="store_true")
    p.add_argument("-E", dest="em", action="count", default=0)
    p.add_argument("-L", dest="lpm", action="count", default=0)
    p.add_argument("--config")
    p.add_argument("--rx-queue-size", type=cli_number(int, 1, 1 << 16))
    p.add_argument("--tx-queue-size", type=cli_number(int, 1, 1 << 16))
    p.add_argument("--eth-dest", action="append", default=[])
    p.add_argument("--no-numa", action="store_true")
    p.add_argument("--ipv6", action="store_true")
    p.add_argument("--max-pkt-len")
    p.add_argument("--hash-entry-num")
    p.add_argument("--parse-ptype", action="store_true")
    p.add_argument("--per-port-pool", action="store_true")
    p.add_argument("--mode")
    p.add_argument("--lookup", action="append", default=[])
    p.add_argument("--rule_ipv4")
    p.add_argument("--rule_ipv6")
    p.add_argument("--alg")
    p.add_argument("--ttl-expiry", action="store_true")
    p.add_argument("--burst", type=cli_number(int, 1, 512), default=32)
    p.add_argument("--record-core-cycles", dest="record_cycles", action="store_true")
    p.add_argument("--no-idle-backoff", dest="no_idle_backoff", action="store_true")
    return p


def parse(argv: list[str]) -> Options:
    """Parse ``[EAL options] -- [l3fwd options]``."""
    argv = list(argv)
    if "--" in argv:
        k = argv.index("--")
        eal, app = argv[:k], argv[k + 1:]
    else:
        eal, app = argv, []
    vdevs, cpus = _eal(eal)
    o = Options(vdevs=vdevs, cpus=cpus)
    ns, extra = _l3fwd_parser().parse_known_args(app)
    if extra:
        raise UsageError(f"unknown option(s): {' '.join(extra)}")
    if ns.portmask is None:
        raise UsageError("-p PORTMASK is required")
    o.portmask = parse_portmask(ns.portmask)
    if ns.config is not None:
        o.config = parse_config(ns.config)
        if not o.config:
            raise UsageError(f"Invalid config: {ns.config!r} names no (port,queue,lcore)")
    modes = ns.lookup + ["em"] * ns.em + ["lpm"] * ns.lpm
    if len(modes) > 1:
        raise UsageError("Only one lookup mode is allowed at a time!")
    if modes:
        m = modes[0].lower()
        if m == "acl":
            raise UsageError("--lookup acl is not supported by pktbuf l3fwd (lpm, em, fib)")
        if m not in ("lpm", "em", "fib"):
            raise UsageError(f"Invalid lookup option! Accepted options: acl, em, lpm, fib "
                             f"(got {modes[0]!r})")
        o.lookup, o.lookup_given = m, True
    if ns.alg is not None:
        raise UsageError("--alg selects an ACL algorithm: ACL is not supported by pktbuf "
                         "l3fwd")
    if ns.mode is not None and ns.mode != "poll":
        raise UsageError(f"--mode {ns.mode}: pktbuf l3fwd runs in poll mode only")
    for e in ns.eth_dest:
        port, mac = parse_eth_dest(e)
        o.eth_dest[port] = mac
    if ns.max_pkt_len is not None:
        v, k = _strtoul_prefix(ns.max_pkt_len, 10)
        if k == 0 or k != len(ns.max_pkt_len) or v == 0:
            raise UsageError(f"Invalid max-pkt-len: {ns.max_pkt_len!r}")
        o.max_pkt_len = v
    if not 1 <= ns.burst <= 512:
        raise UsageError("--burst must be in 1..512")
    o.rule_ipv4, o.rule_ipv6 = ns.rule_ipv4, ns.rule_ipv6
    o.parse_ptype, o.promiscuous, o.ipv6 = ns.parse_ptype, ns.promiscuous, ns.ipv6
    o.per_port_pool, o.ttl_expiry, o.burst = ns.per_port_pool, ns.ttl_expiry, ns.burst
    o.rx_queue_size, o.tx_queue_size = ns.rx_queue_size, ns.tx_queue_size
    o.record_cycles, o.idle_backoff = ns.record_cycles, not ns.no_idle_backoff
    for port, queue, lcore in o.config:
        if queue >= MAX_RX_QUEUE_PER_PORT:
            raise UsageError(f"invalid queue number: {queue}")
        if port >= MAX_ETHPORTS or not (o.portmask >> port) & 1:
            raise UsageError(f"port {port} is not enabled in port mask")
    return o
