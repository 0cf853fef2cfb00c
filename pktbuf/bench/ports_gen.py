"""The paced generator and sink of the AF_PACKET port benchmarks: one in-JIT loop, one process.

:func:`gen_loop` sends testpmd-``txonly`` frames (64-byte UDP, :func:`~pktbuf.apps.txonly.
txonly_alloc_burst`) on one AF_PACKET Tx queue in bursts spaced ``period_ns`` apart on the
monotonic clock -- a fixed offered rate of ``burst / period`` packets per second -- and, when
given a sink queue, receives and counts what arrives there between bursts.  After ``end_ns``
it stops sending and keeps receiving until the sink has everything that was sent or
``drain_ns`` has passed.  A burst the Tx ring does not take whole is counted (``C_DROP``) and
never retried: the offered rate is what the ring took (``C_SENT``) over the sending time.
When the loop falls more than 1 ms behind its schedule it restarts the schedule from now
rather than catching up in one long burst (``C_LATE`` counts that; the achieved rate is then
below the asked one, and the caller sees it in ``C_SENT``).

:class:`Generator` holds the ports (created in a network namespace: sockets stay there), the
pool and the buffers, and runs the loop with the calling thread pinned to one CPU.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import time

import numpy as np

from .._jit import kernel
from ..drivers.af_packet.rx import af_packet_rx_burst
from ..drivers.af_packet.tx import af_packet_tx_burst
from ..apps.txonly import txonly_alloc_burst, udp_headers
from ..atomics import cpu_pause
from ..idle import now_ns
from ..buf.mbuf.free import pktmbuf_free_bulk

C_SENT, C_DROP, C_RECV, C_NOMBUF, C_LATE, C_T0, C_T1, C_WORDS = 0, 1, 2, 3, 4, 5, 6, 8
LATE_NS = 1_000_000
BURST = 32
PKT_LEN = 64
DST_MAC = bytes([2, 0, 0, 0, 0, 1])      # nobody's address: the hosts' stacks drop it early


@kernel
def gen_loop(dom, pid, lcore, txq, rxq, sink, hdr, pkt_len, burst, period_ns, end_ns, drain_ns,
             cnt, tx, rx):
    """Send ``burst`` frames every ``period_ns`` (0: as fast as the ring takes them) on
    ``txq`` until ``end_ns``; with ``sink``, receive and free on ``rxq`` meanwhile and then
    until everything sent has arrived or ``drain_ns``.  Counts into ``cnt`` (``C_*``)."""
    t_next = now_ns()
    cnt[C_T0] = t_next
    while True:
        now = now_ns()
        if now < end_ns:
            if now >= t_next:
                if txonly_alloc_burst(dom, pid, lcore, tx, burst, hdr, pkt_len) != 0:
                    cnt[C_NOMBUF] += 1
                else:
                    k = af_packet_tx_burst(dom, txq, lcore, tx, burst)
                    cnt[C_SENT] += k
                    if k < burst:
                        pktmbuf_free_bulk(dom, lcore, tx[k:], burst - k)
                        cnt[C_DROP] += burst - k
                t_next += period_ns
                if now - t_next > LATE_NS:
                    if period_ns > 0:
                        cnt[C_LATE] += 1
                    t_next = now
        else:
            if cnt[C_T1] == 0:
                cnt[C_T1] = now
            if not sink or cnt[C_RECV] >= cnt[C_SENT] or now >= drain_ns:
                return
        if sink:
            r = af_packet_rx_burst(dom, rxq, lcore, rx, rx.size)
            if r > 0:
                pktmbuf_free_bulk(dom, lcore, rx, r)
                cnt[C_RECV] += r
            else:
                cpu_pause()
        else:
            cpu_pause()


class Generator:
    """Tx port on ``tx_iface`` (and a sink port on ``sink_iface``) opened inside the network
    namespace ``netns`` (a name under /run/netns), a pool, and :func:`gen_loop`."""

    def __init__(self, netns: str | None, tx_iface: str, sink_iface: str | None = None,
                 cpu: int = 0, burst: int = BURST):
        import pktbuf
        from ..drivers.af_packet.api import AfPacketPort
        self.cpu = cpu
        self.burst = burst
        self.pool = pktbuf.PktmbufPool(16384, 250, name="bench-gen")
        self.tx = self.sink = None
        try:
            with _in_netns(netns):
                self.tx = AfPacketPort(self.pool, tx_iface, name="gen-tx")
                if sink_iface:
                    self.sink = AfPacketPort(self.pool, sink_iface, name="gen-sink", port_id=1)
        except BaseException:
            self.close()
            raise
        self.hdr = udp_headers(PKT_LEN, bytes(self.tx.mac_addr), DST_MAC)
        self.cnt = np.zeros(C_WORDS, np.int64)
        self.txbuf = np.empty(burst, np.int32)
        self.rxbuf = np.empty(256, np.int32)

    def run(self, rate_pps: float, seconds: float, drain: float = 0.3) -> dict:
        """Offer ``rate_pps`` (0: as fast as possible) for ``seconds``; returns the counts, the
        achieved offered rate and, with a sink, what arrived and how much the sink's own ring
        dropped."""
        period = int(round(self.burst * 1e9 / rate_pps)) if rate_pps > 0 else 0
        self.cnt[:] = 0
        missed0 = self.sink.stats()["imissed"] if self.sink is not None else 0
        rxq = (self.sink or self.tx).rx_queue(0)
        old = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, {self.cpu})
            t = time.monotonic_ns()
            gen_loop(self.pool.domain.state, self.pool.id, 0, self.tx.tx_queue(0), rxq,
                     self.sink is not None, self.hdr, PKT_LEN, self.burst, period,
                     t + int(seconds * 1e9), t + int((seconds + drain) * 1e9), self.cnt,
                     self.txbuf, self.rxbuf)
        finally:
            os.sched_setaffinity(0, old)
        c = self.cnt
        dt = max(1, int(c[C_T1]) - int(c[C_T0])) / 1e9
        out = {"asked_pps": float(rate_pps), "sent": int(c[C_SENT]), "tx_ring_full": int(c[C_DROP]),
               "nombuf_bursts": int(c[C_NOMBUF]), "late": int(c[C_LATE]), "seconds": dt,
               "offered_pps": int(c[C_SENT]) / dt}
        if self.sink is not None:
            out["received"] = int(c[C_RECV])
            out["sink_missed"] = int(self.sink.stats()["imissed"] - missed0)
        return out

    def close(self) -> None:
        for p in (self.sink, self.tx):
            if p is not None:
                p.close()
        self.sink = self.tx = None
        if self.pool is not None:
            self.pool.close(force=True)
            self.pool = None


class _in_netns:
    """This thread inside the named network namespace for the body (None: stay)."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        if self.name is None:
            return self
        self.back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            _setns(fd)
        finally:
            os.close(fd)
        return self

    def __exit__(self, *exc):
        if self.name is None:
            return
        try:
            _setns(self.back)
        finally:
            os.close(self.back)


