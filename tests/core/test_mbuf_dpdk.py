"""One test per applicable case of DPDK's app/test/test_mbuf.c (mbuf_autotest).

Setup as upstream: a pool of 128 mbufs, cache 32, data room 2048 (+ headroom); a second pool
with a 128-byte private area and data room 0.  Cases that need features pktbuf does not have
(Rx/Tx offload flag names, rte_validate_tx_offload, external buffers) are listed at the end.
"""
import threading

import numpy as np
import pytest
from numba import njit

import pktbuf
from pktbuf import (ChainTooLong, DoubleFree, InvalidArgument, NoRoom, OutOfRange, PktmbufPool,
                    PoolExhausted, SanityCheckError)
from pktbuf.buf.mbuf import check as C
from pktbuf import DynBusy, DynExists
from pktbuf.buf.mbuf.layout import HEADROOM
from pktbuf.kernels import load_acquire, pktmbuf_free, ring_mc_dequeue_burst
from pktbuf.buf.mbuf.offload import mbuf_tx_offload, tx_offload_unpack

NB_MBUF = 128
MBUF_TEST_DATA_LEN = 1464
MBUF_TEST_DATA_LEN2 = 50
MBUF_TEST_HDR1_LEN = 20
MBUF_TEST_HDR2_LEN = 30
MBUF_TEST_ALL_HDRS_LEN = MBUF_TEST_HDR1_LEN + MBUF_TEST_HDR2_LEN


@pytest.fixture
def pool(domain):
    return PktmbufPool(NB_MBUF, 32, 2048 + HEADROOM, domain=domain, name="test_pool")


@pytest.fixture
def pool2(domain):
    return PktmbufPool(NB_MBUF, 32, 0, priv_size=128, domain=domain, name="test_pool2")


def test_mbuf_dyn(pool):
    dyn = pool.domain.dyn
    off = dyn.register_field("test-dynfield", 1, 1)
    assert dyn.register_field("test-dynfield", 1, 1) == off           # same params: same offset
    with pytest.raises(DynExists):
        dyn.register_field("test-dynfield", 2, 1)
    off2 = dyn.register_field("test-dynfield2", 4, 4)
    assert off2 % 4 == 0 and off2 != off
    off3 = dyn.register_field("test-dynfield3", 8, 8, offset=120)
    assert off3 == 120
    with pytest.raises(InvalidArgument):
        dyn.register_field("fail", 256, 1)
    with pytest.raises(InvalidArgument):
        dyn.register_field("fail", 1, 3)
    with pytest.raises(DynBusy):
        dyn.register_field("fail", 1, 1, offset=off3)
    with pytest.raises(InvalidArgument):
        dyn.register_field("fail", 1, 1, flags=1)
    bit = dyn.register_flag("test-dynflag")
    assert dyn.register_flag("test-dynflag") == bit and 23 <= bit <= 40
    bit2 = dyn.register_flag("test-dynflag2", bitnum=23)
    assert bit2 == 23
    with pytest.raises(DynBusy):
        dyn.register_flag("fail", bitnum=23)
    with pytest.raises(InvalidArgument):
        dyn.register_flag("fail", flags=1)
    m = pool.alloc()
    m.set_dynfield(off, 1, 1)
    m.set_dynfield(off2, 4, 0x12345678)
    m.set_dynfield(off3, 8, 0x0102030405060708)
    assert (m.dynfield(off, 1), m.dynfield(off2, 4), m.dynfield(off3, 8)) == \
        (1, 0x12345678, 0x0102030405060708)
    m.free()


@pytest.mark.parametrize("run", [1, 2])
def test_pktmbuf_pool(pool, run):
    ms = [pool.alloc() for _ in range(NB_MBUF)]
    with pytest.raises(PoolExhausted):
        pool.alloc()
    with pytest.raises(PoolExhausted):
        ms[0].clone(pool)
    for m in ms:
        m.free()
    assert pool.avail_count == NB_MBUF and pool.audit() == NB_MBUF


