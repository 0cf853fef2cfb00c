"""Rx: files replayed into mbufs, checked against the plain model (tests/pcap/naive.py)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import pktbuf
from pktbuf import PcapPort
from pktbuf.kernels import pcap_rx_burst, pcap_rx_eof, pktmbuf_free_bulk
from pktbuf.drivers.pcap import layout as L

from . import naive
from .helpers import frames, read_port

SIZES = st.lists(st.one_of(st.integers(0, 128), st.integers(0, 2200), st.integers(0, 9018)),
                 min_size=0, max_size=60)
TS = st.integers(0, (1 << 32) - 1000).map(lambda s: s * naive.NS)
NG_TS = st.integers(0, 10 ** 7).map(lambda s: s * naive.NS)   # picoseconds still fit 64 bits


def _pkts(sizes, base_ts, seed, step=123_456_789):
    return [(base_ts + i * step, f) for i, f in enumerate(frames(sizes, seed))]


@settings(max_examples=40)
@given(sizes=SIZES, nano=st.booleans(), big=st.booleans(), ts=TS, burst=st.integers(1, 64),
       seed=st.integers(0, 1 << 16))
def test_pcap_matches_model(pool, tmp_path_factory, sizes, nano, big, ts, burst, seed):
    pk = _pkts(sizes, ts, seed)
    data = naive.write_pcap(pk, nano=nano, big=big)
    path = tmp_path_factory.mktemp("rx") / "f.pcap"
    path.write_bytes(data)
    want = naive.read_pcap(data)
    with PcapPort(pool, rx_pcap=str(path)) as port:
        got = read_port(port, pool, burst=burst, with_ts=True)
        assert [g[0] for g in got] == [w[1] for w in want]
        assert [g[1] for g in got] == [w[0] for w in want]
        s = port.stats()
        assert s["ipackets"] == len(want) and s["ibytes"] == sum(len(w[1]) for w in want)
        assert s["ierrors"] == 0 and port.rx_burst(32).size == 0


def _pcapng_file(pk, e, ifaces, extras, use_spb):
    """A pcapng file: SHB, the IDBs, then each packet on interface i % len(ifaces) (an SPB
    for interface 0 when use_spb), with unknown blocks in between when extras."""
    out = [naive.shb(e)]
    for res, off in ifaces:
        out.append(naive.idb(e, tsresol=res, tsoffset=off))
    for i, (ts, fr) in enumerate(pk):
        ifid = i % len(ifaces)
        if extras and i % 3 == 0:
            out.append(naive.block(0x40000BAD, b"custom" + bytes(i % 7), e))
            out.append(naive.block(5, b"\0" * 12, e))          # an ISB: skipped
        if use_spb and ifid == 0 and i % 2:
            out.append(naive.spb(fr, e=e))
        else:
            res, off = ifaces[ifid]
            out.append(naive.epb(ifid, naive.ticks(ts - (off or 0) * naive.NS, res), fr, e=e,
                                 options=naive.option(2, b"\1\0\0\0", e) if i % 4 == 1 else b""))
    return b"".join(out)


RES = st.sampled_from([None, 6, 9, 3, 0x80 | 10, 0x80 | 20, 12])


@settings(max_examples=40)
@given(sizes=SIZES, big=st.booleans(), ts=NG_TS, burst=st.integers(1, 64),
       ifaces=st.lists(st.tuples(RES, st.sampled_from([None, 0, 100, -5])), min_size=1,
                       max_size=4),
       extras=st.booleans(), use_spb=st.booleans(), seed=st.integers(0, 1 << 16))
def test_pcapng_matches_model(pool, tmp_path_factory, sizes, big, ts, burst, ifaces, extras,
                              use_spb, seed):
    e = ">" if big else "<"
    pk = _pkts(sizes, ts + 200 * naive.NS, seed)
    data = _pcapng_file(pk, e, ifaces, extras, use_spb)
    path = tmp_path_factory.mktemp("rx") / "f.pcapng"
    path.write_bytes(data)
    want = naive.read_pcapng(data)
    assert len(want) == len(pk)
    with PcapPort(pool, rx_pcap=str(path)) as port:
        got = read_port(port, pool, burst=burst, with_ts=True)
        assert [g[0] for g in got] == [w[1] for w in want]
        assert [g[1] for g in got] == [w[0] for w in want]
        assert port.xstats()["rx_q0_skipped_blocks"] == (2 * len(range(0, len(pk), 3))
                                                         if extras else 0)


def test_two_sections_other_byte_orders(pool, tmp_path):
    fr = frames([60, 100, 1514, 70])
    data = (naive.shb("<") + naive.idb("<", tsresol=9) + naive.epb(0, 5, fr[0])
            + naive.shb(">") + naive.idb(">") + naive.idb(">", tsresol=3)
            + naive.epb(1, 7, fr[1], e=">") + naive.epb(0, 8, fr[2], e=">")
            + naive.shb("<") + naive.idb("<") + naive.epb(0, 9, fr[3]))
    p = tmp_path / "s.pcapng"
    p.write_bytes(data)
    with PcapPort(pool, rx_pcap=str(p)) as port:
        got = read_port(port, pool, with_ts=True)
    assert [g[0] for g in got] == fr
    assert [g[1] for g in got] == [5, 7_000_000, 8000, 9000]


def test_chains_and_fields(warm, tmp_path):
    """A 256-byte data room: records become chains; pkt_len, nb_segs, port, data_len."""
    pool = pktbuf.PktmbufPool(2048, data_room=256 + 128, name="small")
    fr = frames([0, 1, 255, 256, 257, 9000])
    p = tmp_path / "c.pcap"
    p.write_bytes(naive.write_pcap([(1, f) for f in fr]))
    with PcapPort(pool, rx_pcap=str(p), port_id=7) as port:
        hs = port.rx_burst(32)
        assert hs.size == len(fr)
        for h, f in zip(hs, fr):
            m = pool.mbuf(int(h))
            assert m.tobytes() == f and m.pkt_len == len(f) and m.port == 7
            assert m.nb_segs == max(1, -(-len(f) // 256))
        pool.free_bulk(hs)
    assert pool.in_use_count == 0
    pool.close()


def test_pool_short_leaves_records(warm, tmp_path):
    """No mbufs: rx_nombuf counts, nothing is read; then the records come, in order."""
    pool = pktbuf.PktmbufPool(64, cache_size=0, name="tiny")
    fr = frames([100] * 50)
    p = tmp_path / "n.pcap"
    p.write_bytes(naive.write_pcap([(i, f) for i, f in enumerate(fr)]))
    with PcapPort(pool, rx_pcap=str(p)) as port:
        held = pool.alloc_bulk(64)
        assert port.rx_burst(32).size == 0
        assert port.stats()["rx_nombuf"] == 1 and not port.rx_eof()
        pool.free_bulk(held[:10])
        hs = port.rx_burst(32)            # fewer than asked: what the pool had
        assert 0 < hs.size <= 10
        got = [pool.mbuf(int(h)).tobytes() for h in hs]
        pool.free_bulk(hs)
        pool.free_bulk(held[10:])
        got += read_port(port, pool)
    assert got == fr
    assert pool.in_use_count == 0
    pool.close()


def test_infinite_rx_loops(pool, tmp_path):
    fr = frames([64, 128, 1500])
    p = tmp_path / "l.pcap"
    p.write_bytes(naive.write_pcap([(i, f) for i, f in enumerate(fr)]))
    with PcapPort(pool, rx_pcap=str(p), infinite_rx=True) as port:
        got = read_port(port, pool, burst=7, limit=100)
        assert not port.rx_eof()
        assert port.xstats()["rx_q0_wraps"] >= 30
    assert got[:99] == (fr * 33)


def test_infinite_rx_without_packets_stops(pool, tmp_path):
    p = tmp_path / "e.pcapng"
    p.write_bytes(naive.shb() + naive.idb())
    with PcapPort(pool, rx_pcap=str(p), infinite_rx=True) as port:
        with pytest.raises(pktbuf.PcapFormatError, match="no packet"):
            port.rx_burst(32)
        assert pcap_rx_eof(port.rx_queue(0))


def test_small_window_streams(pool, tmp_path):
    """A file eight times the window: read through the window, which moves and never grows."""
    window = 2 << 20
    sizes = [60, 1514, 9000, 300] * 1500
    pk = [(i, f) for i, f in enumerate(frames(sizes, seed=3))]
    data = naive.write_pcap(pk)
    assert len(data) > 7 * window
    p = tmp_path / "big.pcap"
    p.write_bytes(data)
    with PcapPort(pool, rx_pcap=str(p), window=window) as port:
        q = port.rx_queue(0)
        n = 0
        biggest = 0
        while not port.rx_eof():
            hs = port.rx_burst(64)
            biggest = max(biggest, int(q.st[L.S_WIN_LEN]))
            for h in hs:
                assert pool.mbuf(int(h)).tobytes() == pk[n][1]
                n += 1
            pool.free_bulk(hs)
        assert n == len(pk)
        assert biggest <= window and int(q.st[L.S_MAPS]) >= len(data) // window
    assert port.rx_queue(0).st[L.S_WIN_ADDR] == 0          # unmapped at close


def test_zero_length_frames(pool, tmp_path):
    """caplen 0 is a valid record (a frame cut to nothing): an empty mbuf, as DPDK's."""
    p = tmp_path / "z.pcap"
    p.write_bytes(naive.write_pcap([(1, b"", 60), (2, b"", 0), (3, frames([64])[0])]))
    with PcapPort(pool, rx_pcap=str(p)) as port:
        got = read_port(port, pool)
    assert got == [b"", b"", frames([64])[0]]


