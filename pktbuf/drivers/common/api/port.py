"""What every port object offers, whatever its driver (the facade side of the port model).

A port type has kernels ``<type>_rx_burst(dom, q, lcore, out, n)`` /
``<type>_tx_burst(dom, q, lcore, pkts, n)`` over its queue blocks, and a facade class with
the members of :class:`Port`: ``driver``, ``name``, ``port_id``, queue counts and blocks,
``mac_addr``, ``mtu``, ``stats()`` / ``xstats()`` with DPDK's names, ``link()``, ``info()``,
``close()``.  :class:`Port` supplies what can be derived: the xstats from the basic counters,
``info()``, the Python bursts, the context manager.  Helpers here check device arguments.

**Failures.**  Every port says what went wrong in two members an application asks after a
run (or whenever its loop sees a burst return 0): ``error()`` -- the error that stopped a
queue for good, as an exception (``direction`` "rx"/"tx", ``queue``; None while every queue
is sound) -- and ``warnings()`` -- what was lost without stopping (frames skipped, cut,
dropped in error), one dict per non-zero counter (``xstat``, ``count``, ``what``).
:func:`port_error` and :func:`port_warnings` ask any port object, one that lacks them too.
"""
from __future__ import annotations

import numpy as np

from ...._jit import kernel
from ....errors import (E_ALREADY, E_BADF, E_FAULT, E_NOMEM, DoubleFree, InvalidArgument,
                        InvalidHandle, SanityCheckError, check_count)
from ....lcore import LCORE_ANY, MAX_LCORE, facade_lcore
from ....buf.mbuf.check import (CHECK_REASONS, CHK_BAD_HANDLE, CHK_NULL, CHK_POOL, CHK_STATE,
                                mbuf_check, pktmbuf_free_check)

__all__ = ["Port", "BASIC_STATS", "check_devargs", "arg_int", "arg_bool", "mac_str",
           "stats_from_queues", "port_error", "port_warnings", "counter_warnings"]

# rte_eth_stats, in its field order
BASIC_STATS = ("ipackets", "opackets", "ibytes", "obytes", "imissed", "ierrors", "oerrors",
               "rx_nombuf")
QUEUE_STATS = ("q_ipackets", "q_opackets", "q_ibytes", "q_obytes", "q_errors")
MAX_BURST = 1 << 16


@kernel
def tx_check(dom, pk, n, scratch):
    """Whether ``pk[:n]`` may be handed to a Tx burst: ``(0, 0, 0)``; ``(1, CHK_* reason,
    index)`` for a packet that fails ``mbuf_check``; ``(2, E_* code, 0)`` when freeing them
    all would be illegal (listed twice, more often than referenced)."""
    for i in range(n):
        rc = mbuf_check(dom, pk[i], True)
        if rc != 0:
            return 1, np.int64(rc), np.int64(i)
    rc = pktmbuf_free_check(dom, pk, n, scratch)
    if rc != 0:
        return 2, np.int64(rc), np.int64(0)
    return 0, np.int64(0), np.int64(0)


def raise_tx_check(kind: int, val: int, idx: int, a: np.ndarray) -> None:
    """Raise what a ``(kind, val, idx)`` result of :func:`tx_check` (or of a facade's
    check-then-send entry point built the same way) means; nothing for ``kind == 0``."""
    if kind == 1:
        why = CHECK_REASONS.get(int(val), f"check {val}")
        if val in (CHK_NULL, CHK_BAD_HANDLE, CHK_POOL):
            raise InvalidHandle(f"mbufs[{idx}] = {int(a[idx])}: {why}")
        if val == CHK_STATE:
            raise DoubleFree(f"mbufs[{idx}] = {int(a[idx])}: {why}")
        raise SanityCheckError(f"mbufs[{idx}] = {int(a[idx])}: {why}")
    if kind == 2:
        if val == E_ALREADY:
            raise DoubleFree("mbufs lists a packet (or segment) more often than it is referenced")
        if val == E_BADF:
            raise InvalidHandle("mbufs holds a handle that is not a live mbuf")
        if val == E_FAULT:
            raise SanityCheckError("mbufs holds a corrupt packet")
        raise InvalidArgument(f"mbufs cannot be sent ({val})")


def check_tx_packets(domain, mbufs) -> np.ndarray:
    """The handles of a Python Tx burst as a fresh int32 array, each checked to be a live,
    sane packet of ``domain`` held by the caller and listed once; raises ``InvalidHandle``,
    ``DoubleFree`` or ``SanityCheckError`` otherwise (then nothing is sent)."""
    a = np.array(domain.handles(mbufs, "mbufs"), np.int32)   # our own copy: the caller's
    scratch = np.empty(max(64, 4 * a.size), np.int32)         # array stays untouched
    while True:
        kind, val, idx = tx_check(domain.state, a, a.size, scratch)
        if not (kind == 2 and val == E_NOMEM):
            break
        scratch = np.empty(2 * scratch.size, np.int32)
    raise_tx_check(kind, val, idx, a)
    return a


