"""Worker bodies for the shared-domain tests: module-level, so ``spawn`` can start them.

Each is ``target(sd, *args)`` as :meth:`pktbuf.SharedDomain.spawn` calls it, attached to the
domain.  The ``*_and_stop`` ones stop themselves (SIGSTOP) at an exact point -- the test waits
for the stop, then kills them with SIGKILL: the state a ``kill -9`` at that instant leaves,
deterministically, with no sleep guessing when the point is reached.
"""
import os
import signal

import numpy as np

from pktbuf.idle import idle_backoff
from pktbuf.buf.mempool.layout import CACHE_BUSY_FLUSH_HALF, CACHE_LINE_WORDS, CACHE_MAX_SIZE, \
    CACHE_W_BUSY, MAX_LCORE
from pktbuf.buf.ring.kernels import PROD_HEAD

IDLE_MAX_US = 1000


def stop_here():
    """The injected kill point: stop until the test kills us."""
    os.kill(os.getpid(), signal.SIGSTOP)


def produce(sd, n, ring_name, conn):
    """Allocate ``n`` mbufs, write (i, lcore) into each, pass them on ``ring_name``."""
    pool, ring = sd.pool("mbufs"), sd.ring(ring_name)
    hs = pool.alloc_bulk(n)
    for i, h in enumerate(hs):
        pool.mbuf(int(h)).append_bytes(bytes([i % 256, sd.lcore]))
    sent = idle = 0
    while sent < n:
        k = ring.enqueue_burst(hs[sent:])
        sent += k
        if k:
            idle = 0
        else:
            idle_backoff(idle, IDLE_MAX_US)
            idle += 1
    conn.send(("sent", sd.lcore, sent))


def consume(sd, n, ring_name, conn):
    """Take ``n`` mbufs off ``ring_name``, report their payloads, free them."""
    pool, ring = sd.pool("mbufs"), sd.ring(ring_name)
    got, idle = [], 0
    while len(got) < n:
        hs = ring.dequeue_burst(n - len(got))
        if hs.size:
            idle = 0
            got.extend(int(h) for h in hs)
        else:
            idle_backoff(idle, IDLE_MAX_US)
            idle += 1
    payloads = [pool.mbuf(h).tobytes() for h in got]
    pool.free_bulk(np.array(got, np.int32))
    conn.send(("consumed", sd.lcore, payloads))


def survivor(sd, conn):
    """Serve commands until "stop": each "work" allocates, passes through its own SP/SC
    ring, frees, and answers with the pool's view of it."""
    pool, ring = sd.pool("mbufs"), sd.ring("surv")
    conn.send(("ready", sd.lcore))
    while True:
        cmd = conn.recv()
        if cmd == "stop":
            conn.send(("bye",))
            return
        hs = pool.alloc_bulk(48)
        assert ring.enqueue_bulk(hs) == 48
        back = ring.dequeue_bulk(48)
        pool.free_bulk(back)
        conn.send(("ok", sorted(int(h) for h in back) == sorted(int(h) for h in hs)))


def hold_and_stop(sd, n, k, conn):
    """Allocate ``n`` mbufs, free ``k`` of them (they stay in this lcore's cache), stop."""
    pool = sd.pool("mbufs")
    hs = pool.alloc_bulk(n)
    pool.free_bulk(hs[:k])
    conn.send(("holding", sd.lcore, n - k, pool.cache_count()))
    stop_here()


def flush_window_and_stop(sd, conn):
    """Fill this lcore's cache, hold 8 mbufs, then be killed inside a put's flush: the busy
    word set and the bottom half of the cache enqueued to the pool's ring, the new length not
    stored -- exactly where ``_put_slow`` is between ``_ring_put`` and ``_cache_publish``."""
    from pktbuf.buf.mempool.kernels import _ring_put
    pool = sd.pool("mbufs")
    st = sd.domain.state
    cs = pool.cache_size
    held = pool.alloc_bulk(8)
    hs = pool.alloc_bulk(cs)
    pool.free_bulk(hs)                              # the cache is full now
    slot = pool.id * MAX_LCORE + sd.lcore
    line, c0 = slot * CACHE_LINE_WORDS, slot * CACHE_MAX_SIZE
    assert int(st.cache_len[line]) == cs
    st.cache_len[line + CACHE_W_BUSY] = CACHE_BUSY_FLUSH_HALF
    _ring_put(st, np.int64(pool.id), st.cache_objs, np.int64(c0), np.int64(cs // 2))
    conn.send(("in-flush", sd.lcore, held.size, cs))
    stop_here()


def mpmc_head_moved_and_stop(sd, conn):
    """Be killed between an MP enqueue's head update and its tail update on ring "mpmc":
    the producer head is one ahead of the tail, as after a successful CAS."""
    ring = sd.ring("mpmc")
    ring.hdr[PROD_HEAD] = (int(ring.hdr[PROD_HEAD]) + 1) & 0xFFFFFFFF
    conn.send(("head-moved", sd.lcore))
    stop_here()


def attach_probe(name, tries, conn):
    """Not attached by spawn(): try ``SharedDomain.attach(name, lcore=x)`` for each x in
    ``tries`` (waiting for a "go" before each) and report the outcome's class name."""
    import pktbuf
    for lc in tries:
        conn.recv()
        try:
            sd = pktbuf.SharedDomain.attach(name, lcore=lc)
        except pktbuf.PktbufError as e:
            conn.send((type(e).__name__, str(e)))
            continue
        conn.send(("attached", sd.lcore))
        sd.detach()


def late_pool_user(sd, conn):
    """Attached before pool "late" exists: find it by name once told, use it; try (and fail)
    to create a pool here."""
    import pktbuf
    conn.send(("ready", sd.lcore))
    conn.recv()
    late = sd.pool("late")
    hs = late.alloc_bulk(10)
    late.free_bulk(hs)
    refusals = []
    for make in (lambda: sd.pktmbuf_pool("mine", 16),
                 lambda: pktbuf.PktmbufPool(16, domain=sd.domain)):
        try:
            make()
        except pktbuf.SharedDomainError as e:
            refusals.append(type(e).__name__)
    conn.send(("done", late.n, refusals))
    conn.recv()


def die_after(sd, delay, conn):
    """Say "ready", wait ``delay`` seconds (unless told "go" first), then exit without
    detaching: a death :meth:`SharedDomain.wait_peer_death` must see."""
    conn.send(("ready", sd.lcore))
    conn.poll(delay)
    os._exit(3)
