"""The software distributor: packets to workers by RSS over SPSC rings, against the plain
model (pktbuf/net/distrib/naive.py) and the RSS model (pktbuf/net/rss/naive.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf import Distributor, InvalidArgument, Rss
from pktbuf.net.distrib import naive
from pktbuf.net.rss import naive as rss_naive
from pktbuf.net.rss.thash import DEFAULT_RSS_KEY, SYMMETRIC_RSS_KEY

from tests.rss.vectors import v4_frame

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def pool(domain):
    p = pktbuf.PktmbufPool(4096, 0, domain=domain)
    yield p
    p.close(force=True)


def ip(i: int) -> bytes:
    return bytes([10, (i >> 16) & 255, (i >> 8) & 255, i & 255])


def flow_frame(f: int, reverse: bool = False) -> bytes:
    """A UDP/IPv4 frame of flow ``f`` (its own addresses and ports)."""
    src, dst, sp, dp = ip(f), ip(f + 100000), 1024 + f % 50000, 53 + f % 7
    if reverse:
        src, dst, sp, dp = dst, src, dp, sp
    return v4_frame(src, dst, sp, dp)


def model_hash(frame: bytes, key=DEFAULT_RSS_KEY) -> int:
    """The naive Toeplitz over the frame's 12-byte IPv4/UDP tuple (offsets of v4_frame)."""
    return rss_naive.toeplitz(key, frame[26:34] + frame[34:38])


def packets(pool, frames) -> np.ndarray:
    return np.array([pool.alloc().append_bytes(f).handle for f in frames], np.int32)


def drain_all(dist):
    return [list(map(int, dist.worker_burst(w, 4096))) for w in range(dist.workers)]


@settings(max_examples=60, deadline=None)
@given(workers=st.integers(1, 8), ring_size=st.sampled_from([2, 4, 8, 64]),
       bursts=st.lists(st.lists(st.integers(0, 40), min_size=0, max_size=40), min_size=1,
                       max_size=6),
       take=st.lists(st.integers(0, 20), min_size=6, max_size=6),
       reta_size=st.sampled_from([1, 8, 128]))
def test_matches_model(domain, workers, ring_size, bursts, take, reta_size):
    """Bursts of packets of random flows, workers taking some packets between bursts: each
    ring holds exactly the model's packets in the model's order, the refused come back in
    order, the counters agree, and every packet is accounted for once."""
    pool = pktbuf.PktmbufPool(2048, 0, domain=domain)
    rss = Rss(queues=workers, reta_size=reta_size)
    dist = Distributor(pool, workers, rss=rss, ring_size=ring_size)
    room = [ring_size - 1] * workers
    rings = [[] for _ in range(workers)]
    got = [[] for _ in range(workers)]
    refused_all = []
    try:
        for b, flows in enumerate(bursts):
            frames = [flow_frame(f) for f in flows]
            hs = packets(pool, frames)
            ids = list(map(int, hs))
            taken, refused, room = naive.burst(ids, [model_hash(f) for f in frames],
                                               list(rss.reta), room)
            k = dist.distribute(hs)
            assert k == len(ids) - len(refused)
            assert list(map(int, hs[k:])) == refused
            assert sorted(map(int, hs[:k])) == sorted(x for t in taken for x in t)
            for w in range(workers):
                rings[w] += taken[w]
            refused_all += refused
            pool.free_bulk(hs[k:])
            # each worker takes up to take[b] packets: the oldest of its ring
            for w in range(workers):
                out = list(map(int, dist.worker_burst(w, take[b % len(take)])))
                assert out == rings[w][:len(out)]
                assert len(out) == min(take[b % len(take)], len(rings[w]))
                rings[w] = rings[w][len(out):]
                room[w] += len(out)
                got[w] += out
        s = dist.stats()
        for w in range(workers):
            assert s[w]["pending"] == len(rings[w])
            assert s[w]["dequeued"] == len(got[w])
            assert s[w]["enqueued"] == len(got[w]) + len(rings[w])
        assert sum(x["ring_full"] for x in s) == len(refused_all)
        for w in range(workers):
            pool.free_bulk(np.array(got[w], np.int32))
    finally:
        dist.close()                  # frees what is still in the rings
        assert pool.audit() == pool.n
        pool.close()