def test_pktmbuf_pool_bulk(domain):
    p0 = PktmbufPool(NB_MBUF, 0, 2048 + HEADROOM, domain=domain)
    p1 = PktmbufPool(NB_MBUF, 0, 2048 + HEADROOM, domain=domain)
    # one alloc_bulk of the whole pool, freed in four quarters
    m = p0.alloc_bulk(NB_MBUF)
    assert p0.avail_count == 0
    for i in range(4):
        p0.free_bulk(m[i * 32:(i + 1) * 32])
        assert p0.avail_count == (i + 1) * 32
    # four allocs, one free
    m = np.concatenate([p0.alloc_bulk(32) for _ in range(4)])
    assert p0.avail_count == 0
    p0.free_bulk(m)
    assert p0.avail_count == NB_MBUF
    # one 128-segment chain freed by free_bulk(..., 1)
    m = p0.alloc_bulk(NB_MBUF)
    head = p0.mbuf(m[0])
    for h in m[1:]:
        head.chain(int(h))
    assert head.nb_segs == NB_MBUF
    p0.free_bulk([head.handle])
    assert p0.avail_count == NB_MBUF
    # chains mixing pools: every 4 mbufs alternate between p0 and p1
    a0, a1 = p0.alloc_bulk(NB_MBUF), p1.alloc_bulk(NB_MBUF)
    mixed = np.concatenate([np.concatenate([a0[i:i + 4], a1[i:i + 4]])
                            for i in range(0, NB_MBUF, 4)])
    heads = []
    for c in range(0, 2 * NB_MBUF, 16):
        h = p0.mbuf(mixed[c])
        for x in mixed[c + 1:c + 16]:
            h.chain(int(x))
        heads.append(h.handle)
    p0.free_bulk(heads[:1])
    assert p0.avail_count == 8 and p1.avail_count == 8
    p0.free_bulk(heads[1:])
    assert p0.avail_count == NB_MBUF and p1.avail_count == NB_MBUF
    assert p0.audit() == NB_MBUF and p1.audit() == NB_MBUF


def test_pktmbuf_pool_ptr(pool):
    ms = pool.alloc_bulk(NB_MBUF)
    for h in ms:
        pool.domain.state.mb[h]["data_off"] += 64
    pool.free_bulk(ms)
    ms = pool.alloc_bulk(NB_MBUF)
    assert (pool.domain.state.mb[ms]["data_off"] == HEADROOM).all()
    pool.free_bulk(ms)


@pytest.mark.parametrize("run", [1, 2])
def test_one_pktmbuf(pool, run):
    m = pool.alloc()
    assert m.pkt_len == 0 and m.data_len == 0
    start = m.mtod()
    hdr = m.append(MBUF_TEST_DATA_LEN)
    assert hdr.ctypes.data == start
    hdr[:] = 0x66
    assert m.pkt_len == MBUF_TEST_DATA_LEN and m.data_len == MBUF_TEST_DATA_LEN
    assert m.is_contiguous
    with pytest.raises(NoRoom):
        m.append(m.tailroom + 1)
    assert m.pkt_len == MBUF_TEST_DATA_LEN
    tail = m.append(MBUF_TEST_DATA_LEN2)
    assert tail.ctypes.data == start + MBUF_TEST_DATA_LEN
    tail[:] = 0x66
    m.trim(MBUF_TEST_DATA_LEN2)
    assert m.pkt_len == MBUF_TEST_DATA_LEN
    with pytest.raises(OutOfRange):
        m.trim(m.data_len + 1)
    h1 = m.prepend(MBUF_TEST_HDR1_LEN)
    assert h1.ctypes.data == start - MBUF_TEST_HDR1_LEN
    h2 = m.prepend(MBUF_TEST_HDR2_LEN)
    assert h2.ctypes.data == start - MBUF_TEST_ALL_HDRS_LEN
    h2[:] = 0x55
    h1[:] = 0x55
    assert m.pkt_len == MBUF_TEST_DATA_LEN + MBUF_TEST_ALL_HDRS_LEN
    with pytest.raises(NoRoom):
        m.prepend(m.headroom + 1)
    before = m.mtod()
    m.adj(MBUF_TEST_ALL_HDRS_LEN)
    assert m.mtod() == before + MBUF_TEST_ALL_HDRS_LEN == start
    assert m.pkt_len == MBUF_TEST_DATA_LEN
    with pytest.raises(OutOfRange):
        m.adj(m.data_len + 1)
    assert (m.data == 0x66).all(), "payload intact"
    m.check()
    m.check(header=False)
    m.free()


