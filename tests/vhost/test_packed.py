"""The packed-ring kernels against the naive model (tests/vhost/naive.py ``NaivePacked``):
random chains over consecutive slots -- wrapping round the ring end, direct or indirect,
crossing from one region into the next -- and broken ones.  Same frames, same guest memory
(the used descriptors, the written buffers), same failure code, every mbuf back."""
from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.drivers.vhost import layout as L
from pktbuf.drivers.vhost.queue import queue_alloc
from pktbuf.drivers.vhost.rx import vhost_rx_burst
from pktbuf.drivers.vhost.tx import vhost_tx_burst

from .guest import GuestMem, PackedRing
from .naive import NaivePacked

SIZE = 1 << 18
HALF = SIZE // 2
CORRUPT = [None, None, None, "write", "hole", "indirect_len", "nested", "indirect_next",
           "loop", "stale"]
EXPECT = {"write": L.V_WRITE, "hole": L.V_ADDR, "indirect_len": L.V_INDIRECT_LEN,
          "nested": L.V_NESTED, "indirect_next": L.V_INDIRECT, "loop": L.V_LOOP}


@pytest.fixture(scope="module")
def pool():
    p = pktbuf.PktmbufPool(2048)
    yield p
    p.close()


@st.composite
def scenario(draw, write):
    n = draw(st.sampled_from([3, 4, 7, 8, 16]))          # packed: any size
    chains = [{"lens": [draw(st.integers(0, 400 if write else 300))
                        for _ in range(draw(st.integers(1, 3)))],
               "indirect": draw(st.booleans()), "cross": draw(st.integers(0, 4)) == 0}
              for _ in range(draw(st.integers(0, 8)))]
    return {"n": n, "chains": chains, "corrupt": draw(st.sampled_from(CORRUPT)),
            "victim": draw(st.integers(0, 7)), "burst": draw(st.integers(1, 40)),
            "skip": draw(st.integers(0, 20)), "seed": draw(st.integers(0, 2**32 - 1)),
            "hdr": draw(st.sampled_from([10, 12])), "mrg": draw(st.booleans())}


def setup(pool, sc, write):
    mem = GuestMem(SIZE)
    g2 = mem.gpa + HALF                         # adjacent: buffers may cross
    table = [(mem.gpa, HALF, mem.host(0)), (g2, HALF, mem.host(HALF))]
    ring = PackedRing(mem, sc["n"])
    q = queue_alloc()
    ring.configure(q, pool=pool, regions=table, hdr=sc["hdr"], mrg=sc["mrg"])
    rng = random.Random(sc["seed"])
    wflag = L.DESC_F_WRITE if write else 0
    # start somewhere round the ring: slots already used (both sides moved on)
    for _ in range(sc["skip"] % (2 * sc["n"])):
        ring.slot += 1
        if ring.slot == ring.n:
            ring.slot, ring.wrap = 0, ring.wrap ^ 1
    ring.used_slot, ring.used_wrap = ring.slot, ring.wrap
    st_ = q.st
    st_[L.QS_LAST_AVAIL], st_[L.QS_AVAIL_WRAP] = ring.slot, ring.wrap
    st_[L.QS_USED_IDX], st_[L.QS_USED_WRAP] = ring.slot, ring.wrap
    start = (ring.slot, ring.wrap)
    used = 0
    for ci, ch in enumerate(sc["chains"]):
        bad = sc["corrupt"] if ci == sc["victim"] % max(1, len(sc["chains"])) else None
        descs = []
        for j, ln in enumerate(ch["lens"]):
            off = HALF - ln // 2 if ch["cross"] and j == 0 and ln >= 2 else mem.alloc(ln + 1, 8)
            if not write:
                mem.write(off, bytes(rng.getrandbits(8) for _ in range(ln)))
            ga = mem.gpa + off if off < HALF else g2 + off - HALF
            descs.append([ga, ln, wflag])
        if bad == "write":
            descs[-1][2] ^= L.DESC_F_WRITE
        if bad == "hole":
            descs[0][0], descs[0][1] = mem.gpa + SIZE + 64, max(descs[0][1], 1)
        if ch["indirect"] or bad in ("indirect_len", "nested", "indirect_next"):
            toff = mem.alloc(16 * len(descs), 16)
            for j, (ga, ln, fl) in enumerate(descs):
                if bad == "nested" and j == 0:
                    fl, ga, ln = L.DESC_F_INDIRECT, mem.gpa + toff, 16
                ring.set_desc(j, ga, ln, 0, fl, table=toff)
            tlen = 16 * len(descs) + (8 if bad == "indirect_len" else 0)
            tfl = L.DESC_F_INDIRECT | (L.DESC_F_NEXT if bad == "indirect_next" else 0)
            chain = [(mem.gpa + toff, tlen, tfl)]
        else:
            chain = [(ga, ln, fl | (L.DESC_F_NEXT if j + 1 < len(descs) else 0))
                     for j, (ga, ln, fl) in enumerate(descs)]
        if used + len(chain) > ring.n:
            break
        ring.post(chain, stale=bad == "stale")
        used += len(chain)
    if sc["corrupt"] == "loop" and used:
        for s in range(ring.n):                # NEXT on every descriptor: a chain never ends
            off = ring.desc + 16 * s + 14
            fl = struct.unpack("<H", mem.read(off, 2))[0]
            mem.write(off, struct.pack("<H", fl | L.DESC_F_NEXT))
    return mem, ring, q, table, start