def check_devargs(driver: str, args, accepted) -> None:
    """Refuse unknown keys, naming them and the accepted ones."""
    bad = [k for k in args if k not in accepted]
    if bad:
        raise InvalidArgument(f"{driver}: unknown argument{'s' if len(bad) > 1 else ''} "
                              f"{', '.join(map(repr, bad))}; accepted: {', '.join(accepted)}")


def arg_int(driver: str, args, key: str, default: int, lo: int, hi: int) -> int:
    """An integer argument (decimal or 0x hex) in ``[lo, hi]``."""
    v = args.get(key)
    if v is None:
        return default
    try:
        n = int(v, 0)
    except ValueError:
        raise InvalidArgument(f"{driver}: {key}={v!r} is not an integer") from None
    if not lo <= n <= hi:
        raise InvalidArgument(f"{driver}: {key}={n} is out of range {lo}..{hi}")
    return n


def int_arg(driver: str, key: str, v, lo: int, hi: int) -> int:
    """A plain int argument ``key`` of ``driver`` (a keyword, not a device string) in lo..hi."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidArgument(f"{driver}: {key} must be an int, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise InvalidArgument(f"{driver}: {key}={v} is out of range {lo}..{hi}")
    return int(v)


def arg_bool(driver: str, args, key: str, default: bool) -> bool:
    """``yes``/``no``, ``1``/``0``, ``true``/``false`` (DPDK drivers accept several)."""
    v = args.get(key)
    if v is None:
        return default
    t = v.lower()
    if t in ("1", "yes", "y", "true", "on"):
        return True
    if t in ("0", "no", "n", "false", "off"):
        return False
    raise InvalidArgument(f"{driver}: {key}={v!r} is not yes/no or 1/0")


def mac_str(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)


def stats_from_queues(rx: list[dict], tx: list[dict]) -> dict:
    """rte_eth_stats from per-queue counters (dicts with ``packets``, ``bytes``, ``errors``,
    and for Rx ``missed``, ``nombuf``)."""
    s = {
        "ipackets": sum(q["packets"] for q in rx), "opackets": sum(q["packets"] for q in tx),
        "ibytes": sum(q["bytes"] for q in rx), "obytes": sum(q["bytes"] for q in tx),
        "imissed": sum(q.get("missed", 0) for q in rx),
        "ierrors": sum(q.get("errors", 0) for q in rx),
        "oerrors": sum(q.get("errors", 0) for q in tx),
        "rx_nombuf": sum(q.get("nombuf", 0) for q in rx),
        "q_ipackets": [q["packets"] for q in rx], "q_opackets": [q["packets"] for q in tx],
        "q_ibytes": [q["bytes"] for q in rx], "q_obytes": [q["bytes"] for q in tx],
        "q_errors": [q.get("errors", 0) for q in rx],
    }
    return s


def counter_warnings(s: dict) -> list[dict]:
    """The generic warnings of a port's ``stats()``: frames received or sent in error."""
    out = []
    if s.get("ierrors", 0):
        out.append({"xstat": "rx_errors", "count": int(s["ierrors"]),
                    "what": "frames the port received in error and dropped"})
    if s.get("oerrors", 0):
        out.append({"xstat": "tx_errors", "count": int(s["oerrors"]),
                    "what": "frames the port could not send (dropped)"})
    return out


def port_error(port):
    """``port.error()`` (None for a port object without it)."""
    f = getattr(port, "error", None)
    return f() if callable(f) else None


def port_warnings(port) -> list[dict]:
    """``port.warnings()``, or for a port object without it the generic ones of its
    ``stats()``."""
    f = getattr(port, "warnings", None)
    if callable(f):
        return list(f())
    return counter_warnings(port.stats())


