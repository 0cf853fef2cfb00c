"""Shared helpers of the memif tests: packets with known payloads, sockets, waiting."""
from __future__ import annotations

import itertools
import os
import time

import numpy as np

_seq = itertools.count()


def sock_name(tag: str = "t") -> str:
    """A unique abstract socket path for one test."""
    return f"/pktbuf-test-{os.getpid()}-{tag}-{next(_seq)}"


def payloads(sizes, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]


def make_packet(pool, payload: bytes, seg: int | None = None) -> int:
    """An mbuf (chained when ``seg`` is smaller than the payload) holding ``payload``."""
    seg = seg or min(max(1, len(payload)), 2048)
    head = pool.alloc()
    head.append_bytes(payload[:seg])
    for off in range(seg, len(payload), seg):
        m = pool.alloc()
        m.append_bytes(payload[off:off + seg])
        head.chain(m)
    return head.handle


def exchange(tx, rx, pool, pays, segs=None, timeout=10.0, tx_qid=0, rx_qid=0):
    """Send ``pays`` from ``tx`` and collect as many packets on ``rx``; returns their bytes and
    segment counts (packets are freed)."""
    segs = segs or [None] * len(pays)
    hs = np.array([make_packet(pool, p, s) for p, s in zip(pays, segs)], np.int32)
    sent = 0
    got = []
    end = time.monotonic() + timeout
    while len(got) < len(pays) and time.monotonic() < end:
        if sent < hs.size:
            sent += tx.tx_burst(hs[sent:], tx_qid)
        for h in rx.rx_burst(32, rx_qid):
            m = pool.mbuf(h)
            got.append((m.tobytes(), m.nb_segs))
            m.free()
    if sent < hs.size:
        pool.free_bulk(hs[sent:])
    return got, sent


def wait_for(pred, timeout=10.0, step=0.01) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
