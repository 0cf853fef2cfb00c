"""A shared domain across real processes (started with ``spawn``), in real shared memory.

Workers attach by name (``SharedDomain.spawn``) or by the header's fd; mbufs go from one
process to another through rings; lcore ids are unique across the processes; and processes
are killed with SIGKILL at injected points (they stop themselves there first, see
``workers.py``), after which the survivors keep going and ``reap`` reports exactly what the
dead one held.
"""
import itertools
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pktbuf
from pktbuf.buf.domain.shared import LAYOUT_VERSION, W_VERSION

from . import workers as W

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CTX = multiprocessing.get_context("spawn")
_seq = itertools.count()
N_MBUFS = 1024
CACHE = 32


class Harness:
    """The primary's domain (pool "mbufs", SP/SC ring "surv") and the workers it started."""

    def __init__(self):
        self.name = f"t{os.getpid()}-{next(_seq)}"
        self.sd = pktbuf.SharedDomain.create(self.name, max_objects=1 << 14,
                                             max_ring_slots=1 << 15, max_data_bytes=1 << 26)
        self.pool = self.sd.pktmbuf_pool("mbufs", N_MBUFS, CACHE)
        self.sd.create_ring("surv", 64, sp=True, sc=True)
        self.procs = []

    def spawn(self, target, *args, lcore=None):
        """Start ``target(sd, *args, conn)``; returns (process, our end of its pipe)."""
        mine, theirs = CTX.Pipe()
        p = self.sd.spawn(target, args=args + (theirs,), lcore=lcore)
        theirs.close()
        self.procs.append(p)
        return p, mine

    def start_plain(self, target, *args):
        mine, theirs = CTX.Pipe()
        p = CTX.Process(target=target, args=args + (theirs,), daemon=True)
        p.start()
        theirs.close()
        self.procs.append(p)
        return p, mine

    def recv(self, conn, timeout=120):
        assert conn.poll(timeout), "worker did not answer"
        return conn.recv()

    def kill_at_stop(self, p):
        """Wait until ``p`` has stopped itself at its injected point, then SIGKILL it."""
        os.waitid(os.P_PID, p.pid, os.WSTOPPED)
        os.kill(p.pid, signal.SIGKILL)

    def close(self):
        for p in self.procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
            p.join()
        self.sd.close(force=True)


@pytest.fixture
def h():
    hh = Harness()
    yield hh
    hh.close()


def test_mbufs_pass_between_processes_through_a_ring(h):
    h.sd.create_ring("p2c", 16, sp=True, sc=True)       # smaller than the burst: must wrap
    prod, pc = h.spawn(W.produce, 100, "p2c")
    cons, cc = h.spawn(W.consume, 100, "p2c")
    _, plc, sent = h.recv(pc)
    _, clc, payloads = h.recv(cc)
    prod.join(60), cons.join(60)
    assert (prod.exitcode, cons.exitcode) == (0, 0)
    assert sent == 100 and plc != clc
    assert payloads == [bytes([i, plc]) for i in range(100)]
    # the workers detached: their lcores are free and their caches flushed into the pool
    assert set(h.sd.lcores().values()) == {os.getpid()}
    assert h.pool.audit() == N_MBUFS
    assert h.sd.reap() == []