def test_pktmbuf_with_non_ascii_data(pool):
    m = pool.alloc()
    m.append(MBUF_TEST_DATA_LEN)[:] = 0xFF
    assert m.is_contiguous and m.pkt_len == MBUF_TEST_DATA_LEN
    text = m.dump(MBUF_TEST_DATA_LEN)
    assert "FF FF FF" in text and f"pkt_len={MBUF_TEST_DATA_LEN}" in text
    m.free()


def test_pktmbuf_free_segment(pool):
    ms = [pool.alloc() for _ in range(NB_MBUF)]
    for m in ms:
        m.append(10)
    for i in range(0, NB_MBUF, 8):
        head = ms[i]
        for m in ms[i + 1:i + 8]:
            head.chain(m)
    for i in range(0, NB_MBUF, 8):
        segs = ms[i].segments()
        assert len(segs) == 8
        for s in segs:
            s.free_seg()
    assert pool.avail_count == NB_MBUF and pool.audit() == NB_MBUF


def test_clone_update_detach(pool):
    m = pool.alloc()
    m.append_bytes(np.arange(64, dtype=np.uint8).tobytes())
    c = m.clone(pool)
    assert c.tobytes() == m.tobytes() and m.refcnt == 2 and c.is_indirect
    c.free()
    assert m.refcnt == 1
    # chained original: both segments shared
    m2 = pool.alloc()
    m2.append_bytes(b"\xaa" * 32)
    m.chain(m2)
    c = m.clone(pool)
    assert c.nb_segs == 2 and c.pkt_len == 96 and c.tobytes() == m.tobytes()
    assert m.refcnt == 2 and m2.refcnt == 2
    # clone of the clone points at the original
    cc = c.clone(pool)
    assert m.refcnt == 3 and m2.refcnt == 3
    assert int(pool.domain.state.mb[cc.handle]["direct"]) == m.handle
    m.free()
    c.free()
    assert cc.tobytes()[:64] == bytes(range(64))
    cc.free()
    assert pool.avail_count == NB_MBUF and pool.audit() == NB_MBUF


def test_pktmbuf_copy(pool):
    m = pool.alloc()
    m.append_bytes(bytes(range(100)))
    c = m.copy(pool)
    assert c.pkt_len == 100 and c.tobytes() == bytes(range(100)) and not c.is_indirect
    # a copy of a clone is a direct mbuf
    cl = m.clone(pool)
    c2 = cl.copy(pool)
    assert not c2.is_indirect and c2.tobytes() == m.tobytes() and m.refcnt == 2
    # a chain is flattened
    t = pool.alloc()
    t.append_bytes(b"\x01\x02\x03\x04")
    h = pool.alloc()
    h.append_bytes(b"\x05\x06\x07\x08")
    h.chain(t)
    flat = h.copy(pool)
    assert flat.nb_segs == 1 and flat.tobytes() == b"\x05\x06\x07\x08\x01\x02\x03\x04"
    # offset copy, copy at the end, past the end, truncation
    assert m.copy(pool, off=90).tobytes() == bytes(range(90, 100))
    end = m.copy(pool, off=100)
    assert end.pkt_len == 0
    with pytest.raises(OutOfRange):
        m.copy(pool, off=101)
    assert m.copy(pool, off=10, length=5).tobytes() == bytes(range(10, 15))
    for x in (m, c, cl, c2, h, flat, end):
        x.free()
    assert pool.avail_count == NB_MBUF - 2   # the offset copy and the truncated one were not kept
    # free them by walking the pool's allocated handles
    left = [int(x) for x in range(pool.obj_base, pool.obj_base + pool.n)
            if pool.domain.state.mb[x]["state"] != 0]
    pool.free_bulk(left)
    assert pool.avail_count == NB_MBUF and pool.audit() == NB_MBUF


