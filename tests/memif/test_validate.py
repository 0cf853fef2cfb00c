"""Descriptor and ring-index validation against a hostile peer (kernel level, fuzzed).

A fake connected queue over memory we control plays the peer: the test writes descriptors and
indices, calls the burst kernel, and compares with a slow, obviously correct reference
(:func:`_reference_rx`).  Accepted packets must carry exactly the bytes at the offsets the
descriptors name (so nothing was read outside the peer's region); rejected input must take the
queue down with the right code and leave every mbuf in its pool.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.drivers.memif.datapath import memif_rx_burst, memif_tx_burst
from pktbuf.drivers.memif import layout as L
from pktbuf.drivers.memif import validate as V
from pktbuf.drivers.memif.queue import (K_CLIENT_RX, K_CLIENT_TX, K_SERVER_RX, K_SERVER_TX, P_EQ,
                                        P_GENERAL, P_GT, P_LT, Q_BSIZE, Q_BUF_BASE, Q_EVENTFD,
                                        Q_FN_GENERAL, Q_FN_PATH, Q_KIND, Q_MASK, Q_MBUF_CAP,
                                        Q_N, Q_NREGIONS, Q_PATH, Q_POOL, Q_RING, QS_ERR, QS_UP,
                                        queue_alloc, queue_up)
from pktbuf.drivers.memif.rx_copy import rx_refill
from pktbuf.drivers.memif.variants import queue_paths
from pktbuf.shm import Region

LOG2 = 4
N = 1 << LOG2
RSIZE = 1 << 16


@pytest.fixture(scope="module")
def vpool(warm):
    p = pktbuf.PktmbufPool(8192, 0, name="validate")
    yield p
    p.close(force=True)


@pytest.fixture(scope="module")
def regions():
    r0 = Region(RSIZE, "peer0")
    r1 = Region(4096, "peer1")
    rng = np.random.default_rng(5)
    r0.array[L.ring_bytes(LOG2):] = rng.integers(0, 256, RSIZE - L.ring_bytes(LOG2), dtype=np.uint8)
    r1.array[:] = rng.integers(0, 256, 4096, dtype=np.uint8)
    yield r0, r1
    r0.close()
    r1.close()


def _queue(pool, regions, kind, path, bsize=2048):
    r0, r1 = regions
    q = queue_alloc()
    c = q.cfg
    c[Q_KIND] = kind
    c[Q_PATH] = path
    c[Q_RING] = r0.address
    c[Q_N] = N
    c[Q_MASK] = N - 1
    c[Q_BSIZE] = bsize
    c[Q_BUF_BASE] = r0.address + L.ring_bytes(LOG2)
    c[Q_POOL] = pool.id
    c[Q_MBUF_CAP] = pool.data_room - pool.headroom
    c[Q_EVENTFD] = -1
    c[Q_NREGIONS] = 2
    # the paths the bursts call through an address, as a device writes them at connect
    c[Q_FN_GENERAL], c[Q_FN_PATH] = queue_paths(kind in (K_CLIENT_RX, K_SERVER_RX), False)
    q.regions[0] = (r0.address, r0.size)
    q.regions[1] = (r1.address, r1.size)
    L.init_ring(r0.array, 0, LOG2)
    queue_up(q.st)
    return q


def _write_descs(r0, descs, start=0):
    d = L.desc_view(r0.array, 0, LOG2)
    for i, (fl, rg, off, ln) in enumerate(descs):
        s = (start + i) % N
        d[s]["flags"], d[s]["region"], d[s]["offset"], d[s]["length"] = fl, rg, off, ln


def _reference_rx(descs, avail, nregion_sizes, n):
    """(error code or 0, [payload (region, offset, length) lists per packet])."""
    if avail > N:
        return V.V_RING_INDEX, []
    pkts = []
    i = 0
    while len(pkts) < n and i < avail:
        j = i
        cur = []
        complete = False
        while j < avail:
            fl, rg, off, ln = descs[j]
            if ln > 0xFFFF:
                return V.V_DESC_LENGTH, []
            if rg >= len(nregion_sizes):
                return V.V_DESC_REGION, []
            if off + ln > nregion_sizes[rg]:
                return V.V_DESC_BOUNDS, []
            cur.append((rg, off, ln))
            j += 1
            if not fl & 1:
                complete = True
                break
        if not complete:
            if i == 0 and j >= N:
                return V.V_CHAIN, []
            break
        pkts.append(cur)
        i = j
    return 0, pkts


_offsets = st.one_of(st.integers(0, RSIZE + 10), st.integers(RSIZE - 3000, RSIZE + 64),
                     st.integers(4096 - 3000, 4096 + 64),
                     st.sampled_from([0, 4095, 4096, RSIZE - 1, RSIZE, 2**31, 2**32 - 1]))
_lengths = st.one_of(st.integers(0, 3000), st.sampled_from([0, 1, 2048, 4096, 65535, 65536,
                                                            2**31, 2**32 - 1]))
_desc = st.tuples(st.integers(0, 1), st.sampled_from([0, 0, 0, 1, 1, 2, 0xFFFF]), _offsets, _lengths)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(descs=st.lists(_desc, min_size=N, max_size=N),
       head=st.one_of(st.integers(0, N + 2), st.integers(0, 0xFFFF)),
       path=st.sampled_from([P_EQ, P_LT, P_GT, P_GENERAL]))
def test_fuzz_server_rx_descriptors(vpool, regions, descs, head, path):
    r0, r1 = regions
    q = _queue(vpool, regions, K_SERVER_RX, path)
    _write_descs(r0, descs)
    L.ring_header_view(r0.array, 0)["head"] = head
    before = vpool.avail_count
    # what the peer published, as it was when the burst read it (a hostile peer may point a
    # descriptor at its own ring header, where our burst then writes the new tail)
    arrays = (r0.array.copy(), r1.array.copy())
    out = np.empty(64, np.int32)
    got = memif_rx_burst(vpool.domain.state, q, 0, out, 64)
    err, ref = _reference_rx(descs, head, [r0.size, r1.size], 64)
    if err:
        assert got == 0 and q.st[QS_ERR] == err and q.st[QS_UP] == 0
        assert vpool.avail_count == before
        assert memif_rx_burst(vpool.domain.state, q, 0, out, 64) == 0    # stays down
        return
    assert q.st[QS_ERR] == 0
    assert got == len(ref)
    for h, pk in zip(out[:got], ref):
        want = b"".join(arrays[rg][off:off + ln].tobytes() for rg, off, ln in pk)
        assert vpool.mbuf(h).tobytes() == want
    vpool.free_bulk(out[:got])
    assert vpool.avail_count == before
    consumed = sum(len(p) for p in ref)
    assert L.ring_header_view(r0.array, 0)["tail"] == consumed
    assert all(L.desc_view(r0.array, 0, LOG2)[s]["flags"] == 0 for s in range(consumed))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lens=st.lists(st.one_of(st.integers(0, 2100), st.sampled_from([2048, 2049, 65535, 2**32 - 1])),
                     min_size=N, max_size=N),
       flags=st.lists(st.integers(0, 1), min_size=N, max_size=N),
       region=st.integers(0, 0xFFFF), offset=st.integers(0, 2**32 - 1),
       tail=st.integers(0, 0xFFFF))
def test_fuzz_client_rx_ignores_peer_addresses(vpool, regions, lens, flags, region, offset, tail):
    """A client computes its own buffer addresses: region/offset from the server are ignored;
    lengths beyond the buffer size and a tail beyond what was handed out are rejected."""
    r0, _ = regions
    q = _queue(vpool, regions, K_CLIENT_RX, P_EQ)
    rx_refill(q)                                    # head = N
    assert L.ring_header_view(r0.array, 0)["head"] == N
    _write_descs(r0, [(f, region, offset, ln) for f, ln in zip(flags, lens)])
    L.ring_header_view(r0.array, 0)["tail"] = tail
    out = np.empty(64, np.int32)
    got = memif_rx_burst(vpool.domain.state, q, 0, out, 64)
    base = L.ring_bytes(LOG2)
    descs = [(f, 0, base + s * 2048, ln) for s, (f, ln) in enumerate(zip(flags, lens))]
    if tail > N:
        err, ref = V.V_RING_INDEX, []
    elif any(ln > 2048 for ln in lens[:tail]):
        # the kernel stops at the first bad length it reaches while gathering
        err, ref = _reference_rx([(f, 0, o, ln if ln <= 2048 else 2**32 - 1) for f, _, o, ln in descs],
                                 tail, [RSIZE], 64)
        err = V.V_DESC_LENGTH if err else 0
    else:
        err, ref = _reference_rx(descs, tail, [RSIZE], 64)
    if err:
        assert got == 0 and q.st[QS_ERR] == err
        return
    assert got == len(ref)
    for h, pk in zip(out[:got], ref):
        want = b"".join(r0.array[off:off + ln].tobytes() for _, off, ln in pk)
        assert vpool.mbuf(h).tobytes() == want
    vpool.free_bulk(out[:got])
    consumed = sum(len(p) for p in ref)
    d = L.desc_view(r0.array, 0, LOG2)
    for s in range(consumed):      # refilled: flags 0, our region/offset/length again
        assert (d[s]["flags"], d[s]["region"], d[s]["offset"], d[s]["length"]) == \
            (0, 0, base + s * 2048, 2048)
    assert L.ring_header_view(r0.array, 0)["head"] == (consumed + N) & 0xFFFF


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(caps=st.lists(st.tuples(st.sampled_from([0, 0, 1, 2, 0xFFFF]), _offsets,
                               st.sampled_from([0, 64, 100, 2048, 4096, 2**32 - 1])),
                     min_size=N, max_size=N),
       head=st.one_of(st.integers(0, N + 2), st.integers(0, 0xFFFF)),
       path=st.sampled_from([P_EQ, P_LT, P_GENERAL]), plen=st.sampled_from([60, 2000, 5000]))
def test_fuzz_server_tx_slots(vpool, regions, caps, head, path, plen):
    """The server writes only into buffers the client described, inside the region, within
    the capacity; bad slots take the queue down and the caller keeps every packet."""
    r0, r1 = regions
    q = _queue(vpool, regions, K_SERVER_TX, path)
    _write_descs(r0, [(0, rg, off, cap) for rg, off, cap in caps])
    L.ring_header_view(r0.array, 0)["head"] = head
    snap0, snap1 = r0.array.copy(), r1.array.copy()
    pays = [bytes([i + 1]) * plen for i in range(4)]
    hs = []
    for p in pays:
        m = vpool.alloc()
        m.append_bytes(p[:2048])
        for off in range(2048, len(p), 2048):
            x = vpool.alloc()
            x.append_bytes(p[off:off + 2048])
            m.chain(x)
        hs.append(m.handle)
    hs = np.array(hs, np.int32)
    before = vpool.avail_count
    sent = memif_tx_burst(vpool.domain.state, q, 0, hs, 4)
    # every byte that changed lies inside a buffer a descriptor offered
    allowed0 = np.zeros(r0.size, bool)
    allowed1 = np.zeros(r1.size, bool)
    allowed0[:L.ring_bytes(LOG2)] = True          # the ring itself (lengths, flags, tail)
    for rg, off, cap in caps:
        if rg == 0 and off + cap <= r0.size:
            allowed0[off:off + cap] = True
        if rg == 1 and off + cap <= r1.size:
            allowed1[off:off + cap] = True
    assert not np.any((r0.array != snap0) & ~allowed0)
    assert not np.any((r1.array != snap1) & ~allowed1)
    if head > N:
        assert sent == 0 and q.st[QS_ERR] == V.V_RING_INDEX
    if sent == 0:
        assert vpool.avail_count == before
        vpool.free_bulk(hs)
        # (a hostile client may offer its own ring header as a buffer; then the bytes we
        # wrote before rolling back land there -- its memory, its problem)
        hdr_offered = any(rg == 0 and off < L.RING_HDR_SIZE for rg, off, _ in caps)
        if q.st[QS_ERR] == 0 and not hdr_offered:
            assert L.ring_header_view(r0.array, 0)["tail"] == 0
        return
    vpool.free_bulk(hs[sent:])
    if any(rg == 0 and off < L.ring_bytes(LOG2) for rg, off, _ in caps):
        return      # the client offered its own ring as a buffer: it cannot read back reliably
    # read back what was published, as a client would, and compare
    d = L.desc_view(r0.array, 0, LOG2)
    arrays = (r0.array, r1.array)
    tail = int(L.ring_header_view(r0.array, 0)["tail"])
    s = 0
    for p in pays[:sent]:
        data = b""
        while True:
            rg, off, ln, fl = int(d[s]["region"]), int(d[s]["offset"]), int(d[s]["length"]), int(d[s]["flags"])
            assert ln <= caps[s][2]
            data += arrays[rg][off:off + ln].tobytes()
            s += 1
            if not fl & 1:
                break
        assert data == p
    assert s == tail


def test_client_tx_rejects_tail_beyond_head(vpool, regions):
    r0, _ = regions
    q = _queue(vpool, regions, K_CLIENT_TX, P_EQ)
    L.ring_header_view(r0.array, 0)["tail"] = 5     # nothing was ever sent
    h = vpool.alloc().handle
    assert memif_tx_burst(vpool.domain.state, q, 0, np.array([h], np.int32), 1) == 0
    assert q.st[QS_ERR] == V.V_RING_INDEX
    assert vpool.mbuf(h).refcnt == 1                 # still the caller's
    vpool.free_bulk([h])


def test_reason_strings():
    assert V.reason(V.V_DESC_BOUNDS) == "Descriptor buffer outside its region"
    assert "Invalid descriptor" in V.reason(99)