def _setns(fd: int) -> None:
    if _libc().setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


class Netns:
    """A fresh network namespace (``ip netns add``) with veth pairs, removed on exit.

    ::

        with Netns() as ns:
            ns.veth("g0", "f0")        # both ends up, in the namespace, IPv6 off

    Needs root (``ip netns``; AF_PACKET sockets need CAP_NET_RAW).
    """

    def __init__(self):
        self.name = f"pktbuf-bench-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
        self.made = False

    def __enter__(self) -> "Netns":
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True)
        self.made = True
        for k in ("all", "default"):
            self.run("sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1")
        self.run("ip", "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc) -> None:
        if self.made:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
            self.made = False

    def exec_argv(self, argv) -> list:
        return ["ip", "netns", "exec", self.name] + list(argv)

    def run(self, *argv) -> None:
        r = subprocess.run(self.exec_argv(argv), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {self.name}: {r.stderr.strip()}")

    def veth(self, a: str, b: str, queues: int | None = None) -> None:
        """``queues``: Rx/Tx queues of each end (AF_XDP binds one queue: with one, every
        frame arrives on it)."""
        nq = [] if queues is None else ["numtxqueues", str(queues), "numrxqueues", str(queues)]
        self.run("ip", "link", "add", a, *nq, "type", "veth", "peer", "name", b, *nq)
        for x in (a, b):
            self.run("ip", "link", "set", x, "up")


def need_root() -> str | None:
    """Why the AF_PACKET benchmarks cannot run here, or None."""
    import shutil
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, AF_PACKET sockets)"
    for tool in ("ip", "taskset", "timeout"):
        if shutil.which(tool) is None:
            return f"needs {tool!r} (iproute2 / util-linux / coreutils)"
    if (os.cpu_count() or 1) < 2:
        return "needs 2 CPUs (generator on CPU 0, forwarder on CPU 1)"
    return None


CLONE_NEWNET = 0x40000000


def warm() -> None:
    """Compile (or load) :func:`gen_loop` without any port (a zero-length run)."""
    import pktbuf
    from ..drivers.af_packet.layout import AF_PACKET_RXQ, AF_PACKET_TXQ
    pool = pktbuf.PktmbufPool(64, 0, name="bench-gen-warm")
    try:
        rxq, txq = AF_PACKET_RXQ.create({"scr_mb": 64}), AF_PACKET_TXQ.create()
        cnt = np.zeros(C_WORDS, np.int64)
        gen_loop(pool.domain.state, pool.id, 0, txq, rxq, False,
                 udp_headers(PKT_LEN, bytes(6), DST_MAC), PKT_LEN, BURST, 0, 0, 0, cnt,
                 np.empty(BURST, np.int32), np.empty(256, np.int32))
    finally:
        pool.close(force=True)
