"""The traffic app: a generator and sink process, memif clients of the forwarder.

Sends ``size``-byte UDP frames (testpmd ``txonly``'s work per packet, :mod:`.txonly`) into
port 0 as fast as the ring takes them, and counts -- and checks the MACs of -- what comes back:
on port 0 in macswap mode, on port 1 in l2fwd mode.  ``examples/memif_traffic.py`` runs
:func:`traffic_main`; ``pktbuf demo`` starts it.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from .._jit import kernel
from ..errors import cli_number
from ..idle import IDLE_SLEEP_MAX_US, idle_backoff, now_ns
from ..buf.mbuf.free import pktmbuf_free_bulk
from ..drivers.memif.datapath import memif_rx_burst, memif_tx_burst
from ..rawmem import addr_u8, stack_i32
from .counters import CNT_BAD, CNT_BYTES, CNT_DROPS, CNT_RX, CNT_TX, run_timed
from .forwarder import MODES, port_mac
from .txonly import MIN_PKT_LEN, txonly_alloc_burst, udp_headers

BURST = 32


@kernel(inline="always")
def _macs_match(mb, h, expect_dst, expect_src):
    m = mb[h]
    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 12)
    for j in range(6):
        if p[j] != expect_dst[j] or p[6 + j] != expect_src[j]:
            return False
    return True


@kernel
def traffic_loop(dom, pid, lcore, txq, rxq, hdr, pkt_len, expect_dst, expect_src, deadline_ns,
                 cnt):
    """Generate ``pkt_len``-byte frames with headers ``hdr`` on ``txq`` and sink what arrives on
    ``rxq`` until the deadline.

    Every received frame's MACs are checked against ``expect_dst``/``expect_src`` (6-byte
    arrays); mismatches count in ``cnt[CNT_BAD]``.
    """
    tx = stack_i32(32)
    rx = stack_i32(32)
    mb = dom.mb
    idle = 0
    while now_ns() < deadline_ns:
        k = 0
        if txonly_alloc_burst(dom, pid, lcore, tx, BURST, hdr, pkt_len) == 0:
            k = memif_tx_burst(dom, txq, lcore, tx, BURST)
            if k < BURST:
                pktmbuf_free_bulk(dom, lcore, tx[k:], BURST - k)
                cnt[CNT_DROPS] += BURST - k
            cnt[CNT_TX] += k
        r = memif_rx_burst(dom, rxq, lcore, rx, BURST)
        if r > 0:
            for i in range(r):
                cnt[CNT_BYTES] += np.int64(mb[rx[i]].pkt_len)
                if not _macs_match(mb, rx[i], expect_dst, expect_src):
                    cnt[CNT_BAD] += 1
            pktmbuf_free_bulk(dom, lcore, rx, r)
            cnt[CNT_RX] += r
        if k == 0 and r == 0:
            idle_backoff(idle, IDLE_SLEEP_MAX_US)
            idle += 1
        else:
            idle = 0


def traffic_main(argv=None) -> int:
    """The generator + sink process: memif clients of the forwarder."""
    ap = argparse.ArgumentParser(prog="memif_traffic", description=traffic_main.__doc__)
    ap.add_argument("--sock0", default="/run/pktbuf-demo-0.sock")
    ap.add_argument("--sock1", default="/run/pktbuf-demo-1.sock")
    ap.add_argument("--mode", choices=MODES, default="macswap")
    ap.add_argument("--seconds", type=cli_number(float, 0, 1e9), default=10.0)
    ap.add_argument("--size", type=cli_number(int, MIN_PKT_LEN, 65535), default=64)
    a = ap.parse_args(argv)
    from ..drivers.memif.api.memif import Memif
    from ..buf.domain.pools import PktmbufPool
    pool = PktmbufPool(16384, 256, name="traffic")
    cap = int(pool.data_room) - int(pool.headroom)
    if not MIN_PKT_LEN <= a.size <= cap:
        ap.error(f"--size must be in [{MIN_PKT_LEN}, {cap}]")
    l2 = a.mode == "l2fwd"
    me, peer = port_mac(0x10), port_mac(0x20)
    hdr = udp_headers(a.size, me, peer)
    if l2:   # out of forwarder port 1: dst = station behind port 1, src = port 1
        exp_dst, exp_src = port_mac(1), port_mac(1)
    else:    # swapped back to us
        exp_dst, exp_src = me, peer
    warm()      # compile (or load) before connecting: the forwarder's clock starts then
    c0 = Memif.client(a.sock0, pool=pool, name="pktbuf-traffic-0")
    c1 = Memif.client(a.sock1, pool=pool, name="pktbuf-traffic-1") if l2 else c0
    try:
        if not (c0.wait_connected(30) and c1.wait_connected(30)):
            print(json.dumps({"role": "traffic", "error": "could not connect"}), flush=True)
            return 1
        dom = pool.domain.state
        ed = np.frombuffer(exp_dst, np.uint8).copy()
        es = np.frombuffer(exp_src, np.uint8).copy()
        txq, rxq = c0.tx_queue(0), c1.rx_queue(0)
        run_timed("traffic", a.seconds, lambda cnt, dl: traffic_loop(
            dom, pool.id, 0, txq, rxq, hdr, a.size, ed, es, dl, cnt))
    finally:
        if l2:
            c1.close()
        c0.close()
    # every mbuf back: the memif clients hold none once closed (a leak is a failure, not
    # a normal end)
    left = int(pool.in_use_count)
    if left:
        print(json.dumps({"role": "traffic", "error": f"{left} mbufs were not returned"}),
              flush=True)
        return 1
    return 0


def warm() -> None:
    """Compile (or load) the loop here, before child processes would compile it at once."""
    from ..buf.domain.pools import PktmbufPool
    from ..drivers.memif.queue import queue_alloc
    from .counters import counters
    pool = PktmbufPool(64, 0, name="warm-traffic")
    q = queue_alloc()
    six = np.zeros(6, np.uint8)
    traffic_loop(pool.domain.state, pool.id, 0, q, q, udp_headers(64, bytes(6), bytes(6)), 64,
                 six, six, 0, counters())
    pool.close()