@njit(nogil=True)
def _user_loop(dom, q, out):
    """A user's own compiled loop over the kernel: packets and bytes until the end."""
    n = 0
    nbytes = 0
    while not pcap_rx_eof(q):
        k = pcap_rx_burst(dom, q, 0, out, out.size)
        for i in range(k):
            nbytes += dom.mb[out[i]].pkt_len
        pktmbuf_free_bulk(dom, 0, out, k)
        n += k
    return n, nbytes


def test_user_njit_loop(pool, tmp_path):
    fr = frames([64, 1000, 5000] * 100)
    p = tmp_path / "u.pcap"
    p.write_bytes(naive.write_pcap([(i, f) for i, f in enumerate(fr)]))
    with PcapPort(pool, rx_pcap=str(p)) as port:
        n, nbytes = _user_loop(pool.domain.state, port.rx_queue(0), np.empty(32, np.int32))
    assert (n, nbytes) == (len(fr), sum(map(len, fr)))


def test_pcapng_small_window_and_loop_over_it(pool, tmp_path):
    """A pcapng file four times the window, replayed twice with infinite_rx: the window
    moves forward, then back to the start at the wrap, and the interfaces are read again."""
    window = 2 << 20
    fr = frames([1514, 60, 9000] * 700, seed=4)
    data = (naive.shb() + naive.idb(tsresol=6) + naive.idb(tsresol=9)
            + b"".join(naive.epb(i % 2, i, f) for i, f in enumerate(fr)))
    assert len(data) > 3 * window
    p = tmp_path / "w.pcapng"
    p.write_bytes(data)
    with PcapPort(pool, rx_pcap=str(p), window=window, infinite_rx=True) as port:
        got = read_port(port, pool, burst=50, limit=2 * len(fr), with_ts=True)
        q = port.rx_queue(0)
        assert int(q.st[L.S_WRAPS]) == 1 and int(q.st[L.S_WIN_LEN]) <= window
    assert [g[0] for g in got[:2 * len(fr)]] == fr + fr
    assert [g[1] for g in got[:4]] == [0, 1, 2000, 3]


def test_queues_in_threads(pool, tmp_path):
    """Each queue of a port in its own thread (as DPDK lcores): the same packets each."""
    import threading
    fr = frames([64, 700, 3000] * 300, seed=6)
    p = tmp_path / "t.pcap"
    p.write_bytes(naive.write_pcap([(i, f) for i, f in enumerate(fr)]))
    res = {}
    with PcapPort(pool, rx_pcap=[str(p)] * 3) as port:
        def run(qid):
            with pktbuf.lcore.bind(10 + qid):
                res[qid] = read_port(port, pool, qid)
        ts = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert all(res[i] == fr for i in range(3))
