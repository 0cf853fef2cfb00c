"""Your own @njit data plane on top of pktbuf's kernels.

One thread builds Ethernet frames in mbufs (alloc_bulk + append) and swaps their MAC addresses;
a second thread checks and frees them (free_bulk).  Bursts go from one to the other through a
lock-free ring; both loops run inside Numba with the GIL released, and back off when idle
(two busy threads are all a 2-core machine can take).

    python examples/njit_pipeline.py [seconds]
"""
import sys
import threading
import time

import numpy as np
from numba import njit

import pktbuf
from pktbuf.idle import idle_backoff
from pktbuf.kernels import (addr_u8, load_acquire, pktmbuf_alloc_bulk, pktmbuf_append,
                            pktmbuf_free_bulk, pktmbuf_mtod, ring_dequeue_burst,
                            ring_enqueue_burst)

BURST = 32
FRAME = 64


@njit(cache=True, nogil=True)
def generate_and_swap(dom, pid, lcore, hdr, slots, stop, stats):
    burst = np.empty(BURST, np.int32)
    seq = 0
    idle = 0
    while load_acquire(stop, 0) == 0:
        if pktmbuf_alloc_bulk(dom, pid, lcore, burst, BURST) != 0:
            idle_backoff(idle, 1000)      # pool empty: the sink is behind
            idle += 1
            continue
        idle = 0
        for i in range(BURST):
            p = addr_u8(pktmbuf_append(dom, burst[i], FRAME), FRAME)
            p[0:6] = 0x02          # dst MAC 02:02:02:02:02:02
            p[6:12] = 0x04         # src MAC 04:04:04:04:04:04
            p[12] = 0x08           # EtherType IPv4
            p[13] = 0x00
            p[14] = seq & 0xFF
            seq += 1
        stats[0] += BURST
        for i in range(BURST):     # forward: MAC swap
            p = addr_u8(pktmbuf_mtod(dom, burst[i]), 12)
            for k in range(6):
                t = p[k]
                p[k] = p[6 + k]
                p[6 + k] = t
        stats[1] += BURST
        sent = 0
        while sent < BURST:
            k = ring_enqueue_burst(hdr, slots, burst[sent:], BURST - sent)
            sent += k
            if k == 0:
                idle_backoff(idle, 1000)
                idle += 1


@njit(cache=True, nogil=True)
def sink(dom, lcore, hdr, slots, stop, stats):
    burst = np.empty(BURST, np.int32)
    idle = 0
    while True:
        n = ring_dequeue_burst(hdr, slots, burst, BURST)
        if n == 0:
            if load_acquire(stop, 0) != 0:   # the producer has finished: the ring is drained
                return
            idle_backoff(idle, 1000)
            idle += 1
            continue
        idle = 0
        for i in range(n):
            p = addr_u8(pktmbuf_mtod(dom, burst[i]), 12)
            if p[0] != 0x04 or p[6] != 0x02:
                stats[3] += 1      # not swapped
        pktmbuf_free_bulk(dom, lcore, burst, n)
        stats[2] += n


def main(seconds=2.0):
    pool = pktbuf.PktmbufPool(4096, cache_size=256, data_room=2176)
    dom, pid = pool.domain.state, pool.id
    ring = pktbuf.Ring(1024)
    stop_gen = np.zeros(1, np.int64)
    stop_sink = np.zeros(1, np.int64)
    stats = np.zeros(4, np.int64)          # generated, swapped, sunk, errors
    gen = threading.Thread(target=generate_and_swap,
                           args=(dom, pid, 0, ring.hdr, ring.slots, stop_gen, stats))
    snk = threading.Thread(target=sink, args=(dom, 1, ring.hdr, ring.slots, stop_sink, stats))
    # compile (or load from the cache) before the clock starts: both return at once
    done = np.ones(1, np.int64)
    generate_and_swap(dom, pid, 0, ring.hdr, ring.slots, done, stats)
    sink(dom, 1, ring.hdr, ring.slots, done, stats)
    t0 = time.perf_counter()
    gen.start()
    snk.start()
    time.sleep(seconds)
    stop_gen[0] = 1          # stop the producer first, then let the sink drain the ring
    gen.join()
    stop_sink[0] = 1
    snk.join()
    dt = time.perf_counter() - t0
    for lc in (0, 1):
        pool.cache_flush(lc)
    print(f"generated {stats[0]:,}  swapped {stats[1]:,}  sunk {stats[2]:,}  errors {stats[3]}")
    print(f"{stats[2] / dt / 1e6:.2f} Mpps through two threads in {dt:.1f} s; "
          f"pool back to {pool.avail_count}/{pool.n}")
    return stats, pool


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
