"""The ``/ethdev/*`` commands: DPDK 22.11's replies (``eth_dev_handle_port_*`` in
``lib/ethdev/rte_ethdev.c``) built from pktbuf port objects.

A port is any object with these members (read at request time, from the telemetry thread):

``port_id`` (int), ``name`` (str), ``driver`` (str),
``stats()``  -> dict with ``rte_eth_stats``' names: ``ipackets, opackets, ibytes, obytes,
             imissed, ierrors, oerrors, rx_nombuf`` (ints) and ``q_ipackets, q_opackets,
             q_ibytes, q_obytes, q_errors`` (one int per queue),
``xstats()`` -> dict name -> int, in the driver's order,
``link()``   -> ``{"status": "UP"|"DOWN", "speed": Mbps, "duplex": "full-duplex"|...}``,
``info()``   -> dict of the ``/ethdev/info`` fields the port knows.

Missing counters read 0 and missing ``/ethdev/info`` fields take the defaults below, so every
reply has exactly DPDK's keys in DPDK's order.
"""
from __future__ import annotations

import operator
import re

from .encode import INT_MIN, U64_MAX, Unencodable

PORT_ID_MAX = 0xFFFF                    # port ids are uint16_t
QUEUE_STAT_CNTRS = 16                   # RTE_ETHDEV_QUEUE_STAT_CNTRS in Debian's build
STATS = ("ipackets", "opackets", "ibytes", "obytes", "imissed", "ierrors", "oerrors",
         "rx_nombuf")
QUEUE_STATS = ("q_ipackets", "q_opackets", "q_ibytes", "q_obytes", "q_errors")

HELP = {
    "/ethdev/list": "Returns list of available ethdev ports. Takes no parameters",
    "/ethdev/stats": "Returns the common stats for a port. Parameters: int port_id",
    "/ethdev/xstats": "Returns the extended stats for a port. Parameters: int port_id",
    "/ethdev/link_status": "Returns the link status for a port. Parameters: int port_id",
    "/ethdev/info": "Returns the device info for a port. Parameters: int port_id",
}

_I32, _U64, _STR, _ARR = "i32", "u64", "str", "arr"
# /ethdev/info: DPDK's keys in order, their C type, and pktbuf's default when the port does
# not say (a configured, started port with one queue each way: DPDK's values for that case)
INFO = (
    ("name", _STR, None),               # default: port.name
    ("state", _I32, 1),                 # RTE_ETH_DEV_ATTACHED
    ("nb_rx_queues", _I32, 1),
    ("nb_tx_queues", _I32, 1),
    ("port_id", _I32, None),            # always port.port_id
    ("mtu", _I32, 1500),                # RTE_ETHER_MTU
    ("rx_mbuf_size_min", _U64, 0),      # 0 until an RX queue is set up
    ("mac_addr", _STR, "00:00:00:00:00:00"),
    ("promiscuous", _I32, 0),
    ("scattered_rx", _I32, 0),
    ("all_multicast", _I32, 0),
    ("dev_started", _I32, 1),
    ("lro", _I32, 0),
    ("dev_configured", _I32, 1),
    ("rxq_state", _ARR, None),          # default: dev_started for each queue
    ("txq_state", _ARR, None),
    ("numa_node", _I32, -1),            # SOCKET_ID_ANY: unknown
    ("dev_flags", _U64, 0),
    ("rx_offloads", _U64, 0),
    ("tx_offloads", _U64, 0),
    ("ethdev_rss_hf", _U64, 0),
)
INFO_KEYS = tuple(k for k, _, _ in INFO)

_STRTOUL = re.compile(r"0[xX]([0-9a-fA-F]+)|0([0-7]*)|([1-9][0-9]*)")