def test_every_packet_once_and_flows_stay_together(pool):
    dist = Distributor(pool, 4, ring_size=4096)
    flows = [i % 97 for i in range(1000)]
    frames = [flow_frame(f) for f in flows]
    owner = {}
    seen = []
    for i in range(0, 1000, 250):
        hs = packets(pool, frames[i:i + 250])
        index = {int(x): i + j for j, x in enumerate(hs)}   # handle -> packet number
        assert dist.distribute(hs) == 250
        for w, out in enumerate(drain_all(dist)):
            for h in out:
                assert owner.setdefault(flows[index[h]], w) == w   # a flow stays on one worker
                seen.append(index[h])
            pool.free_bulk(np.array(out, np.int32))
    assert sorted(seen) == list(range(1000))                # every packet exactly once
    assert len(set(owner.values())) == 4                    # 97 flows reach every worker
    dist.close()
    assert pool.audit() == pool.n


def test_symmetric_key_sends_both_directions_to_one_worker(pool):
    rss = Rss(symmetric=True, queues=8)
    dist = Distributor(pool, 8, rss=rss)
    fwd = [flow_frame(f) for f in range(64)]
    rev = [flow_frame(f, reverse=True) for f in range(64)]
    hs = packets(pool, fwd + rev)
    assert dist.distribute(hs) == 128
    where = {}
    for w, out in enumerate(drain_all(dist)):
        for h in out:
            where[h] = w
    for i in range(64):
        assert where[int(hs[i])] == where[int(hs[64 + i])]
        assert where[int(hs[i])] == rss.queue(model_hash(fwd[i], SYMMETRIC_RSS_KEY))
    assert len(set(where.values())) > 1
    pool.free_bulk(hs)
    dist.close()
    assert pool.audit() == pool.n


def test_default_key_splits_directions(pool):
    """The control for the test above: with the default key some flows' two directions land on
    different workers (so the symmetric test can fail)."""
    dist = Distributor(pool, 8)
    hs = packets(pool, [flow_frame(f) for f in range(64)]
                 + [flow_frame(f, reverse=True) for f in range(64)])
    dist.distribute(hs)
    where = {h: w for w, out in enumerate(drain_all(dist)) for h in out}
    assert any(where[int(hs[i])] != where[int(hs[64 + i])] for i in range(64))
    pool.free_bulk(hs)
    dist.close()


def test_use_mbuf_hash(pool):
    """With use_mbuf_hash the hash a port set is used as is; a packet without one goes to
    reta[0]; nothing is hashed here (a hash that disagrees with the frame wins)."""
    rss = Rss(queues=4, reta_size=4)
    dist = Distributor(pool, 4, rss=rss, use_mbuf_hash=True)
    hs = packets(pool, [flow_frame(f) for f in range(8)])
    for i, h in enumerate(hs[:6]):
        pktbuf.Mbuf(pool.domain, int(h)).set(hash=i % 4, ol_flags=1 << 1)   # RX_RSS_HASH
    assert dist.distribute(hs) == 8
    out = drain_all(dist)
    assert out[0] == [int(hs[0]), int(hs[4]), int(hs[6]), int(hs[7])]
    assert out[1] == [int(hs[1]), int(hs[5])]
    assert out[2] == [int(hs[2])] and out[3] == [int(hs[3])]
    pool.free_bulk(hs)
    dist.close()


