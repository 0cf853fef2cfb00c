"""The generator and sink of ``pktbuf bench l3fwd``: l3fwd's frames, paced, over memif or
AF_PACKET, in this process.

:func:`l3fwd_headers` builds the 64-byte UDP frame both forwarders route: from 198.18.1.1 to
198.18.1.0, UDP 9 -> 9.  It hits l3fwd's default LPM route 198.18.1.0/24 -> port 1 and its
default exact-match flow ``R198.18.1.0 198.18.1.1 9 9 0x11 1`` (DPDK 22.11
``examples/l3fwd/lpm_default_v4.cfg`` / ``em_default_v4.cfg``), so in every mode each packet
the generator sends into the forwarder's port 0 leaves by its port 1, where the sink counts it.

:class:`MemifGenerator` is the memif client of both forwarder ports (the forwarder is the
server), with :func:`memif_gen_loop`: the pacing of :func:`.ports_gen.gen_loop` (a burst every
``period_ns`` on the monotonic clock; a schedule more than 1 ms late restarts from now) over
memif.  Over memif the generator's Tx ring *is* the forwarder's Rx ring, so a burst the ring
does not take whole is the forwarder's loss: ``sent`` counts every packet offered (taken or
not), ``taken`` what the ring took, and loss = ``sent - received``.  The clients' control
threads run on the generator's CPU too, off the forwarder's.  Over AF_XDP the generator
is :class:`.ports_gen.Generator` (AF_PACKET on the veth peers) with these headers.
"""
from __future__ import annotations

import os
import struct
import time

import numpy as np

from .._jit import kernel
from ..apps.txonly import txonly_alloc_burst
from ..atomics import cpu_pause
from ..buf.mbuf.free import pktmbuf_free_bulk
from ..drivers.memif.datapath import memif_rx_burst, memif_tx_burst
from ..idle import now_ns

C_SENT, C_TAKEN, C_RECV, C_NOMBUF, C_LATE, C_T0, C_T1, C_WORDS = 0, 1, 2, 3, 4, 5, 6, 8
LATE_NS = 1_000_000
BURST = 32
PKT_LEN = 64
SRC_IP, DST_IP = bytes([198, 18, 1, 1]), bytes([198, 18, 1, 0])
UDP_PORT = 9
GEN_MAC = bytes([2, 0, 0, 0, 0, 0x10])


def _csum(b: bytes) -> int:
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def l3fwd_headers(pkt_len: int = PKT_LEN, src_mac: bytes = GEN_MAC,
                  dst_mac: bytes = bytes([2, 0, 0, 0, 0, 0]), src_ip: bytes = SRC_IP,
                  dst_ip: bytes = DST_IP, sport: int = UDP_PORT,
                  dport: int = UDP_PORT) -> np.ndarray:
    """The 42 header bytes (Ethernet, IPv4, UDP) of a ``pkt_len``-byte frame; by default the
    one both forwarders route to port 1, for :func:`~pktbuf.apps.txonly.txonly_alloc_burst`."""
    ip_len = pkt_len - 14
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0, 64, 17, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", sport, dport, ip_len - 20, 0)
    return np.frombuffer(bytes(dst_mac) + bytes(src_mac) + b"\x08\x00" + ip + udp,
                         np.uint8).copy()


@kernel
def memif_gen_loop(dom, pid, lcore, txq, rxq, hdr, pkt_len, burst, period_ns, end_ns, drain_ns,
                   cnt, tx, rx):
    """Offer ``burst`` frames every ``period_ns`` (0: as fast as possible) on memif ``txq``
    until ``end_ns``, receive and free on ``rxq`` meanwhile, then until everything offered
    has arrived or ``drain_ns``.  Counts into ``cnt`` (``C_*``)."""
    t_next = now_ns()
    cnt[C_T0] = t_next
    while True:
        now = now_ns()
        if now < end_ns:
            if now >= t_next:
                if txonly_alloc_burst(dom, pid, lcore, tx, burst, hdr, pkt_len) != 0:
                    cnt[C_NOMBUF] += 1
                else:
                    k = memif_tx_burst(dom, txq, lcore, tx, burst)
                    cnt[C_SENT] += burst
                    cnt[C_TAKEN] += k
                    if k < burst:
                        pktmbuf_free_bulk(dom, lcore, tx[k:], burst - k)
                t_next += period_ns
                if now - t_next > LATE_NS:
                    if period_ns > 0:
                        cnt[C_LATE] += 1
                    t_next = now
        else:
            if cnt[C_T1] == 0:
                cnt[C_T1] = now
            if cnt[C_RECV] >= cnt[C_TAKEN] or now >= drain_ns:
                return
        r = memif_rx_burst(dom, rxq, lcore, rx, rx.size)
        if r > 0:
            pktmbuf_free_bulk(dom, lcore, rx, r)
            cnt[C_RECV] += r
        else:
            cpu_pause()


