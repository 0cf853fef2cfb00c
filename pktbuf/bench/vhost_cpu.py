"""The CPU cost of pktbuf's vhost-user pair, in one thread: pktbuf's ``net_virtio_user``
sending into pktbuf's ``net_vhost`` in the same process, both bursts called from one compiled
loop, timed in the thread's own CPU time per packet received.

What it is for: A/B-timing a change to either side's burst kernels.  ``pktbuf bench vhost``
measures throughput across processes against testpmd, and on a shared 2-core machine its rounds
swing by several times; here nothing runs but the loop (allocate a burst, send it on the front
end, receive on the back end, free), so the figure moves only with the code and the CPU.  A
slice that was preempted is not charged the time it waited (``time.thread_time_ns``).

``python -m pktbuf.bench.vhost_cpu [--size N] [--packed] [--rounds N] [--bursts N] [--json]``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from .._jit import kernel
from ..buf.mbuf.free import pktmbuf_free_bulk
from ..buf.mbuf.raw import pktmbuf_alloc_bulk
from ..drivers.common.kinds import K_VHOST, K_VIRTIO_USER
from ..errors import cli_number
from ..ethdev.burst import eth_domain, kinds_mask, rx_burst_of, tx_burst_of

__all__ = ["run"]

KINDS = kinds_mask([K_VHOST, K_VIRTIO_USER])
BURST = 32


@kernel
def pair_loop(eth, pid, fe, be, n_iter, out, inb, size):
    """``n_iter`` rounds of: a burst of ``out.size`` mbufs of ``size`` bytes from pool ``pid``
    sent on port ``fe``, then one Rx burst of up to ``inb.size`` on port ``be``, freed.
    Returns ``(sent, received)``; what the front end did not take is freed."""
    dom = eth_domain(eth)
    sent = 0
    got = 0
    for _ in range(n_iter):
        k = 0
        if pktmbuf_alloc_bulk(dom, pid, 0, out, out.size) == 0:
            for i in range(out.size):
                m = dom.mb[out[i]]
                m.data_len = size
                m.pkt_len = size
            k = tx_burst_of(KINDS, eth, fe, 0, 0, out, out.size)
            if k < out.size:
                pktmbuf_free_bulk(dom, 0, out[k:], out.size - k)
        sent += k
        r = rx_burst_of(KINDS, eth, be, 0, 0, inb, inb.size)
        pktmbuf_free_bulk(dom, 0, inb, r)
        got += r
    return sent, got


def run(size: int = 64, packed: bool = False, rounds: int = 9, bursts: int = 100_000) -> dict:
    """Measure; ``{"ns_per_packet": median, "min", "samples", "sent", "received",
    "in_use_after"}`` (every packet sent is received by the end: the in-flight ones are
    drained, untimed; ``in_use_after``: the pool's mbufs still out once both ports are
    closed, 0 unless a side leaks)."""
    import pktbuf
    from ..lcore import reserve_lcores
    reserve_lcores(1)
    pool = pktbuf.PktmbufPool(8192, 256, name="bench-vhost-cpu")
    if not 60 <= size <= int(pool.data_room) - int(pool.headroom):
        pool.close()
        raise ValueError(f"size must be in 60..{int(pool.data_room) - int(pool.headroom)}")
    ports = pktbuf.Ports(pool)
    d = tempfile.mkdtemp(prefix="pktbuf-bench-vhost-cpu-")
    path = os.path.join(d, "vhost.sock")
    try:
        try:
            be = ports.open(f"net_vhost0,iface={path}")
            fe = ports.open(f"net_virtio_user1,path={path}"
                            + (",packed_vq=1" if packed else ""))
            if not (fe.wait_link_up(20) and be.wait_link_up(20)):
                raise RuntimeError(f"the pair did not come up: {fe.disconnect_reason!r}, "
                                   f"{be.disconnect_reason!r}")
            eth = ports.state
            out = np.zeros(BURST, np.int32)
            inb = np.zeros(2 * BURST, np.int32)
            args = (eth, pool.id, fe.port_id, be.port_id)
            sent, got = pair_loop(*args, 16, out, inb, size)      # compile / load, warm
            samples = []
            for _ in range(rounds):
                c0 = time.thread_time_ns()
                s, g = pair_loop(*args, bursts, out, inb, size)
                c1 = time.thread_time_ns()
                sent += s
                got += g
                samples.append((c1 - c0) / max(1, g))
            for _ in range(1000):                                   # drain what is in flight
                r = be.rx_burst(256)
                got += len(r)
                pool.free_bulk(r)
                if got >= sent:
                    break
            fe.tx_burst([])                    # the front end reclaims what was used
        finally:
            for p in list(ports):
                p.close()
        return {"size": size, "packed": packed, "ns_per_packet": statistics.median(samples),
                "min": min(samples), "samples": samples, "sent": int(sent),
                "received": int(got),
                "in_use_after": int(pool.in_use_count)}    # the ports closed: their rings too
    finally:
        pool.close(force=True)
        try:
            os.rmdir(d)
        except OSError:
            pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pktbuf.bench.vhost_cpu",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=cli_number(int, 60, 9000), default=64)
    ap.add_argument("--packed", action="store_true", help="packed virtqueues (packed_vq=1)")
    ap.add_argument("--rounds", type=cli_number(int, 1, 1000), default=9)
    ap.add_argument("--bursts", type=cli_number(int, 1, 10 ** 8), default=100_000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    r = run(a.size, a.packed, a.rounds, a.bursts)
    if a.json:
        print(json.dumps(r))
    else:
        print(f"virtio_user -> vhost in one thread, {a.size} B, "
              f"{'packed' if a.packed else 'split'}: {r['ns_per_packet']:.2f} ns/packet of CPU "
              f"time (median of {a.rounds}; min {r['min']:.2f}); {r['received']} of "
              f"{r['sent']} packets received")
    return 0 if r["received"] == r["sent"] and r["in_use_after"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
