"""Tx: mbufs written to files, read back with the plain model; timestamps, snaplen, chains,
write errors, drop queues."""
import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf import PcapPort, PcapWriteError
from pktbuf.drivers.pcap import layout as L

from . import naive
from .helpers import frames, make_packet, read_port

SIZES = st.lists(st.one_of(st.integers(0, 128), st.integers(0, 2200), st.integers(0, 9018)),
                 min_size=0, max_size=60)


@settings(max_examples=40)
@given(sizes=SIZES, nano=st.booleans(), ng=st.booleans(), seg=st.sampled_from([None, 100, 1000]),
       snaplen=st.sampled_from([65535, 1514, 100, 1]), burst=st.integers(1, 64),
       seed=st.integers(0, 1 << 16))
def test_tx_matches_model(pool, tmp_path_factory, sizes, nano, ng, seg, snaplen, burst, seed):
    fr = frames(sizes, seed)
    path = tmp_path_factory.mktemp("tx") / ("o.pcapng" if ng else "o.pcap")
    t0 = time.time_ns()
    with PcapPort(pool, tx_pcap=str(path), nano=nano, snaplen=snaplen) as port:
        hs = np.array([make_packet(pool, f, seg) for f in fr], np.int32)
        for i in range(0, len(hs), burst):
            assert port.tx_burst(hs[i:i + burst]) == len(hs[i:i + burst])
        s = port.stats()
        assert s["opackets"] == len(fr) and s["obytes"] == sum(map(len, fr))
        assert port.xstats()["tx_q0_truncated"] == sum(len(f) > snaplen for f in fr)
    t1 = time.time_ns()
    data = path.read_bytes()
    got = naive.read_any(data)
    assert [g[1] for g in got] == [f[:snaplen] for f in fr]
    assert [g[2] for g in got] == [len(f) for f in fr]
    res = 1 if nano or ng else 1000
    assert all(t0 // res * res <= g[0] <= t1 for g in got)       # the wall clock
    if ng:
        assert data[:4] == b"\x0a\x0d\x0d\x0a"
    else:
        assert data[:4] == (b"\x4d\x3c\xb2\xa1" if nano else b"\xd4\xc3\xb2\xa1")
        assert int.from_bytes(data[16:20], "little") == snaplen


@pytest.mark.parametrize("nano,ng", [(True, False), (False, False), (True, True)])
def test_timestamps_carried_through(pool, tmp_path, nano, ng):
    """Replaying a capture into a capture keeps each packet's time (to the file's resolution)."""
    fr = frames([60, 1514, 9000, 0])
    ts = [1_700_000_000_123_456_789 + i * 1_000_000_007 for i in range(len(fr))]
    src = tmp_path / "in.pcapng"
    src.write_bytes(naive.shb() + naive.idb(tsresol=9)
                    + b"".join(naive.epb(0, t, f) for t, f in zip(ts, fr)))
    out = tmp_path / ("out.pcapng" if ng else "out.pcap")
    with PcapPort(pool, rx_pcap=str(src), tx_pcap=str(out), nano=nano) as port:
        while not port.rx_eof():
            hs = port.rx_burst(3)
            assert port.tx_burst(hs) == hs.size
    got = naive.read_any(out.read_bytes())
    assert [g[1] for g in got] == fr
    res = 1 if nano or ng else 1000
    assert [g[0] for g in got] == [t // res * res for t in ts]


def test_flush_and_file_contents(pool, tmp_path):
    """Records reach the file when the buffer fills, on flush() and on close()."""
    out = tmp_path / "f.pcap"
    port = PcapPort(pool, tx_pcap=str(out))
    port.tx_burst([make_packet(pool, f) for f in frames([100] * 10)])
    assert out.stat().st_size == 24
    port.flush()
    assert len(naive.read_pcap(out.read_bytes())) == 10
    n = 0
    while out.stat().st_size < 2 << 20:                  # twice the 1 MiB buffer
        port.tx_burst([make_packet(pool, f) for f in frames([1500] * 32, seed=n)])
        n += 1
    assert port.tx_queue(0).st[L.TS_WRITES] >= 2
    port.close()
    port.close()                                          # idempotent
    assert len(naive.read_pcap(out.read_bytes())) == 10 + 32 * n


def test_flush_every_burst(pool, tmp_path):
    out = tmp_path / "e.pcap"
    with PcapPort(pool, tx_pcap=str(out), flush_every_burst=True) as port:
        port.tx_burst([make_packet(pool, f) for f in frames([64] * 5)])
        assert len(naive.read_pcap(out.read_bytes())) == 5


def test_write_error(pool, tmp_path):
    """A write that fails (here EPIPE: the reader of a pipe is gone) stops the queue with a
    PcapWriteError; the buffered records count as oerrors; later bursts take nothing."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    port = PcapPort(pool, tx_pcap=f"/proc/self/fd/{w}", flush_every_burst=True)
    os.close(w)
    os.read(r, 24)
    os.close(r)
    hs = [make_packet(pool, f) for f in frames([100] * 4)]
    assert port.tx_burst(hs[:2]) == 2                     # taken, then the write failed
    with pytest.raises(PcapWriteError, match="Broken pipe") as ei:
        port.tx_burst(hs[2:])
    assert ei.value.errno == 32
    assert port.stats()["oerrors"] == 2
    with pytest.raises(PcapWriteError):
        port.flush()
    with pytest.raises(PcapWriteError):
        port.close()
    assert port.closed
    pool.free_bulk(hs[2:])


def test_drop_queue_and_null_queue(pool, tmp_path):
    """As DPDK: an Rx-only port gets drop Tx queues (count and free), a Tx-only port null Rx
    queues (never deliver)."""
    src = tmp_path / "i.pcap"
    src.write_bytes(naive.write_pcap([(0, f) for f in frames([64, 64])]))
    with PcapPort(pool, rx_pcap=str(src)) as port:
        assert port.nb_tx_queues == 1
        hs = port.rx_burst(32)
        assert port.tx_burst(hs) == 2 and port.stats()["opackets"] == 2
    with PcapPort(pool, tx_pcap=[str(tmp_path / "a.pcap"), str(tmp_path / "b.pcap")]) as port:
        assert port.nb_rx_queues == 2 and port.rx_eof(1) and port.rx_burst(32, 1).size == 0


def test_bad_packets_refused(pool, tmp_path):
    with PcapPort(pool, tx_pcap=str(tmp_path / "x.pcap")) as port:
        h = make_packet(pool, b"x" * 60)
        with pytest.raises(pktbuf.DoubleFree):
            port.tx_burst([h, h])
        with pytest.raises(pktbuf.InvalidHandle):
            port.tx_burst([h, -1])
        pool.mbuf(h).free()
        with pytest.raises(pktbuf.DoubleFree):
            port.tx_burst([h])
        assert port.stats()["opackets"] == 0