def test_attach_from_different_pool(pool, pool2):
    m = pool.alloc()
    m.append_bytes(b"x" * 20)
    clone = pool2.alloc()
    mb = pool.domain.state.mb
    # data room 0, private area 128: the data pointer is right after the private area
    k = clone.handle - pool2.obj_base
    assert int(mb[clone.handle]["buf_iova"]) == k * pool2.elt_size + 128
    assert clone.headroom == 0 and clone.priv.size == 128
    clone.attach(m)
    assert clone.data.ctypes.data == m.data.ctypes.data and clone.headroom == HEADROOM
    assert m.refcnt == 2
    clone2 = pool2.alloc()
    clone2.attach(clone)              # attach to the clone: points at the original
    assert m.refcnt == 3
    assert int(mb[clone2.handle]["direct"]) == m.handle
    clone2.detach()
    assert m.refcnt == 2 and clone2.headroom == 0 and not clone2.is_indirect
    clone.detach()
    assert m.refcnt == 1
    for x in (m, clone, clone2):
        x.free()
    assert pool.audit() == NB_MBUF and pool2.audit() == NB_MBUF


@njit(cache=True, nogil=True)
def _refcnt_worker(dom, hdr, slots, lcore, stop, freed):
    """Dequeue mbufs from the ring and free them (one reference each)."""
    buf = np.empty(16, np.int32)
    while True:
        n = ring_mc_dequeue_burst(hdr, slots, buf, 16)
        for i in range(n):
            pktmbuf_free(dom, lcore, buf[i])
        freed[lcore] += n
        if n == 0 and load_acquire(stop, 0) != 0:
            # stop is set after the last enqueue: one more empty look means we are done
            n2 = ring_mc_dequeue_burst(hdr, slots, buf, 16)
            for i in range(n2):
                pktmbuf_free(dom, lcore, buf[i])
            freed[lcore] += n2
            if n2 == 0:
                return


def test_refcnt_mbuf(pool):
    """Main bumps refcnts at random and hands one reference per count to workers on a ring."""
    from pktbuf.kernels import mbuf_refcnt_update
    ring = pktbuf.Ring(4096)
    stop = np.zeros(1, np.int64)
    freed = np.zeros(4, np.int64)
    dom = pool.domain.state
    _refcnt_worker(dom, ring.hdr, ring.slots, 0, np.ones(1, np.int64), freed)  # compile
    freed[:] = 0
    ws = [threading.Thread(target=_refcnt_worker,
                           args=(dom, ring.hdr, ring.slots, lc, stop, freed)) for lc in (0, 1)]
    for w in ws:
        w.start()
    rng = np.random.default_rng(1)
    refs = 0
    for _ in range(160):
        while True:    # the workers' caches may hold up to 2 x 32 mbufs at any moment
            try:
                ms = pool.alloc_bulk(16, lcore=2)
                break
            except PoolExhausted:
                pass
        for h in ms:
            extra = int(rng.integers(0, 4))
            if extra:
                mbuf_refcnt_update(dom, int(h), extra)
            for _ in range(extra + 1):
                while ring.enqueue(int(h)) is False:
                    pass
            refs += extra + 1
    stop[0] = 1
    for w in ws:
        w.join(60)
        assert not w.is_alive()
    assert freed.sum() == refs
    for lc in (0, 1, 2):
        pool.cache_flush(lc)
    assert pool.avail_count == NB_MBUF and pool.audit() == NB_MBUF