def test_bad_arguments_change_nothing(pool):
    with pytest.raises(InvalidArgument, match="names worker 3"):
        Distributor(pool, 2, rss=Rss(queues=4))
    for bad in (0, 65, -1, 2.5, "2"):
        with pytest.raises(InvalidArgument):
            Distributor(pool, bad)
    with pytest.raises(InvalidArgument, match="power of two"):
        Distributor(pool, 2, ring_size=100)
    with pytest.raises(InvalidArgument):
        Distributor(pool, 2, rss="default")
    with pytest.raises(InvalidArgument):
        Distributor(object(), 2)
    dist = Distributor(pool, 2)
    hs = packets(pool, [flow_frame(f) for f in range(4)])
    freed = pool.alloc().handle
    pool.free_bulk(np.array([freed], np.int32))
    for bad in (list(map(int, hs)), hs.astype(np.int64), np.append(hs, -1).astype(np.int32),
                np.append(hs, freed).astype(np.int32), np.append(hs, 1 << 30).astype(np.int32),
                np.zeros(1025, np.int32)):
        with pytest.raises(pktbuf.PktbufError):
            dist.distribute(bad)
        assert [s["enqueued"] for s in dist.stats()] == [0, 0]     # nothing was handed over
    with pytest.raises(InvalidArgument):
        dist.worker_burst(2)
    with pytest.raises(InvalidArgument):
        dist.worker_burst(-1)
    with pytest.raises(InvalidArgument):
        dist.fd                                                    # not shared
    assert dist.distribute(hs) == 4
    dist.close()
    with pytest.raises(InvalidArgument, match="closed"):
        dist.distribute(hs)
    assert pool.audit() == pool.n                                 # close() freed the 4


def test_worker_thread_takes_while_distributing(pool):
    """A worker thread consumes while the main thread distributes (the SPSC rings' acquire/
    release ordering): every packet arrives once, each flow in order."""
    dist = Distributor(pool, 2, ring_size=64)
    n = 20000
    got = [[], []]
    done = threading.Event()

    def worker(w):
        while True:
            out = dist.worker_burst(w, 32)
            if out.size:
                got[w].extend(pktbuf.Mbuf(pool.domain, int(h)).tobytes()[42:46] for h in out)
                pool.free_bulk(out)
            elif done.is_set() and dist.pending(w) == 0:
                return

    ts = [threading.Thread(target=worker, args=(w,)) for w in range(2)]
    for t in ts:
        t.start()
    sent = 0
    seq = 0
    while sent < n:
        frames = []
        for _ in range(32):
            f = flow_frame(seq % 5)
            frames.append(f[:42] + seq.to_bytes(4, "big") + f[46:])
            seq += 1
        hs = packets(pool, frames)
        k = dist.distribute(hs)
        while k < hs.size:                       # a full ring: retry the refused ones
            rest = hs[k:].copy()
            k2 = dist.distribute(rest)
            hs, k = rest, k2
        sent += 32
    done.set()
    for t in ts:
        t.join(60)
    seqs = sorted(int.from_bytes(x, "big") for w in got for x in w)
    assert seqs == list(range(n))
    for w in got:                                # per flow, in order
        per = {}
        for x in w:
            s = int.from_bytes(x, "big")
            per.setdefault(s % 5, []).append(s)
        assert all(v == sorted(v) for v in per.values())
    dist.close()
    assert pool.audit() == pool.n


CHILD = textwrap.dedent("""
    import json, sys
    import pktbuf
    from pktbuf import Distributor
    fd, nbytes = int(sys.argv[1]), int(sys.argv[2])
    dist = Distributor.attach(pktbuf.Domain(max_objects=16, max_ring_slots=16), fd, nbytes)
    out = [list(map(int, dist.worker_burst(w, 100))) for w in range(dist.workers)]
    print(json.dumps({"workers": dist.workers, "out": out}))
""")


def test_shared_distributor_in_another_process(pool):
    """A worker process maps the distributor's memfd and takes its ring (handles only: the
    mbufs themselves need a domain both processes map)."""
    dist = Distributor(pool, 3, shared=True)
    hs = packets(pool, [flow_frame(f) for f in range(30)])
    assert dist.distribute(hs) == 30
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", CHILD, str(dist.fd), str(dist.nbytes)], env=env,
                       pass_fds=(dist.fd,), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["workers"] == 3
    assert sorted(h for o in res["out"] for h in o) == sorted(map(int, hs))
    assert [s["dequeued"] for s in dist.stats()] == [len(o) for o in res["out"]]
    assert all(s["pending"] == 0 for s in dist.stats())
    pool.free_bulk(hs)
    dist.close()


def test_attach_refuses_what_is_not_a_distributor(pool):
    r = pktbuf.Ring(64, shared=True)
    with pytest.raises(InvalidArgument):
        Distributor.attach(pool.domain, r.fd, r.nbytes)
    with pytest.raises(InvalidArgument):
        Distributor.attach(pool.domain, 10_000, 4096)