def test_attach_by_fd_in_a_child_process(h):
    ring = h.sd.create_ring("back", 8, sp=True, sc=True)
    mine = h.pool.alloc_bulk(3)
    child = textwrap.dedent("""
        import sys, numpy as np, pktbuf
        sd = pktbuf.SharedDomain.attach(fd=int(sys.argv[1]), lcore=9)
        pool, ring = sd.pool("mbufs"), sd.ring("back")
        hs = pool.alloc_bulk(4)
        for i, h in enumerate(hs):
            pool.mbuf(int(h)).append_bytes(b"fd%d" % i)
        assert ring.enqueue_bulk(hs) == 4
        pool.free_bulk(np.array(sys.argv[2:], np.int32))     # the parent's mbufs
        print(sd.name, sd.lcore)
        sd.detach()
    """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    fd = h.sd.header_fd
    r = subprocess.run([sys.executable, "-c", child, str(fd)] + [str(x) for x in mine],
                       pass_fds=(fd,), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [h.name, "9"]
    got = ring.dequeue_bulk(4)
    assert [h.pool.mbuf(int(x)).tobytes() for x in got] == [b"fd%d" % i for i in range(4)]
    h.pool.free_bulk(got)
    assert all(int(h.sd.domain.state.mb[x]["state"]) == 0 for x in mine)   # freed there
    assert h.pool.audit() == N_MBUFS


def test_lcore_ids_are_unique_across_processes(h):
    holder, hc = h.spawn(W.survivor, lcore=5)
    assert h.recv(hc) == ("ready", 5)
    probe, pc = h.start_plain(W.attach_probe, h.name, [5, h.sd.lcore, None])
    outcomes = []
    for _ in range(3):
        taken = set(h.sd.lcores())          # before this try: the holder's and ours
        pc.send("go")
        outcomes.append(h.recv(pc))
    assert outcomes[0][0] == "LcoreBusy" and "lcore 5 is held by process" in outcomes[0][1]
    assert outcomes[1][0] == "LcoreBusy"
    # (the primary holds its lcore and any id its threads had before it created the domain)
    assert 5 in taken and h.sd.lcore in taken
    assert outcomes[2][0] == "attached" and outcomes[2][1] not in taken
    probe.join(60)
    hc.send("stop")
    assert h.recv(hc) == ("bye",)
    holder.join(60)
    assert set(h.sd.lcores().values()) == {os.getpid()}


def test_no_such_domain_is_a_clear_error():
    with pytest.raises(pktbuf.NoSuchDomain, match="no shared domain named 'nope-"):
        pktbuf.SharedDomain.attach(f"nope-{os.getpid()}")
    fd = os.memfd_create("not-a-domain")
    try:
        os.ftruncate(fd, 1 << 16)
        with pytest.raises(pktbuf.NoSuchDomain, match="not a pktbuf shared domain"):
            pktbuf.SharedDomain.attach(fd=fd)
    finally:
        os.close(fd)


def test_closed_domain_is_gone(h):
    name = h.name
    h.sd.close()
    with pytest.raises(pktbuf.NoSuchDomain):
        pktbuf.SharedDomain.attach(name)


def test_other_layout_version_is_a_clear_error(h):
    # the header says what a process of another pktbuf version would have written; the
    # check runs before anything is mapped, so attaching from this process tests it fully
    h.sd._hdr[W_VERSION] = LAYOUT_VERSION + 1
    try:
        for how in ({"name": h.name}, {"fd": h.sd.header_fd}):
            with pytest.raises(pktbuf.LayoutMismatch, match=f"layout version {LAYOUT_VERSION + 1}"):
                pktbuf.SharedDomain.attach(**how)
    finally:
        h.sd._hdr[W_VERSION] = LAYOUT_VERSION


def test_pools_created_after_attach_are_found_and_only_the_primary_creates(h):
    p, c = h.spawn(W.late_pool_user)
    assert h.recv(c)[0] == "ready"
    late = h.sd.pktmbuf_pool("late", 64, 8)
    c.send("go")
    _, n, refusals = h.recv(c)
    assert n == 64 and refusals == ["SharedDomainError", "SharedDomainError"]
    with pytest.raises(pktbuf.Busy, match="cannot close while processes"):
        late.close()
    c.send("bye")
    p.join(60)
    assert late.audit() == 64
    late.close()                    # nobody attached any more
    assert "late" not in h.sd.names()["pools"]


@pytest.mark.parametrize("forever", [None, math.inf])
def test_wait_peer_death_without_a_limit_waits_for_the_death(h, forever):
    # the child dies on its own half a second after it is ready, without detaching: with no
    # limit the wait must block until then (a wait that gave up at once would return [])
    p, c = h.spawn(W.die_after, 0.5)
    assert h.recv(c)[0] == "ready"
    assert h.sd.wait_peer_death(forever) == [p.pid]
    p.join(60)
    assert p.exitcode == 3
    assert h.sd.dead_peers() == [p.pid]
    rep, = h.sd.reap()
    assert rep.pid == p.pid and rep.lost == {}
    assert h.pool.audit() == N_MBUFS


def test_wait_peer_death_timeout_expires_while_the_peer_lives(h):
    p, c = h.spawn(W.survivor)
    assert h.recv(c)[0] == "ready"
    t0 = time.monotonic()
    assert h.sd.wait_peer_death(0.3) == []
    assert time.monotonic() - t0 >= 0.3          # it did wait (no upper bound: shared machine)
    assert h.sd.wait_peer_death(0) == []
    assert h.sd.peers()[p.pid]["alive"]
    c.send("work")                                 # and the peer is unharmed
    assert h.recv(c) == ("ok", True)
    c.send("stop")
    assert h.recv(c) == ("bye",)
    p.join(60)
    assert p.exitcode == 0 and h.sd.wait_peer_death(0) == []   # detached: not a death


def test_wait_peer_death_refuses_a_bad_timeout(h):
    # a negative limit would wait for ever in poll(2) and not at all in fdwait.readable:
    # refused before anything is waited on, with the domain and its peer untouched
    p, c = h.spawn(W.survivor)
    assert h.recv(c)[0] == "ready"
    before = (h.sd.lcores(), h.sd.peers())
    for bad in (-1, -0.001, -math.inf, math.nan, True, np.bool_(False), "1", b"1", [1]):
        with pytest.raises(pktbuf.InvalidArgument, match="timeout"):
            h.sd.wait_peer_death(bad)
        assert (h.sd.lcores(), h.sd.peers()) == before
    c.send("work")
    assert h.recv(c) == ("ok", True)
    c.send("stop")
    assert h.recv(c) == ("bye",)
    p.join(60)


def test_kill9_holding_mbufs_and_a_cache(h):
    surv, sc = h.spawn(W.survivor)
    assert h.recv(sc)[0] == "ready"
    victim, vc = h.spawn(W.hold_and_stop, 40, 10)
    _, vlc, held, cached = h.recv(vc)
    h.kill_at_stop(victim)
    assert (held, cached) == (30, 10)
    # detected through its pidfd, before anyone reaped (or even waited for) it
    assert h.sd.wait_peer_death(timeout=60) == [victim.pid]
    with pytest.raises(pktbuf.PeerDied) as e:
        h.sd.check_peers()
    assert e.value.pids == (victim.pid,)
    # its lcore cannot be taken before the reap
    probe, pc = h.start_plain(W.attach_probe, h.name, [vlc, vlc])
    pc.send("go")
    assert h.recv(pc)[0] == "PeerDied"
    # the survivor keeps working meanwhile
    sc.send("work")
    assert h.recv(sc) == ("ok", True)
    rep, = h.sd.reap()
    assert rep.pid == victim.pid and rep.lcores == [vlc]
    assert rep.cache_reclaimed == {"mbufs": 10}
    assert rep.held == {"mbufs": 30} and rep.lost == {"mbufs": 30}
    assert rep.cache_dropped == {} and rep.broken_rings == []
    assert h.sd.lost("mbufs") == 30
    assert h.sd.dead_peers() == []
    # after the reap the lcore is free again, and the survivor still works
    pc.send("go")
    assert h.recv(pc) == ("attached", vlc)
    sc.send("work")
    assert h.recv(sc) == ("ok", True)
    sc.send("stop")
    h.recv(sc)
    surv.join(60), probe.join(60), victim.join(60)
    # whole, except exactly the 30 the dead one held (still marked allocated)
    assert h.pool.audit() == N_MBUFS - 30
    assert h.pool.in_use_count == 30


def test_kill9_inside_a_cache_flush(h):
    victim, vc = h.spawn(W.flush_window_and_stop)
    _, vlc, held, cs = h.recv(vc)
    h.kill_at_stop(victim)
    victim.join(60)
    # the cache is not trusted as it stands: half of it is in the ring already
    line = h.sd.domain.cache_len_view()
    assert int(line[h.pool.id, vlc]) == cs
    rep, = h.sd.reap()
    # only the top half (never flushed) goes back; flushing all would put the bottom half
    # into the ring twice and the audit below would fail
    assert rep.cache_reclaimed == {"mbufs": cs - cs // 2}
    assert rep.cache_dropped == {} and rep.held == {"mbufs": held}
    assert h.pool.audit() == N_MBUFS - held
    assert h.sd.lost("mbufs") == held


def test_kill9_between_an_mpmc_rings_head_and_tail(h):
    h.sd.create_ring("mpmc", 64)
    surv, sc = h.spawn(W.survivor)
    assert h.recv(sc)[0] == "ready"
    victim, vc = h.spawn(W.mpmc_head_moved_and_stop)
    h.recv(vc)
    h.kill_at_stop(victim)
    victim.join(60)
    rep, = h.sd.reap()
    # the MP/MC ring is reported broken (anyone enqueueing there would wait forever);
    # the survivor's SP/SC ring and the pool's ring are not, and it keeps going
    assert rep.broken_rings == ["mpmc"]
    assert h.sd.broken_rings() == ["mpmc"]
    sc.send("work")
    assert h.recv(sc) == ("ok", True)
    sc.send("stop")
    h.recv(sc)
    surv.join(60)
    assert h.pool.audit() == N_MBUFS
