"""The kernels against the plain-Python model (naive.py) over synthetic rings in ordinary
memory: well-formed blocks as Linux writes them, and hostile ones (any header word replaced).
No socket is involved: the Tx kick goes to fd -1 and fails, which the queue counts."""
import struct

import numpy as np
import pytest
from hypothesis import event, given, settings, strategies as st

import pktbuf
from pktbuf.drivers.af_packet.layout import (AF_PACKET_RXQ, AF_PACKET_TXQ, RC_BLOCK_NR, RC_BLOCK_SIZE,
                                             RC_FD, RC_FLAGS, RC_MBUF_CAP, RC_POOL, RC_PORT, RC_RING,
                                             RS_BAD_RING, RS_NPK, RS_TRUNCATED, RX_L4_CKSUM_GOOD,
                                             RX_L4_CKSUM_NONE, RX_LRO, RX_MAX_BURST, RX_VLAN,
                                             RX_VLAN_STRIPPED, RXF_VLAN_STRIP, TC_BLOCK_SIZE, TC_FD,
                                             TC_FPB, TC_FRAME_NR, TC_FRAME_SIZE, TC_MAX_LEN, TC_RING,
                                             TS_FULL, TS_KICK_ERRORS, TS_RUNT, TS_TOO_LONG, TX_VLAN)
from pktbuf.drivers.af_packet.rx import af_packet_rx_burst
from pktbuf.drivers.af_packet.tx import af_packet_tx_burst

from . import naive
from .helpers import make_packet

POOLS = {}


def _pool(cap):
    if cap not in POOLS:
        POOLS[cap] = pktbuf.PktmbufPool(4096, 0, data_room=cap + 128)
    return POOLS[cap]