def naive_for(mem_copy, ring, sc, start):
    nv = NaivePacked(mem_copy, [(ring.mem.gpa, HALF, 0), (ring.mem.gpa + HALF, HALF, HALF)],
                     ring.n, ring.desc, hdr=sc["hdr"], mrg=sc["mrg"])
    nv.slot, nv.wrap = start
    nv.used_slot, nv.used_wrap = start
    return nv


@settings(max_examples=150)
@given(scenario(write=False))
def test_packed_dequeue_matches_model(pool, sc):
    mem, ring, q, table, start = setup(pool, sc, False)
    model = mem.a.copy()
    nv = naive_for(model, ring, sc, start)
    want = nv.dequeue(sc["burst"])
    out = np.zeros(64, np.int32)
    k = vhost_rx_burst(pool.domain.state, q, 0, out, sc["burst"])
    got = [pool.mbuf(int(h)).tobytes() for h in out[:k]]
    pool.free_bulk(out[:k])
    assert pool.avail_count == pool.n
    assert got == want
    assert (int(q.st[L.QS_ERR]) or None) == nv.failed
    assert int(q.st[L.QS_ERRORS]) == nv.errors
    assert (int(q.st[L.QS_LAST_AVAIL]), int(q.st[L.QS_AVAIL_WRAP])) == (nv.slot, nv.wrap)
    assert np.array_equal(mem.a, model)


@settings(max_examples=150)
@given(scenario(write=True), st.lists(st.integers(1, 1600), max_size=12))
def test_packed_enqueue_matches_model(pool, sc, sizes):
    mem, ring, q, table, start = setup(pool, sc, True)
    rng = random.Random(sc["seed"])
    frames = [bytes(rng.getrandbits(8) for _ in range(z)) for z in sizes]
    hs = []
    for f in frames:
        m = pool.alloc().append_bytes(f[:len(f) // 2 or 1])
        if len(f) > 1:
            m.chain(pool.alloc().append_bytes(f[len(f) // 2:]))
        hs.append(int(m))
    model = mem.a.copy()
    nv = naive_for(model, ring, sc, start)
    want = nv.enqueue(frames)
    pk = np.array(hs, np.int32)
    k = vhost_tx_burst(pool.domain.state, q, 0, pk, len(pk))
    pool.free_bulk(pk[k:])
    assert pool.avail_count == pool.n
    assert k == want
    assert (int(q.st[L.QS_ERR]) or None) == nv.failed
    assert (int(q.st[L.QS_LAST_AVAIL]), int(q.st[L.QS_AVAIL_WRAP])) == (nv.slot, nv.wrap)
    assert (int(q.st[L.QS_USED_IDX]), int(q.st[L.QS_USED_WRAP])) == (nv.used_slot, nv.used_wrap)
    assert np.array_equal(mem.a, model)


@pytest.mark.parametrize("bad", sorted(EXPECT))
def test_each_packed_violation_fails_the_ring(pool, bad):
    sc = {"n": 8, "chains": [{"lens": [100], "indirect": False, "cross": False},
                             {"lens": [60, 70], "indirect": False, "cross": False}],
          "corrupt": bad, "victim": 1, "burst": 8, "skip": 0, "seed": 1, "hdr": 12,
          "mrg": False}
    mem, ring, q, table, start = setup(pool, sc, False)
    out = np.zeros(8, np.int32)
    k = vhost_rx_burst(pool.domain.state, q, 0, out, 8)
    pool.free_bulk(out[:k])
    assert int(q.st[L.QS_ERR]) == EXPECT[bad]
    assert q.st[L.QS_UP] == 0
    assert k == (0 if bad == "loop" else 1)
    assert ring.take_used() == ([] if bad == "loop" else [(0, 0)])
    assert pool.avail_count == pool.n


def test_stale_wrap_bits_are_not_available(pool):
    sc = {"n": 4, "chains": [{"lens": [100], "indirect": False, "cross": False}],
          "corrupt": "stale", "victim": 0, "burst": 8, "skip": 0, "seed": 1, "hdr": 12,
          "mrg": False}
    mem, ring, q, table, start = setup(pool, sc, False)
    out = np.zeros(8, np.int32)
    assert vhost_rx_burst(pool.domain.state, q, 0, out, 8) == 0
    assert q.st[L.QS_UP] == 1 and q.st[L.QS_ERR] == 0