def test_failing_mbuf_sanity_check(pool):
    m = pool.alloc()
    m.check()
    st = pool.domain.state
    assert C.mbuf_check(st, -1, True) == C.CHK_NULL
    row = st.mb[m.handle]
    for field, value, reason in (("pool", 200, C.CHK_POOL), ("buf_iova", 1, C.CHK_IOVA),
                                 ("buf_addr", 0, C.CHK_BUF_ADDR), ("refcnt", 0, C.CHK_REFCNT),
                                 ("refcnt", 0xFFFF, C.CHK_REFCNT)):
        saved = row[field].copy()
        row[field] = value
        assert C.mbuf_check(st, m.handle, True) == reason, field
        row[field] = saved
    m.check()
    # header rules
    m.append(10)
    st.mb[m.handle]["pkt_len"] = 5
    with pytest.raises(SanityCheckError, match="data_len"):
        m.check()
    st.mb[m.handle]["pkt_len"] = 11          # data_len 10 <= 11, but the sum is 10
    with pytest.raises(SanityCheckError, match="pkt_len"):
        m.check()
    st.mb[m.handle]["pkt_len"] = 10
    m.check()
    m.free()


@pytest.mark.parametrize("size,segs", [(128, 1), (64, 64), (512, 10), (250, 11), (123, 8)])
def test_mbuf_linearize_check(domain, size, segs):
    pool = PktmbufPool(NB_MBUF, 32, 8192 + HEADROOM, domain=domain)
    head = pool.alloc()
    payload = (np.arange(size * segs) & 0xFF).astype(np.uint8)
    per = size
    head.append(per)[:] = payload[:per]
    for s in range(1, segs):
        t = pool.alloc()
        t.append(per)[:] = payload[s * per:(s + 1) * per]
        head.chain(t)
    assert head.nb_segs == segs
    head.linearize()
    assert head.is_contiguous and head.pkt_len == size * segs
    assert np.array_equal(head.data, payload)
    head.free()
    assert pool.avail_count == NB_MBUF


def test_tx_offload():
    v = mbuf_tx_offload(14, 20, 20, 1460, 0, 0)
    assert tx_offload_unpack(v) == dict(l2_len=14, l3_len=20, l4_len=20, tso_segsz=1460,
                                        outer_l3_len=0, outer_l2_len=0)
    # bit-field assignment, done by hand with shifts, gives the same word
    assert v == 14 | (20 << 7) | (20 << 16) | (1460 << 24)
    assert mbuf_tx_offload(0x7F, 0x1FF, 0xFF, 0xFFFF, 0x1FF, 0x7F) == (1 << 56) - 1
    assert mbuf_tx_offload(0x80, 0, 0, 0, 0, 0) == 0        # masked to 7 bits


@pytest.mark.parametrize("n", [0, 31, 33, 48, 64, 63, 65, 32])
def test_pktmbuf_alloc_bulk(pool, n):
    ms = pool.alloc_bulk(n)
    assert len(set(ms.tolist())) == n
    pool.free_bulk(ms)
    assert pool.avail_count == NB_MBUF


@pytest.mark.parametrize("n", [32 - 128, NB_MBUF + 1, 1024, 2 ** 32 - 1])
def test_neg_pktmbuf_alloc_bulk(pool, n):
    with pytest.raises((PoolExhausted, InvalidArgument)):
        pool.alloc_bulk(n)
    assert pool.avail_count == NB_MBUF
    # the kernel itself, which user code calls directly, refuses too
    from pktbuf.kernels import pktmbuf_alloc_bulk
    out = np.empty(2048, np.int32)
    assert pktmbuf_alloc_bulk(pool.domain.state, pool.id, 0, out, max(-1, min(n, 2048))) < 0
    assert pool.avail_count == NB_MBUF


