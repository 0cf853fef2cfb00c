"""The split-ring kernels against the naive model (tests/vhost/naive.py): random chains --
direct, indirect, crossing from one region into the next -- and broken ones (heads and
``next`` past the table, loops, WRITE the wrong way, addresses in a hole of the memory table,
bad indirect tables, an avail index that jumps past the ring).  Same frames, same guest
memory afterwards (used ring, written buffers), same failure code, every mbuf back."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.drivers.vhost import layout as L
from pktbuf.drivers.vhost.queue import queue_alloc
from pktbuf.drivers.vhost.rx import vhost_rx_burst
from pktbuf.drivers.vhost.tx import vhost_tx_burst

from .guest import GuestMem, SplitRing
from .naive import NaiveRing

SIZE = 1 << 18
HALF = SIZE // 2
HOLE = 1 << 16            # the second region's gpa starts this far past the first's end


@pytest.fixture(scope="module")
def pool():
    p = pktbuf.PktmbufPool(2048)
    yield p
    p.close()


class Setup:
    """Guest memory in two regions; ``gap``: a hole in gpa space between them, else adjacent
    (so a buffer may cross from one into the other)."""

    def __init__(self, n, gap, pool, **kw):
        self.mem = GuestMem(SIZE)
        g = self.mem.gpa
        g2 = g + HALF + (HOLE if gap else 0)
        self.g2 = g2
        self.table = [(g, HALF, self.mem.host(0)), (g2, HALF, self.mem.host(HALF))]
        self.naive_regions = [(g, HALF, 0), (g2, HALF, HALF)]
        self.ring = SplitRing(self.mem, n)
        self.q = queue_alloc()
        self.kw = kw
        self.ring.configure(self.q, pool=pool, regions=self.table, **kw)
        self.rng = random.Random(n)
        self.top = self.ring.used + 8 * n + 64

    def gpa(self, off):
        return self.mem.gpa + off if off < HALF else self.g2 + off - HALF

    def buf(self, ln, cross=False):
        """A guest buffer of ln bytes (offset, gpa); ``cross``: straddling the two regions."""
        if cross and ln >= 2:
            off = HALF - ln // 2
        else:
            off = self.mem.alloc(ln + 1, 8)
        return off, self.gpa(off)

    def naive(self, mem):
        r = self.ring
        return NaiveRing(mem, self.naive_regions, r.n, r.desc, r.avail, r.used,
                         hdr=self.kw.get("hdr", 12), mrg=self.kw.get("mrg", True),
                         indirect=self.kw.get("indirect", True))


CORRUPT = [None, None, None, "head", "next", "loop", "write", "hole", "indirect_len",
           "nested", "indirect_next", "avail_jump", "indirect_off"]


@st.composite
def chains(draw, write):
    n = draw(st.sampled_from([4, 8, 16, 32]))
    k = draw(st.integers(0, n))
    out = []
    for _ in range(k):
        nd = draw(st.integers(1, 4))
        out.append({"lens": [draw(st.integers(0, 300 if not write else 400)) for _ in range(nd)],
                    "indirect": draw(st.booleans()), "cross": draw(st.integers(0, 5)) == 0})
    return {"n": n, "chains": out, "corrupt": draw(st.sampled_from(CORRUPT)),
            "victim": draw(st.integers(0, max(0, k - 1))), "burst": draw(st.integers(1, 40)),
            "gap": draw(st.booleans()), "seed": draw(st.integers(0, 2**32 - 1)),
            "hdr": draw(st.sampled_from([10, 12])), "mrg": draw(st.booleans())}


def build(s: Setup, sc, write):
    """Lay the chains out in guest memory and make them available; returns the number made
    available."""
    r, rng = s.ring, random.Random(sc["seed"])
    slot = 0
    wflag = L.DESC_F_WRITE if write else 0
    made = 0
    for ci, ch in enumerate(sc["chains"]):
        bad = sc["corrupt"] if ci == sc["victim"] else None
        lens = ch["lens"]
        descs = []
        for j, ln in enumerate(lens):
            off, ga = s.buf(ln, cross=ch["cross"] and j == 0 and s.g2 == s.mem.gpa + HALF)
            if not write:
                s.mem.write(off, bytes(rng.getrandbits(8) for _ in range(ln)))
            descs.append([ga, ln, wflag])
        if bad == "write":
            descs[-1][2] ^= L.DESC_F_WRITE
        if bad == "hole":
            descs[0][0] = s.mem.gpa + HALF + 16        # inside the hole (or past the end)
            if s.g2 == s.mem.gpa + HALF:
                descs[0][0] = s.mem.gpa + SIZE + 64
            descs[0][1] = max(descs[0][1], 1)
        if ch["indirect"]:
            if slot >= r.n:
                break
            toff = s.mem.alloc(16 * len(descs), 16)
            for j, (ga, ln, fl) in enumerate(descs):
                more = j + 1 < len(descs)
                nxt = j + 1 if more else 0
                if bad == "next" and not more:
                    fl, nxt = fl | L.DESC_F_NEXT, len(descs) + 3
                if bad == "loop" and not more:
                    fl, nxt = fl | L.DESC_F_NEXT, 0
                if bad == "nested" and j == 0:
                    fl = L.DESC_F_INDIRECT
                    ga, ln = s.gpa(toff), 16
                    more = False
                r.set_desc(j, ga, ln, fl | (L.DESC_F_NEXT if more else 0), nxt, table=toff)
            tlen = 16 * len(descs)
            tflags = L.DESC_F_INDIRECT
            if bad == "indirect_len":
                tlen = tlen + 8
            if bad == "indirect_next":
                tflags |= L.DESC_F_NEXT
            tga = s.gpa(toff)
            if bad == "indirect_off":
                tga = s.mem.gpa + SIZE + (HOLE if s.g2 != s.mem.gpa + HALF else 0) + 4096
            r.set_desc(slot, tga, tlen, tflags, 0)
            head = slot
            slot += 1
        else:
            if slot + len(descs) > r.n:
                break
            head = slot
            for j, (ga, ln, fl) in enumerate(descs):
                more = j + 1 < len(descs)
                nxt = slot + 1 if more else 0
                if bad == "next" and not more:
                    fl, nxt = fl | L.DESC_F_NEXT, r.n + 5
                if bad == "loop" and not more:
                    fl, nxt = fl | L.DESC_F_NEXT, head
                if bad == "nested" and j == 0:
                    pass
                r.set_desc(slot, ga, ln, fl | (L.DESC_F_NEXT if more else 0), nxt)
                slot += 1
        if bad == "head":
            head = r.n + (sc["seed"] % 7)
        r.make_avail(head)
        made += 1
    if sc["corrupt"] == "avail_jump":
        r.set_avail_idx(r.avail_idx + r.n + 1)
    return made


def kernel_failure(q):
    return int(q.st[L.QS_ERR]) or None


@settings(max_examples=150)
@given(chains(write=False))
def test_dequeue_matches_model(pool, sc):
    s = Setup(sc["n"], sc["gap"], pool, hdr=sc["hdr"])
    build(s, sc, write=False)
    model_mem = s.mem.a.copy()
    naive = s.naive(model_mem)
    want = naive.dequeue(sc["burst"])
    before = pool.avail_count
    out = np.zeros(64, np.int32)
    k = vhost_rx_burst(pool.domain.state, s.q, 0, out, sc["burst"])
    got = [pool.mbuf(int(h)).tobytes() for h in out[:k]]
    for h in out[:k]:
        m = pool.mbuf(int(h))
        assert m.pkt_len == len(m.tobytes())
    pool.free_bulk(out[:k])
    assert pool.avail_count == before
    assert got == want
    assert kernel_failure(s.q) == naive.failed
    assert int(s.q.st[L.QS_ERRORS]) == naive.errors
    assert int(s.q.st[L.QS_LAST_AVAIL]) == naive.last
    assert np.array_equal(s.mem.a, model_mem), _debug_diff(s.mem.a, model_mem)
    assert (s.q.st[L.QS_UP] == 1) == (naive.failed is None)


@settings(max_examples=150)
@given(chains(write=True), st.lists(st.integers(1, 1600), min_size=0, max_size=20),
       st.integers(0, 3))
def test_enqueue_matches_model(pool, sc, sizes, segs):
    s = Setup(sc["n"], sc["gap"], pool, hdr=sc["hdr"], mrg=sc["mrg"])
    build(s, sc, write=True)
    rng = random.Random(sc["seed"])
    frames = [bytes(rng.getrandbits(8) for _ in range(z)) for z in sizes]
    total = pool.avail_count
    handles = []
    for f in frames:                      # some frames as chains of up to segs + 1 mbufs
        cut = sorted(rng.sample(range(1, len(f)), min(segs, len(f) - 1))) if len(f) > 1 else []
        parts = [f[a:b] for a, b in zip([0] + cut, cut + [len(f)])]
        head = pool.alloc().append_bytes(parts[0])
        for p in parts[1:]:
            head.chain(pool.alloc().append_bytes(p))
        handles.append(int(head))
    model_mem = s.mem.a.copy()
    naive = s.naive(model_mem)
    want = naive.enqueue(frames)
    pk = np.array(handles, np.int32)
    k = vhost_tx_burst(pool.domain.state, s.q, 0, pk, len(pk))
    pool.free_bulk(pk[k:])                # the kernel freed what it sent, the rest is ours
    assert k == want
    assert pool.avail_count == total
    assert kernel_failure(s.q) == naive.failed
    assert int(s.q.st[L.QS_LAST_AVAIL]) == naive.last
    assert int(s.q.st[L.QS_MISSED]) == len(frames) - k
    assert np.array_equal(s.mem.a, model_mem), _debug_diff(s.mem.a, model_mem)


def _debug_diff(a, b):
    d = np.nonzero(a != b)[0]
    return [(int(i), int(a[i]), int(b[i])) for i in d[:10]]


EXPECT = {"head": L.V_HEAD, "next": L.V_NEXT, "loop": L.V_LOOP, "write": L.V_WRITE,
          "hole": L.V_ADDR, "indirect_len": L.V_INDIRECT_LEN, "nested": L.V_NESTED,
          "indirect_next": L.V_INDIRECT, "avail_jump": L.V_AVAIL_IDX, "indirect_off": L.V_ADDR}


@pytest.mark.parametrize("write", [False, True], ids=["dequeue", "enqueue"])
@pytest.mark.parametrize("bad", sorted(EXPECT))
def test_each_violation_fails_the_ring_with_its_code(pool, bad, write):
    """One good chain, then the broken one: the good one is delivered (and published), the
    ring fails with the violation's code, and a burst on the failed ring does nothing."""
    indirect = bad in ("indirect_len", "nested", "indirect_next", "indirect_off")
    sc = {"n": 8, "chains": [{"lens": [100], "indirect": False, "cross": False},
                             {"lens": [60, 70], "indirect": indirect, "cross": False}],
          "corrupt": bad, "victim": 1, "burst": 8, "gap": True, "seed": 1, "hdr": 12,
          "mrg": False}
    s = Setup(8, True, pool, hdr=12, mrg=False)
    build(s, sc, write)
    out = np.zeros(8, np.int32)
    if write:
        pk = np.array([int(pool.alloc().append_bytes(b"x" * 60)) for _ in range(2)], np.int32)
        k = vhost_tx_burst(pool.domain.state, s.q, 0, pk, 2)
        pool.free_bulk(pk[k:])
    else:
        k = vhost_rx_burst(pool.domain.state, s.q, 0, out, 8)
        pool.free_bulk(out[:k])
    assert int(s.q.st[L.QS_ERR]) == EXPECT[bad]
    assert s.q.st[L.QS_UP] == 0
    assert k == (0 if bad == "avail_jump" else 1)
    assert s.ring.take_used() == ([] if bad == "avail_jump" else [(0, 0 if not write else 72)])
    assert vhost_rx_burst(pool.domain.state, s.q, 0, out, 8) == 0
    assert pool.avail_count == pool.n