def port_from_params(params: str, *, base0: bool = True) -> int | None:
    """The port id in a request's params, or None (DPDK replies null).

    DPDK wants params starting with a digit; ``/ethdev/stats`` reads them with ``atoi``
    (decimal), the other commands with ``strtoul(.., 0)`` (``0x`` hex, leading-0 octal);
    trailing text is ignored.  An id beyond uint16 is None here (DPDK truncates it to 16 bits
    and would answer for another port)."""
    if not params or params[0] not in "0123456789":
        return None
    if base0:
        m = _STRTOUL.match(params)
        if m.group(1):
            v = int(m.group(1), 16)
        elif m.group(3):
            v = int(m.group(3))
        else:
            v = int(m.group(2) or "0", 8)
    else:
        v = int(re.match(r"[0-9]+", params).group(0))
    return v if v <= PORT_ID_MAX else None


def _int(v, kind: str, what: str) -> int:
    if isinstance(v, (float, str, bytes)) or v is None:
        raise Unencodable(f"{what} must be an integer, got {type(v).__name__}")
    try:
        i = operator.index(v)
    except TypeError:
        raise Unencodable(f"{what} must be an integer, got {type(v).__name__}") from None
    lo, hi = (INT_MIN, (1 << 31) - 1) if kind == _I32 else (0, U64_MAX)
    if not lo <= i <= hi:
        raise Unencodable(f"{what} = {i} does not fit DPDK's {kind}")
    return i


def stats(port) -> dict:
    """``/ethdev/stats``: the eight counters, then five arrays of exactly 16 queue counters."""
    s = port.stats()
    out = {k: _int(s.get(k, 0), _U64, k) for k in STATS}
    for k in QUEUE_STATS:
        q = [_int(v, _U64, k) for v in list(s.get(k, ()))[:QUEUE_STAT_CNTRS]]
        out[k] = q + [0] * (QUEUE_STAT_CNTRS - len(q))
    return out


def xstats(port) -> dict:
    """``/ethdev/xstats``: name -> u64 in the port's order (names DPDK refuses are dropped by
    the encoder, as DPDK drops them)."""
    return {str(k): _int(v, _U64, str(k)) for k, v in port.xstats().items()}


def link_status(port) -> dict:
    """``/ethdev/link_status``: ``{"status":"DOWN"}``, or UP with speed and duplex."""
    link = port.link()
    if str(link.get("status", "DOWN")).upper() != "UP":
        return {"status": "DOWN"}
    full = link.get("duplex", "full-duplex") == "full-duplex"
    return {"status": "UP", "speed": _int(link.get("speed", 0), _U64, "speed"),
            "duplex": "full-duplex" if full else "half-duplex"}


def format_mac(mac) -> str:
    """``RTE_ETHER_ADDR_PRT_FMT``: six upper-case hex pairs joined by colons."""
    if isinstance(mac, (bytes, bytearray)) and len(mac) == 6:
        return ":".join(f"{b:02X}" for b in mac)
    if isinstance(mac, str):
        parts = re.split(r"[:-]", mac)
        if len(parts) == 6 and all(re.fullmatch(r"[0-9A-Fa-f]{1,2}", p) for p in parts):
            return ":".join(f"{int(p, 16):02X}" for p in parts)
    raise Unencodable(f"mac_addr {mac!r} is not a MAC address")


def info(port) -> dict:
    """``/ethdev/info``: exactly DPDK 22.11's keys, in its order.  Fields the port's
    ``info()`` gives win over the defaults; fields DPDK does not have are not shown."""
    given = dict(port.info())
    out = {}
    for key, kind, default in INFO:
        if key == "port_id":
            out[key] = _int(port.port_id, _I32, key)
        elif key == "name":
            out[key] = str(given.get("name", port.name))
        elif key == "mac_addr":
            out[key] = format_mac(given.get(key, default))
        elif kind == _ARR:
            nq = out["nb_rx_queues" if key == "rxq_state" else "nb_tx_queues"]
            v = given.get(key)
            if v is None:
                v = [1 if out["dev_started"] else 0] * max(nq, 0)
            out[key] = [_int(x, _I32, key) for x in v]
        else:
            out[key] = _int(given.get(key, default), kind, key)
    return out