def _rxq(ring, bsz, nblk, pool, strip):
    q = AF_PACKET_RXQ.create({"scr_mb": RX_MAX_BURST + 2 * (bsz // (pool.data_room - 128) + 1)})
    c = q.cfg
    c[RC_FD] = -1
    c[RC_RING] = ring.ctypes.data
    c[RC_BLOCK_SIZE] = bsz
    c[RC_BLOCK_NR] = nblk
    c[RC_POOL] = pool.id
    c[RC_PORT] = 7
    c[RC_FLAGS] = RXF_VLAN_STRIP if strip else 0
    c[RC_MBUF_CAP] = pool.data_room - 128
    q.st[RS_NPK] = -1
    return q


def _drain(q, pool, bursts):
    out = np.empty(64, np.int32)
    got = []
    i = 0
    while True:
        n = bursts[i % len(bursts)]
        i += 1
        k = af_packet_rx_burst(pool.domain.state, q, 0, out, n)
        assert 0 <= k <= n
        for h in out[:k]:
            m = pool.mbuf(int(h))
            got.append((m.tobytes(), m.vlan_tci, m.ol_flags, m.nb_segs, m.port))
            m.free()
        if k == 0:
            return got


pkt = st.fixed_dictionaries({
    "data": st.integers(0, 1600).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
    "status": st.sampled_from([0, naive.VLAN_VALID, naive.VLAN_VALID | naive.TPID_VALID,
                               naive.CSUMNOTREADY | naive.GSO_TCP, naive.CSUM_VALID]),
    "tci": st.integers(0, 0xFFFF),
    "tpid": st.sampled_from([0x8100, 0x88A8]),
    "cut": st.booleans(),
})
HOSTILE = [0, 1, 3, 7, 8, 47, 48, 49, 4095, 4096, 4097, 8191, 8192, 0xFFFF, 0xFFFFFFFF]


@st.composite
def rings(draw):
    bsz = draw(st.sampled_from([4096, 8192]))
    nblk = draw(st.integers(1, 4))
    blocks = []
    for b in range(nblk):
        ps = draw(st.lists(pkt, max_size=8))
        while ps and not naive.fits(bsz, [len(p["data"]) for p in ps]):
            ps.pop()
        for p in ps:
            if p.pop("cut"):
                p["tp_len"] = len(p["data"]) + 100
        ready = draw(st.booleans()) if b else True
        blocks.append(naive.build_block(bsz, ps, status=naive.USER if ready else 0))
    for _ in range(draw(st.integers(0, 3))):             # hostile words
        blk = blocks[draw(st.integers(0, nblk - 1))]
        where = draw(st.sampled_from([12, 16, "pkt0", "pkt4", "pkt12", "pkt24"]))
        val = draw(st.sampled_from(HOSTILE) | st.integers(0, 0xFFFFFFFF))
        if isinstance(where, str):
            first = struct.unpack_from("<I", blk, 16)[0]
            if first + 48 > bsz:
                continue
            off = first + int(where[3:])
            if where == "pkt24":
                struct.pack_into("<H", blk, off, val & 0xFFFF)
            else:
                struct.pack_into("<I", blk, off, val)
        else:
            struct.pack_into("<I", blk, where, val)
    return bsz, blocks


@settings(max_examples=150, deadline=None)
@given(rings(), st.sampled_from([64, 200, 2048]), st.booleans(),
       st.lists(st.integers(1, 40), min_size=1, max_size=4))
def test_rx_matches_model(ring_spec, cap, strip, bursts):
    bsz, blocks = ring_spec
    pool = _pool(cap)
    ring = np.frombuffer(b"".join(blocks), np.uint8).copy()
    q = _rxq(ring, bsz, len(blocks), pool, strip)
    got = _drain(q, pool, bursts)
    want, trunc, bad = naive.parse_ring(blocks, bsz, strip)
    assert [g[0] for g in got] == [w[0] for w in want]
    for (data, tci, fl, segs, port), (_, vlan, status) in zip(got, want):
        assert port == 7 and segs == max(1, -(-len(data) // cap))
        if vlan is None:
            assert fl & (RX_VLAN | RX_VLAN_STRIPPED) == 0
        else:
            assert tci == vlan and fl & RX_VLAN
            assert bool(fl & RX_VLAN_STRIPPED) == strip
        if status & naive.CSUMNOTREADY:
            assert fl & RX_L4_CKSUM_NONE == RX_L4_CKSUM_NONE
        elif status & naive.CSUM_VALID:
            assert fl & RX_L4_CKSUM_NONE == RX_L4_CKSUM_GOOD
        assert bool(fl & RX_LRO) == bool(status & naive.GSO_TCP)
    assert int(q.st[RS_TRUNCATED]) == trunc and int(q.st[RS_BAD_RING]) == bad
    event(f"bad={min(bad, 2)} trunc={min(trunc, 1)} frames={min(len(got), 5)}")
    # every block handed over was given back, the others untouched
    ready = 0
    while ready < len(blocks) and struct.unpack_from("<I", blocks[ready], 8)[0] & 1:
        ready += 1
    status = ring.view(np.uint32)[2::bsz // 4]
    assert list(status[:ready]) == [0] * ready
    assert pool.avail_count == pool.n


def test_rx_cursor_mid_block():
    """A burst that ends inside a block leaves it ours; the next burst goes on from there."""
    pool = _pool(2048)
    blk = naive.build_block(4096, [{"data": bytes([i]) * 60} for i in range(10)])
    ring = np.frombuffer(bytes(blk) + bytes(naive.build_block(4096, [], status=0)),
                         np.uint8).copy()
    q = _rxq(ring, 4096, 2, pool, False)
    out = np.empty(4, np.int32)
    dom = pool.domain.state
    assert af_packet_rx_burst(dom, q, 0, out, 4) == 4
    assert ring.view(np.uint32)[2] & naive.USER          # still ours: 6 frames left in it
    assert [pool.mbuf(int(h)).tobytes()[0] for h in out] == [0, 1, 2, 3]
    pool.free_bulk(out)
    got = _drain(q, pool, [32])
    assert [g[0][0] for g in got] == list(range(4, 10))
    assert ring.view(np.uint32)[2] == 0                 # handed back
    assert pool.avail_count == pool.n


def _txq(ring, framesz, fpb, nfr, mtu):
    q = AF_PACKET_TXQ.create()
    c = q.cfg
    c[TC_FD] = -1
    c[TC_RING] = ring.ctypes.data
    c[TC_BLOCK_SIZE] = framesz * fpb
    c[TC_FRAME_SIZE] = framesz
    c[TC_FRAME_NR] = nfr
    c[TC_FPB] = fpb
    c[TC_MAX_LEN] = mtu + 14
    return q


txpkt = st.tuples(st.integers(0, 1600).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
                  st.sampled_from([None, 1, 13, 100, 700]),
                  st.one_of(st.none(), st.integers(0, 0xFFFF)),
                  st.booleans())


@settings(max_examples=100, deadline=None)
@given(st.lists(txpkt, max_size=20), st.sampled_from([(2048, 2), (1024, 4)]),
       st.sampled_from([1000, 1500]), st.integers(0, 3))
def test_tx_matches_model(pkts, geom, mtu, busy):
    framesz, fpb = geom
    nfr = 4 * fpb
    pool = _pool(2048)
    ring = np.zeros(nfr * framesz, np.uint8)
    w = ring.view(np.uint32)
    for f in range(nfr - busy, nfr):                   # frames the kernel still owns
        w[(f * framesz) // 4 + 5] = 2                  # TP_STATUS_SENDING
    q = _txq(ring, framesz, fpb, nfr, mtu)
    hs, model = [], []
    for data, seg, tci, dot1q in pkts:
        if dot1q and len(data) >= 14:
            data = data[:12] + b"\x81\x00" + data[14:]
        if seg is not None and seg < 13:
            data = data[:80]                           # a chain of single bytes: keep it short
        h = make_packet(pool, data, seg)
        m = pool.mbuf(h)
        if tci is not None:
            m.set(ol_flags=TX_VLAN, vlan_tci=tci)
        hs.append(h)
        model.append((data, m.data_len, tci))
    hs = np.array(hs, np.int32)
    k = af_packet_tx_burst(pool.domain.state, q, 0, hs, hs.size)
    pool.free_bulk(hs[k:])                         # still ours
    assert pool.avail_count == pool.n
    # the model: in order, bad ones dropped, stop when the free frames run out
    sent, taken, runt, long_ = [], 0, 0, 0
    for p in model:
        s, r, lg = naive.tx_expect([p], mtu, framesz)
        if s and len(sent) == nfr - busy:
            break
        sent += s
        runt += r
        long_ += lg
        taken += 1
    assert k == taken
    assert int(q.st[TS_RUNT]) == runt and int(q.st[TS_TOO_LONG]) == long_
    assert int(q.st[TS_FULL]) == (1 if taken < len(model) else 0)
    assert int(q.st[TS_KICK_ERRORS]) == (1 if sent or taken < len(model) else 0)   # fd -1
    frames_ = []
    for f in range(len(sent)):
        base = f * framesz
        assert w[base // 4 + 5] == 1                   # SEND_REQUEST
        assert w[base // 4] == 0                       # tp_next_offset
        ln = int(w[base // 4 + 4])
        frames_.append(ring[base + 48:base + 48 + ln].tobytes())
    assert frames_ == sent


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    for p in POOLS.values():
        p.close(force=True)
    POOLS.clear()
