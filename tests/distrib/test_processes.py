"""The distributor across processes: the Rx stage in the primary of a shared domain, workers
in processes started with ``spawn``; a worker killed holding a burst."""
from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

import pktbuf
from pktbuf import Distributor

from . import workers as W
from .test_distributor import flow_frame

CTX = multiprocessing.get_context("spawn")
_seq = itertools.count()
FLOWS = 40


@pytest.fixture
def shared():
    sd = pktbuf.SharedDomain.create(f"dist{os.getpid()}-{next(_seq)}", max_objects=1 << 14,
                                    max_ring_slots=1 << 15, max_data_bytes=1 << 26)
    pool = sd.pktmbuf_pool("mbufs", 4096, 64)
    dist = Distributor(pool, 2, ring_size=256, shared=True)
    procs = []
    yield sd, pool, dist, procs
    for p in procs:
        if p.is_alive():
            os.kill(p.pid, signal.SIGKILL)
        p.join()
    dist.close()
    sd.close(force=True)


def start(sd, dist, procs, w, stop_after=0):
    mine, theirs = CTX.Pipe()

    def warm():                  # the worker's kernels, compiled here before it starts
        dist.worker_burst(w, 1)
        dist.worker_done(w, 0)
        dist.pending(w)
    p = sd.spawn(W.dist_worker, args=(w, os.getpid(), dist.fd, dist.nbytes, stop_after, theirs),
                 warm=warm)
    theirs.close()
    procs.append(p)
    return p, mine


def packet(pool, seq):
    f = bytearray(flow_frame(seq % FLOWS))
    f[42:46] = seq.to_bytes(4, "big")
    return pool.alloc().append_bytes(bytes(f)).handle


def offer(dist, hs, until=None):
    """Offer ``hs`` until the distributor took them all; returns what is left when ``until()``
    turns true first.  A distributor that takes nothing for 60 s fails the test."""
    deadline = time.monotonic() + 60
    while hs.size:
        k = dist.distribute(hs)
        hs = hs[k:].copy()
        if until is not None and until():
            return hs
        if k == 0:
            assert time.monotonic() < deadline, f"workers took nothing for 60 s: {dist.stats()}"
            time.sleep(0.001)
    return hs


def send(pool, dist, seqs, until=None):
    """Distribute the packets ``seqs`` in bursts of 32.  With ``until``, stops once it turns
    true and returns how many of ``seqs`` were made into packets and the handles of those
    the distributor has not taken; else returns ``len(seqs)``."""
    for i in range(0, len(seqs), 32):
        hs = np.array([packet(pool, s) for s in seqs[i:i + 32]], np.int32)
        left = offer(dist, hs, until)
        if until is not None and until():
            return i + len(seqs[i:i + 32]), left
    return (len(seqs), np.zeros(0, np.int32)) if until is not None else len(seqs)


def results(conn):
    assert conn.poll(120), "the worker did not answer"
    return conn.recv()


def test_worker_processes_take_every_packet_once_by_flow(shared):
    sd, pool, dist, procs = shared
    conns = [start(sd, dist, procs, w)[1] for w in range(2)]
    n = 3000
    send(pool, dist, list(range(n)))
    for c in conns:
        c.send("stop")
    seen = [results(c)[1] for c in conns]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert sorted(seen[0] + seen[1]) == list(range(n))
    flows = [{s % FLOWS for s in x} for x in seen]
    assert flows[0] and flows[1] and not flows[0] & flows[1]
    assert all(x == sorted(x) for x in seen)              # each worker's packets in order
    st = dist.stats()
    assert [s["dequeued"] for s in st] == [len(x) for x in seen]
    assert all(s["in_hand"] == 0 and s["pending"] == 0 for s in st)
    assert pool.audit() == pool.n


def test_worker_killed_holding_a_burst(shared):
    """Worker 1 is killed holding a burst it took and did not free.  The primary sees it die,
    reaps its lcore (its cache goes back to the pool), retires it (its flows go to worker 0)
    and frees what was left in its ring.  Worker 0 goes on; what is lost is exactly the
    burst in the dead worker's hands, and it is counted."""
    sd, pool, dist, procs = shared
    p0, c0 = start(sd, dist, procs, 0)
    p1, c1 = start(sd, dist, procs, 1, stop_after=100)
    n = 4000
    seqs = list(range(n))
    sent, refused = send(pool, dist, seqs, until=c1.poll)
    assert sent < n, "worker 1 did not stop"
    msg = results(c1)
    assert msg[0] == "holding"
    holding = msg[1]
    os.waitid(os.P_PID, p1.pid, os.WSTOPPED)               # stopped at the injected point
    os.kill(p1.pid, signal.SIGKILL)
    p1.join()
    assert sd.wait_peer_death(10) == [p1.pid]
    rep = [r for r in sd.reap() if r.pid == p1.pid]
    assert len(rep) == 1
    dist.retire(1)
    queued = dist.pending(1)
    left = dist.reclaim(1)                                 # its ring, freed
    assert left == queued and dist.pending(1) == 0
    offer(dist, refused)                                   # refused ones: now to worker 0
    sent += send(pool, dist, seqs[sent:])                  # the rest: all to worker 0
    c0.send("stop")
    seen0 = results(c0)[1]
    p0.join(60)
    assert p0.exitcode == 0
    st = dist.stats()
    assert st[1]["in_hand"] == len(holding)                # lost: its burst, counted
    assert len(seen0) + st[1]["dequeued"] == n             # every packet went somewhere once
    assert st[1]["dequeued"] == st[1]["done"] + len(holding)
    assert st[1]["enqueued"] == st[1]["dequeued"] and st[1]["pending"] == 0
    assert st[0]["in_hand"] == 0 and st[0]["pending"] == 0
    assert set(seen0) >= set(seqs[sent - 1:sent])          # worker 0 got the last packet
    assert pool.audit() == pool.n - len(holding)           # nothing else lost