class Port:
    """Base of the port classes.  A subclass sets ``driver``, ``name``, ``port_id``,
    ``pool``, and implements ``rx_queue(i)``, ``tx_queue(i)``, ``nb_rx_queues``,
    ``nb_tx_queues``, ``_queue_counters()`` (-> ``(rx, tx)`` lists of dicts, see
    :func:`stats_from_queues`), ``_reset_counters()``, ``_close()``."""

    driver = "net_null"
    kind = 0
    mtu = 1500
    mac_addr = b"\x02\x00\x00\x00\x00\x00"
    _rx_kernel = None
    _tx_kernel = None

    def __init__(self, name: str, port_id: int, pool):
        self.name = name
        self.port_id = check_count(port_id, "port_id", lo=0, hi=0xFFFE)
        self.pool = pool
        self.closed = False
        self._base = None

    # -- counters --------------------------------------------------------------------------
    def stats(self) -> dict:
        """``rte_eth_stats``: totals (since open or the last :meth:`stats_reset`) and the
        per-queue ``q_*`` lists."""
        rx, tx = self._queue_counters()
        s = stats_from_queues(rx, tx)
        if self._base is not None:
            for k in BASIC_STATS:
                s[k] -= self._base[k]
            for k in QUEUE_STATS:
                s[k] = [a - b for a, b in zip(s[k], self._base[k])]
        return s

    def stats_reset(self) -> None:
        """Zero the counters (kept as an offset: the kernels' counters only grow)."""
        self._base = None
        self._base = self.stats()

    def xstats(self) -> dict:
        """Extended statistics under DPDK's generic names (``rx_good_packets``, ...,
        ``rx_q0_packets``, ...)."""
        s = self.stats()
        x = {"rx_good_packets": s["ipackets"], "tx_good_packets": s["opackets"],
             "rx_good_bytes": s["ibytes"], "tx_good_bytes": s["obytes"],
             "rx_missed_errors": s["imissed"], "rx_errors": s["ierrors"],
             "tx_errors": s["oerrors"], "rx_mbuf_allocation_errors": s["rx_nombuf"]}
        for i, (p, b, e) in enumerate(zip(s["q_ipackets"], s["q_ibytes"], s["q_errors"])):
            x[f"rx_q{i}_packets"] = p
            x[f"rx_q{i}_bytes"] = b
            x[f"rx_q{i}_errors"] = e
        for i, (p, b) in enumerate(zip(s["q_opackets"], s["q_obytes"])):
            x[f"tx_q{i}_packets"] = p
            x[f"tx_q{i}_bytes"] = b
        return x

    def error(self):
        """The error that stopped one of the port's queues for good, as an exception with
        ``direction`` and ``queue`` (None: every queue is sound).  A driver whose queues can
        fail for good overrides it; live interfaces report trouble in their counters."""
        return None

    def warnings(self) -> list[dict]:
        """What was lost without stopping the port: ``[{"xstat", "count", "what"}]`` for each
        non-zero loss counter (here: ``rx_errors``, ``tx_errors``)."""
        return counter_warnings(self.stats())

    def link(self) -> dict:
        """``/ethdev/link_status``: ``status`` UP/DOWN, ``speed`` (Mb/s), ``duplex``."""
        return {"status": "DOWN" if self.closed else "UP", "speed": 10000,
                "duplex": "full-duplex"}

    def info(self) -> dict:
        """What ``/ethdev/info`` reports about the port."""
        return {"name": self.name, "driver_name": self.driver, "port_id": self.port_id,
                "mtu": self.mtu, "mac_addr": mac_str(self.mac_addr),
                "nb_rx_queues": self.nb_rx_queues, "nb_tx_queues": self.nb_tx_queues}

    # -- Python bursts ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise InvalidArgument(f"port {self.name} is closed")

    @staticmethod
    def _lcore(lcore) -> int:
        if lcore is None:
            return facade_lcore()
        return check_count(lcore, "lcore", lo=LCORE_ANY, hi=MAX_LCORE - 1)

    def rx_burst(self, n: int = 32, queue: int = 0, *, lcore=None) -> np.ndarray:
        """Receive up to ``n`` packets from Rx queue ``queue``; their handles (yours)."""
        self._check_open()
        n = check_count(n, "n", lo=0, hi=MAX_BURST)
        q = self.rx_queue(queue)
        out = np.empty(n, np.int32)
        k = type(self)._rx_kernel(self.pool.domain.state, q, self._lcore(lcore), out, n)
        return out[:k]

    def tx_burst(self, mbufs, queue: int = 0, *, lcore=None) -> int:
        """Send packets (mbuf handles, each a live packet held by you); returns how many
        were taken from the front (the port's now; the rest are still yours)."""
        self._check_open()
        q = self.tx_queue(queue)
        a = check_tx_packets(self.pool.domain, mbufs)
        return int(type(self)._tx_kernel(self.pool.domain.state, q, self._lcore(lcore),
                                         a, a.size))

    # -- life cycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Release the port (idempotent).  Stop every loop that uses it first."""
        if self.closed:
            return
        self.closed = True
        self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (f"<pktbuf {self.driver} port {self.port_id} {self.name!r}"
                f"{' closed' if self.closed else ''}>")