class MemifGenerator:
    """Memif client of the forwarder's two server sockets (``socks``): offers on the first,
    sinks the second; :meth:`connect` per forwarder run, :meth:`run` per trial."""

    def __init__(self, socks, cpu: int = 0, burst: int = BURST, tag: str = ""):
        import pktbuf
        self.socks, self.cpu, self.burst = list(socks), cpu, burst
        self.pool = pktbuf.PktmbufPool(16384, 256, name=f"l3b-gen-{os.getpid()}{tag}")
        self.c = []
        self.hdr = l3fwd_headers()
        self.cnt = np.zeros(C_WORDS, np.int64)
        self.txbuf = np.empty(burst, np.int32)
        self.rxbuf = np.empty(256, np.int32)

    def connect(self, timeout: float = 30.0) -> bool:
        from ..drivers.memif.api.memif import Memif
        self.disconnect()
        # the clients' control threads inherit this thread's CPU: the generator's, never the
        # forwarder's (whose CPU then runs nothing of this process)
        old = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, {self.cpu})
            for i, s in enumerate(self.socks):
                self.c.append(Memif.client(s, pool=self.pool, name=f"l3b-gen-{i}", port=i))
        finally:
            os.sched_setaffinity(0, old)
        end = time.monotonic() + timeout
        return all(c.wait_connected(max(0.1, end - time.monotonic())) for c in self.c)

    def disconnect(self) -> None:
        for c in self.c:
            c.close()
        self.c = []

    def run(self, rate_pps: float, seconds: float, drain: float = 0.3) -> dict:
        """Offer ``rate_pps`` (0: as fast as the ring takes them) for ``seconds``."""
        period = round(self.burst * 1e9 / rate_pps) if rate_pps > 0 else 0
        self.cnt[:] = 0
        old = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, {self.cpu})
            t = time.monotonic_ns()
            memif_gen_loop(self.pool.domain.state, self.pool.id, 0, self.c[0].tx_queue(0),
                           self.c[1].rx_queue(0), self.hdr, PKT_LEN, self.burst, period,
                           t + int(seconds * 1e9), t + int((seconds + drain) * 1e9), self.cnt,
                           self.txbuf, self.rxbuf)
        finally:
            os.sched_setaffinity(0, old)
        c = self.cnt
        dt = max(1, int(c[C_T1]) - int(c[C_T0])) / 1e9
        taken = int(c[C_TAKEN])
        return {"asked_pps": float(rate_pps), "sent": int(c[C_SENT]), "taken": taken,
                "tx_ring_full": int(c[C_SENT]) - taken, "nombuf_bursts": int(c[C_NOMBUF]),
                "late": int(c[C_LATE]), "seconds": dt, "offered_pps": int(c[C_SENT]) / dt,
                "received": int(c[C_RECV])}

    def close(self) -> None:
        self.disconnect()
        if self.pool is not None:
            self.pool.close(force=True)
            self.pool = None


def warm() -> None:
    """Compile (or load) :func:`memif_gen_loop` here, without a peer (a zero-length run)."""
    import pktbuf

    from ..drivers.memif.queue import queue_alloc
    pool = pktbuf.PktmbufPool(64, 0, name=f"l3b-warm-{os.getpid()}")
    try:
        q = queue_alloc()
        memif_gen_loop(pool.domain.state, pool.id, 0, q, q, l3fwd_headers(), PKT_LEN, BURST, 0,
                       0, 0, np.zeros(C_WORDS, np.int64), np.empty(BURST, np.int32),
                       np.empty(256, np.int32))
    finally:
        pool.close(force=True)