def test_pktmbuf_read(pool):
    m = pool.alloc()
    m.append(MBUF_TEST_DATA_LEN2)[:] = 0xFF
    v = m.read(0, MBUF_TEST_DATA_LEN2)
    assert v.size == MBUF_TEST_DATA_LEN2 and (v == 0xFF).all()
    assert v.ctypes.data == m.data.ctypes.data, "contiguous read is a view, not a copy"
    m.free()


def test_pktmbuf_read_from_offset(pool):
    m = pool.alloc()
    hdr = bytes(range(20))
    m.append_bytes(hdr)
    m.append_bytes(b"\xab" * 100)
    assert bytes(m.read(0, 20)) == hdr
    assert bytes(m.read(20, 100)) == b"\xab" * 100
    assert bytes(m.read(10, 20)) == hdr[10:] + b"\xab" * 10
    for off, ln in ((0, 121), (121, 0), (120, 2), (2 ** 31, 1), (0, 2 ** 31)):
        with pytest.raises(OutOfRange):
            m.read(off, ln)
    assert m.read(120, 0).size == 0 and m.read(0, 0).size == 0
    m.free()


@pytest.mark.parametrize("segs,off,ln,hdr", [
    ((100, 100, 100), 0, 300, False), ((100, 125, 150), 99, 201, False),
    ((100, 100), 0, 100, False), ((100, 200), 0, 120, True), ((1000, 100), 0, 1000, False),
    ((1024, 0, 100), 100, 1001, False), ((1000, 1, 1000), 1000, 2, False)])
def test_pktmbuf_read_from_chain(pool, segs, off, ln, hdr):
    total = sum(segs)
    payload = (np.arange(total) * 7 & 0xFF).astype(np.uint8)
    head = None
    pos = 0
    for s in segs:
        m = pool.alloc()
        m.append(s)[:] = payload[pos:pos + s]
        pos += s
        if head is None:
            head = m
        else:
            head.chain(m)
    got = head.read(off, ln)
    assert np.array_equal(got, payload[off:off + ln])
    with pytest.raises(OutOfRange):
        head.read(total - 1, 2)
    head.free()
    assert pool.avail_count == NB_MBUF


def test_nb_segs_and_next_reset(pool):
    m0, m1, m2 = (pool.alloc() for _ in range(3))
    for m in (m0, m1, m2):
        m.append(500)
    m0.chain(m1)
    m0.chain(m2)
    assert m0.nb_segs == 3
    # split manually: m0 -> m1 | m2
    st = pool.domain.state.mb
    st[m1.handle]["next"] = -1
    st[m0.handle]["nb_segs"] = 2
    st[m0.handle]["pkt_len"] = 1000
    m0.free()
    m2.free()
    raw = pool.alloc_bulk(3, raw=True)
    for h in raw:
        assert st[h]["nb_segs"] == 1 and st[h]["next"] == -1
    pool.free_bulk(raw)
    assert pool.avail_count == NB_MBUF


# Not applicable, and why:
# - test_get_rx_ol_flag_list / test_get_tx_ol_flag_list / *_ol_flag_name and
#   test_mbuf_validate_tx_offload_one: pktbuf has no NIC offloads, so no offload flag table
#   and no rte_validate_tx_offload (ol_flags is carried, not interpreted).
# - test_pktmbuf_ext_shinfo_init_helper / test_pktmbuf_ext_pinned_buffer: external buffers
#   (RTE_MBUF_F_EXTERNAL) are not implemented; the shinfo field is reserved.


def test_chain_limit(pool):
    a, b = pool.alloc(), pool.alloc()
    st = pool.domain.state.mb
    st[a.handle]["nb_segs"] = 0xFFFF     # pretend a is already a 65535-segment packet
    with pytest.raises(ChainTooLong):
        a.chain(b)
    assert int(st[a.handle]["next"]) == -1 and b.nb_segs == 1
    st[a.handle]["nb_segs"] = 1
    a.free()
    b.free()
    with pytest.raises(DoubleFree):
        b.free()
