"""The forwarder app: two memif server ports, MAC swap or l2fwd-style port forwarding.

* ``macswap``: receive on port 0, swap source and destination MAC, send back out of port 0;
* ``l2fwd``: port 0 <-> port 1, destination MAC ``02:00:00:00:00:<out port>``, source = the
  out port's MAC, as DPDK's l2fwd sample does.

:func:`forward_loop` is plain ``@njit`` code over the public kernels, as an application would
write it; it backs off when idle (``idle_backoff``), so an idle forwarder costs almost no CPU.
``examples/memif_forwarder.py`` runs :func:`forwarder_main`; ``pktbuf demo`` starts it.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from .._jit import kernel
from ..idle import IDLE_SLEEP_MAX_US, idle_backoff, now_ns
from ..mbuf.free import pktmbuf_free_bulk
from ..memif.datapath import memif_rx_burst, memif_tx_burst
from ..rawmem import addr_u8, stack_i32
from .counters import CNT_BYTES, CNT_DROPS, CNT_RX, CNT_TX, run_timed

BURST = 32
MODES = ("macswap", "l2fwd")


def port_mac(port: int) -> bytes:
    """The MAC of port ``port`` (and of the station behind it): 02:00:00:00:00:<port>."""
    return bytes([0x02, 0, 0, 0, 0, port])


@kernel(inline="always")
def macswap(dom, h):
    """Swap the source and destination MAC of packet ``h``."""
    m = dom.mb[h]
    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 12)
    for i in range(6):
        t = p[i]
        p[i] = p[6 + i]
        p[6 + i] = t


@kernel(inline="always")
def l2fwd_rewrite(dom, h, out_port):
    """l2fwd's rewrite: destination = the station behind ``out_port``, source = its MAC."""
    m = dom.mb[h]
    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 12)
    p[0] = 2
    p[6] = 2
    for i in range(1, 5):
        p[i] = 0
        p[6 + i] = 0
    p[5] = out_port
    p[11] = out_port


@kernel
def forward_loop(dom, lcore, rx0, tx0, rx1, tx1, l2fwd, deadline_ns, cnt):
    """Forward until ``deadline_ns``: port 0 (and 1 in l2fwd) Rx -> rewrite -> Tx.

    ``macswap``: rx0 -> tx0 with source/destination swapped.  ``l2fwd``: rx0 -> tx1 and
    rx1 -> tx0 with l2fwd's MAC rewrite.  Packets the Tx ring does not take are freed and
    counted as drops (a forwarder must not hold them).
    """
    pk = stack_i32(32)
    mb = dom.mb
    idle = 0
    while now_ns() < deadline_ns:
        work = 0
        for side in range(2 if l2fwd else 1):
            rq = rx0 if side == 0 else rx1
            tq = tx0 if (side == 1 or not l2fwd) else tx1
            out_port = 0 if (side == 1 or not l2fwd) else 1
            r = memif_rx_burst(dom, rq, lcore, pk, BURST)
            if r == 0:
                continue
            work += r
            nbytes = 0
            for i in range(r):
                nbytes += np.int64(mb[pk[i]].pkt_len)
                if l2fwd:
                    l2fwd_rewrite(dom, pk[i], out_port)
                else:
                    macswap(dom, pk[i])
            k = memif_tx_burst(dom, tq, lcore, pk, r)
            if k < r:
                pktmbuf_free_bulk(dom, lcore, pk[k:], r - k)
                cnt[CNT_DROPS] += r - k
            cnt[CNT_RX] += r
            cnt[CNT_TX] += k
            cnt[CNT_BYTES] += nbytes
        if work == 0:
            idle_backoff(idle, IDLE_SLEEP_MAX_US)
            idle += 1
        else:
            idle = 0


def forwarder_main(argv=None) -> int:
    """The forwarder process: two memif server ports (one in macswap mode)."""
    ap = argparse.ArgumentParser(prog="memif_forwarder", description=forwarder_main.__doc__)
    ap.add_argument("--sock0", default="/run/pktbuf-demo-0.sock")
    ap.add_argument("--sock1", default="/run/pktbuf-demo-1.sock")
    ap.add_argument("--mode", choices=MODES, default="macswap")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the client")
    a = ap.parse_args(argv)
    from ..api.memif import Memif
    from ..api.pools import PktmbufPool
    pool = PktmbufPool(16384, 256, name="fwd")
    l2 = a.mode == "l2fwd"
    p0 = Memif.server(a.sock0, pool=pool, name="pktbuf-fwd-p0", port=0)
    p1 = Memif.server(a.sock1, pool=pool, name="pktbuf-fwd-p1", port=1) if l2 else p0
    try:
        print("READY", flush=True)
        if not (p0.wait_connected(a.wait) and p1.wait_connected(a.wait)):
            print(json.dumps({"role": "fwd", "error": "client did not connect"}), flush=True)
            return 1
        dom = pool.domain.state
        q = (p0.rx_queue(0), p0.tx_queue(0), p1.rx_queue(0), p1.tx_queue(0))
        run_timed("fwd", a.seconds, lambda cnt, dl: forward_loop(dom, 0, *q, l2, dl, cnt))
        # the traffic side stops first; keep serving until it has gone
        p0.wait_disconnected(5)
    finally:
        if l2:
            p1.close()
        p0.close()
    return 0


def warm() -> None:
    """Compile (or load) the loop here, before child processes would compile it at once."""
    from ..api.pools import PktmbufPool
    from ..memif.queue import queue_alloc
    from .counters import counters
    pool = PktmbufPool(64, 0, name="warm-fwd")
    q = queue_alloc()
    forward_loop(pool.domain.state, 0, q, q, q, q, False, 0, counters())
    pool.close()
