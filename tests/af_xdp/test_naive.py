"""The kernels against the plain-Python model (naive.py), with the kernel's side of the rings
played by the test: ring index arithmetic, UMEM address checks, and Rx/Tx bursts over rings
in ordinary memory whose descriptors the test writes -- including addresses no kernel should
return, which must be counted and never followed, and lose no mbuf."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.drivers.af_xdp.layout import (AF_XDP_RXQ, AF_XDP_TXQ, AF_XDP_UMEM, OWN_FILL, OWN_TX,
                                          R_CONS, R_DESC, R_FLAGS, R_PROD, R_SIZE, RC_FD, RC_FILL,
                                          RC_RX, RC_TARGET, RC_UMEM, RS_BAD_DESC, RS_POSTED, TC_COMP,
                                          TC_FD, TC_TX, TC_UMEM, TS_BAD_COMP, TS_COPIED, TS_INFLIGHT,
                                          TS_NOT_OWNED,
                                          U_CHUNK, U_MAX_LEN, U_NB_OBJ, U_OBJ_BASE, U_POOL, U_PRIV,
                                          U_RX_OFF, U_STRIDE)
from pktbuf.drivers.af_xdp.ring import ring_entries, ring_free
from pktbuf.drivers.af_xdp.rx import af_xdp_fill, af_xdp_rx_burst, af_xdp_rx_release
from pktbuf.drivers.af_xdp.tx import af_xdp_complete, af_xdp_tx_burst, af_xdp_tx_release
from pktbuf.drivers.af_xdp.umem import umem_rx_frame, umem_tx_frame

from . import naive

U32 = 1 << 32
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@given(st.integers(0, U32 - 1), st.integers(0, 4096), st.sampled_from([8, 64, 2048]))
def test_ring_arithmetic(cons, k, size):
    prod = (cons + k) % U32                    # wraps around 2**32
    assert ring_entries(prod, cons) == naive.entries(prod, cons) == k
    assert ring_free(size, prod, cons) == naive.free(size, prod, cons)


class FakeRing:
    """A ring in ordinary memory: producer, consumer and flags words on their own cache
    lines, then the descriptors."""

    def __init__(self, size, entry):
        self.words = np.zeros(48, np.uint32)
        self.desc = np.zeros(size * entry // 8, np.uint64)
        self.size = size

    def put(self, cfg, base):
        a = self.words.ctypes.data
        cfg[base + R_PROD] = a
        cfg[base + R_CONS] = a + 64
        cfg[base + R_FLAGS] = a + 128
        cfg[base + R_DESC] = self.desc.ctypes.data
        cfg[base + R_SIZE] = self.size

    prod = property(lambda s: int(s.words[0]))
    cons = property(lambda s: int(s.words[16]))


class Sim:
    """One queue pair over fake rings, on ``pool``."""

    def __init__(self, pool, size=64, target=32):
        self.pool = pool
        self.fill, self.rx = FakeRing(size, 8), FakeRing(size, 16)
        self.tx, self.comp = FakeRing(size, 16), FakeRing(size, 8)
        u = self.umem = AF_XDP_UMEM.create({"own": pool.n})
        for k, v in ((U_POOL, pool.id), (U_OBJ_BASE, pool.obj_base), (U_NB_OBJ, pool.n),
                     (U_STRIDE, pool.elt_size), (U_PRIV, pool.priv_size),
                     (U_CHUNK, min(pool.data_room, 4096)), (U_RX_OFF, 256),
                     (U_MAX_LEN, 1514)):
            u.cfg[k] = v
        rx = self.rxq = AF_XDP_RXQ.create({"scr": 1024})
        rx.cfg[RC_FD] = -1
        self.fill.put(rx.cfg, RC_FILL)
        self.rx.put(rx.cfg, RC_RX)
        rx.cfg[RC_UMEM] = u.address
        rx.cfg[RC_TARGET] = target
        tx = self.txq = AF_XDP_TXQ.create({"scr_comp": 1024})
        tx.cfg[TC_FD] = -1
        self.tx.put(tx.cfg, TC_TX)
        self.comp.put(tx.cfg, TC_COMP)
        tx.cfg[TC_UMEM] = u.address
        self.model = naive.Umem(pool.n, pool.elt_size, pool.priv_size,
                                min(pool.data_room, 4096))
        self.dom = pool.domain.state

    def buf_addr(self, k):
        return k * self.pool.elt_size + self.pool.priv_size


@pytest.fixture
def pool():
    p = pktbuf.PktmbufPool(512, 0, priv_size=64, name="afxdp-sim")
    yield p
    p.close(force=True)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 511), st.integers(0, (1 << 64) - 1),
                          st.integers(-2, 3000)), max_size=40),
       st.integers(0, 2))
def test_umem_mapping_matches_model(pool, probes, own):
    s = Sim(pool)
    rng = np.random.default_rng(len(probes))
    states = rng.integers(0, 3, pool.n)
    s.umem.own[:] = states
    s.model.own = list(states)
    for k, junk, ln in probes:
        for addr in (s.buf_addr(k) | (256 << 48), s.buf_addr(k) + ln % 2300, junk,
                     junk & ((1 << 48) - 1), s.buf_addr(k) + 1):
            kk, off = umem_rx_frame(s.umem, np.int64(np.uint64(addr).view(np.int64)), ln, own)
            want = s.model.rx_frame(addr, ln, own)
            assert (kk, off) == (want if want is not None else (-1, 0))
            kt = umem_tx_frame(s.umem, np.int64(np.uint64(addr).view(np.int64)), own)
            wt = s.model.tx_frame(addr, own)
            assert kt == (wt if wt is not None else -1)


@SETTINGS
@given(st.lists(st.one_of(
    st.tuples(st.just("good"), st.integers(60, 1514), st.integers(0, 64)),
    st.tuples(st.just("junk"), st.integers(0, (1 << 64) - 1), st.integers(0, 3000)),
    st.tuples(st.just("dup"), st.integers(60, 1514), st.integers(0, 64)),
    st.tuples(st.just("long"), st.integers(1921, 4000), st.integers(0, 64))),
    min_size=1, max_size=30))
def test_rx_over_fake_rings(pool, script):
    """The test plays the kernel: it takes addresses off the fill ring and returns them on the
    Rx ring (data at +256), mixed with junk addresses, a posted frame named twice, and frames
    longer than their chunk.  The burst delivers exactly the good ones with the right offset
    and length, counts the rest, and after release every mbuf is back."""
    s = Sim(pool, size=64, target=32)
    dom = s.dom
    assert af_xdp_fill(dom, s.rxq, 0, 32) == 32
    assert s.fill.prod == 32 and int(s.rxq.st[RS_POSTED]) == 32
    posted = [int(a) for a in s.fill.desc[:32]]
    assert all(s.umem.own[(a - pool.priv_size) // pool.elt_size] == OWN_FILL for a in posted)
    used = 0
    want, bad = [], 0
    slot = 0
    last = None
    for kind, a, b in script:
        if kind in ("good", "long"):
            if used == len(posted):
                continue
            addr = posted[used]
            used += 1
            s.fill.words[16] = used                    # the kernel consumed it
            d = (addr | ((256 + b) << 48), a)
            if kind == "good" and 256 + b + a <= s.model.chunk:
                want.append(((addr - pool.priv_size) // pool.elt_size, 256 + b, a))
                last = d
            else:
                bad += 1
        elif kind == "dup":
            if last is None:
                continue
            d = last
            bad += 1
        else:
            d = (a, b)
            if s.model.rx_frame(a, b, 1) is not None and a >> 48 == 0:
                continue                               # a junk that happens to be valid
            bad += 1
        s.rx.desc[2 * slot] = np.uint64(d[0])
        s.rx.desc[2 * slot + 1] = np.uint64(d[1])
        slot += 1
    s.rx.words[0] = slot
    out = np.empty(64, np.int32)
    got = af_xdp_rx_burst(dom, s.rxq, 0, out, 64)
    assert s.rx.cons == slot
    assert got == len(want)
    assert int(s.rxq.st[RS_BAD_DESC]) == bad
    mb = dom.mb
    for h, (k, off, ln) in zip(out[:got], want):
        assert h == pool.obj_base + k
        assert mb[h]["data_off"] == off and mb[h]["data_len"] == ln == mb[h]["pkt_len"]
    pool.free_bulk(out[:got])
    af_xdp_rx_release(dom, s.rxq, 0)
    assert int(s.rxq.st[RS_POSTED]) == 0
    assert pool.audit() == pool.n


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["own", "foreign", "chain", "clone"]),
                          st.integers(14, 1514)), min_size=1, max_size=40),
       st.lists(st.integers(0, (1 << 64) - 1), max_size=5))
def test_tx_over_fake_rings(pool, pkts, junk):
    """Packets of the UMEM's pool go on the Tx ring where they are; others (another pool, a
    chain, an indirect clone) are copied into a UMEM frame.  The descriptors name the right
    bytes; completions (the test's, plus junk addresses) free exactly the frames sent."""
    other = pktbuf.PktmbufPool(256, 0, name="afxdp-other")
    try:
        s = Sim(pool, size=64)
        dom = s.dom
        hs, datas, keep = [], [], []
        rng = np.random.default_rng(len(pkts))
        for kind, ln in pkts:
            data = rng.integers(0, 256, ln, dtype=np.uint8).tobytes()
            if kind == "own":
                m = pool.alloc()
                m.append_bytes(data)
            elif kind == "foreign":
                m = other.alloc()
                m.append_bytes(data)
            elif kind == "chain":
                m = pool.alloc()
                m.append_bytes(data[:ln // 2])
                t = pool.alloc()
                t.append_bytes(data[ln // 2:])
                m.chain(t)
            else:
                d = pool.alloc()
                d.append_bytes(data)
                m = d.clone(other)
                keep.append(d)
            hs.append(m.handle)
            datas.append(data)
        a = np.array(hs, np.int32)
        n = af_xdp_tx_burst(dom, s.txq, 0, a, a.size)
        assert n == min(len(hs), 64)
        assert s.tx.prod == n
        direct = sum(1 for k, _ in pkts[:n] if k == "own")
        assert int(s.txq.st[TS_COPIED]) == n - direct
        region = pool.region.array
        for i in range(n):
            addr, ln = int(s.tx.desc[2 * i]), int(s.tx.desc[2 * i + 1])
            assert bytes(region[addr:addr + ln]) == datas[i]
            k = (addr - pool.priv_size) // pool.elt_size
            assert s.umem.own[k] == OWN_TX
        for d in keep:
            d.free()                     # the clones sent were copied: their buffers are free
        # the kernel completes them all, and names some junk too
        comp = [int(s.tx.desc[2 * i]) for i in range(n)] + junk
        comp = comp[:64]
        s.comp.desc[:len(comp)] = np.array(comp, np.uint64)
        s.comp.words[0] = len(comp)
        freed = af_xdp_complete(dom, s.txq, 0)
        assert freed == n
        assert int(s.txq.st[TS_BAD_COMP]) == len(comp) - n
        assert int(s.txq.st[TS_INFLIGHT]) == 0
        pool.free_bulk(a[n:])
        assert af_xdp_tx_release(dom, s.txq, 0) == 0
        assert pool.audit() == pool.n
        assert other.audit() == other.n
    finally:
        other.close(force=True)


def test_tx_ring_full_keeps_the_rest(pool):
    """A full Tx ring takes what fits; the rest stay the caller's; release after a close
    (the kernel never completed them) returns every frame."""
    s = Sim(pool, size=8)
    a = pool.alloc_bulk(20)
    for h in a:
        pool.mbuf(int(h)).append_bytes(bytes(60))
    assert af_xdp_tx_burst(s.dom, s.txq, 0, a, a.size) == 8
    assert af_xdp_tx_burst(s.dom, s.txq, 0, a[8:], 12) == 0
    assert sum(1 for k in range(pool.n) if s.umem.own[k] == OWN_TX) == 8
    pool.free_bulk(a[8:])
    assert af_xdp_tx_release(s.dom, s.txq, 0) == 8
    assert pool.audit() == pool.n


def test_tx_refuses_frames_the_kernel_holds(pool):
    """A handle whose buffer is posted for Rx is not the caller's: Tx takes it, counts it,
    and neither posts nor frees it; it goes back with the Rx frames at release."""
    s = Sim(pool, size=64, target=8)
    assert af_xdp_fill(s.dom, s.rxq, 0, 8) == 8
    posted = [pool.obj_base + (int(a) - pool.priv_size) // pool.elt_size
              for a in s.fill.desc[:8]]
    mine = pool.alloc()
    mine.append_bytes(bytes(60))
    a = np.array([posted[0], mine.handle], np.int32)
    assert af_xdp_tx_burst(s.dom, s.txq, 0, a, 2) == 2
    assert s.tx.prod == 1 and int(s.tx.desc[1]) == 60
    assert int(s.txq.st[TS_NOT_OWNED]) == 1
    assert s.umem.own[posted[0] - pool.obj_base] == OWN_FILL
    assert af_xdp_tx_release(s.dom, s.txq, 0) == 1
    assert af_xdp_rx_release(s.dom, s.rxq, 0) == 8
    assert pool.audit() == pool.n
