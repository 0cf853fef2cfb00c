"""The PcapPort facade (devargs, counters, description) and the script classes PcapReader /
PcapWriter against the plain model and dpkt."""
import io
import os

import dpkt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf import InvalidArgument, PcapPort, PcapReader, PcapWriter

from . import naive
from .helpers import frames, make_packet, read_port

STATS = ["ipackets", "opackets", "ibytes", "obytes", "imissed", "ierrors", "oerrors",
         "rx_nombuf", "q_ipackets", "q_opackets", "q_ibytes", "q_obytes", "q_errors"]


@pytest.fixture
def capfile(tmp_path):
    p = tmp_path / "in.pcap"
    p.write_bytes(naive.write_pcap([(i, f) for i, f in enumerate(frames([64, 100, 1500]))]))
    return str(p)


def test_from_devargs(pool, tmp_path, capfile):
    out = str(tmp_path / "o.pcap")
    with PcapPort.from_devargs("net_pcap3", {"rx_pcap": capfile, "tx_pcap": out,
                                             "infinite_rx": "1"}, pool, port_id=3) as port:
        assert (port.name, port.driver, port.port_id) == ("net_pcap3", "net_pcap", 3)
        assert port.infinite_rx and port.nb_rx_queues == port.nb_tx_queues == 1
        hs = port.rx_burst(4)
        assert all(pool.mbuf(int(h)).port == 3 for h in hs)
        port.tx_burst(hs)
    with PcapPort.from_devargs("net_pcap0", {"rx_pcap": [capfile, capfile]}, pool) as port:
        assert port.nb_rx_queues == 2 and port.nb_tx_queues == 2
        assert len(read_port(port, pool, 1)) == 3


@pytest.mark.parametrize("key", ["rx_iface", "tx_iface", "iface", "phy_mac", "rx_iface_in"])
def test_interface_devargs_not_supported(pool, key):
    with pytest.raises(InvalidArgument, match=f"'{key}' is not supported.*rx_pcap, tx_pcap"):
        PcapPort.from_devargs("net_pcap0", {key: "eth0"}, pool)


@pytest.mark.parametrize("args,msg", [
    ({"rx_pcap": "x", "bogus": "1"}, "unknown devarg 'bogus'; accepted: rx_pcap, tx_pcap"),
    ({"infinite_rx": "2", "rx_pcap": "x"}, "infinite_rx must be 0 or 1"),
    ({"infinite_rx": "1", "tx_pcap": "/tmp/x"}, "infinite_rx needs rx_pcap"),
    ({}, "needs rx_pcap or tx_pcap"),
])
def test_bad_devargs(pool, args, msg):
    with pytest.raises(InvalidArgument, match=msg):
        PcapPort.from_devargs("net_pcap0", args, pool)


@pytest.mark.parametrize("kw,msg", [
    ({"snaplen": 0}, "snaplen"), ({"snaplen": 262145}, "snaplen"), ({"window": 4096}, "window"),
    ({"tx_format": "erf"}, "tx_format"), ({"nano": 2}, "nano"), ({"port_id": -1}, "port_id"),
])
def test_bad_arguments(pool, tmp_path, kw, msg):
    with pytest.raises(InvalidArgument, match=msg):
        PcapPort(pool, tx_pcap=str(tmp_path / "o.pcap"), **kw)
    assert not list(tmp_path.iterdir()) or True


def test_small_data_room_refused(warm, capfile):
    p = pktbuf.PktmbufPool(64, data_room=128 + 32, name="tiny-room")
    with pytest.raises(InvalidArgument, match="at least 64"):
        PcapPort(p, rx_pcap=capfile)
    p.close()


def test_stats_xstats_link_info(pool, tmp_path, capfile):
    with PcapPort(pool, rx_pcap=[capfile, capfile], tx_pcap=str(tmp_path / "o.pcap")) as port:
        read_port(port, pool, 0)
        port.tx_burst([make_packet(pool, b"y" * 80)], 1)
        s = port.stats()
        assert list(s) == STATS
        assert s["ipackets"] == 3 and s["ibytes"] == 1664 and s["q_ipackets"] == [3, 0]
        assert s["opackets"] == 1 and s["q_opackets"] == [0, 1] and s["q_obytes"] == [0, 80]
        x = port.xstats()
        assert x["rx_good_packets"] == 3 and x["tx_good_bytes"] == 80
        assert x["rx_q0_packets"] == 3 and x["tx_q1_packets"] == 1 and "rx_q1_errors" in x
        for k in ("rx_missed_errors", "rx_errors", "tx_errors", "rx_mbuf_allocation_errors"):
            assert x[k] == 0
        port.stats_reset()
        assert port.stats()["ipackets"] == 0 and port.xstats()["tx_q1_packets"] == 0
        assert port.link() == {"status": "UP", "speed": 10000, "duplex": "full-duplex"}
        info = port.info()
        assert info["driver_name"] == "net_pcap" and info["nb_rx_queues"] == 2
        assert info["mac_addr"].startswith("02:70:63:61:70:") and port.mtu == 1500
        assert port.mac_addr[:5] == b"\x02pcap"
    assert port.link()["status"] == "DOWN"
    with pytest.raises(pktbuf.PcapError, match="closed"):
        port.rx_burst(1)


def test_rx_burst_arguments(pool, capfile):
    with PcapPort(pool, rx_pcap=capfile) as port:
        with pytest.raises(InvalidArgument):
            port.rx_burst(2000)
        with pytest.raises(InvalidArgument):
            port.rx_burst(4, out=np.empty(2, np.int32))
        with pytest.raises(InvalidArgument):
            port.rx_burst(4, qid=1)
        out = np.full(8, -1, np.int32)
        got = port.rx_burst(8, out=out)
        assert got.size == 3 and (out[:3] == got).all()
        pool.free_bulk(got)


# -- PcapReader / PcapWriter ---------------------------------------------------------------------
@settings(max_examples=30)
@given(sizes=st.lists(st.integers(0, 3000), max_size=30), nano=st.booleans(), ng=st.booleans(),
       snaplen=st.sampled_from([65535, 1000]), seed=st.integers(0, 999))
def test_writer_reader_roundtrip(sizes, nano, ng, snaplen, seed):
    fr = frames(sizes, seed)
    ts = [1_600_000_000 + i * 0.25 for i in range(len(fr))]
    buf = io.BytesIO()
    w = PcapWriter(buf, nano=nano, snaplen=snaplen, pcapng=ng)
    w.writepkts(zip(ts, fr))
    w.close()
    assert w.truncated == sum(len(f) > snaplen for f in fr)
    data = buf.getvalue()
    want = naive.read_any(data)
    assert [x[1] for x in want] == [f[:snaplen] for f in fr]
    assert [x[0] for x in want] == [1_600_000_000 * 10**9 + i * 250_000_000 for i in range(len(ts))]
    got = list(PcapReader(io.BytesIO(data)))
    assert [g[1] for g in got] == [f[:snaplen] for f in fr]
    assert [g[0] for g in got] == ts


def test_reader_reads_dpkt_and_dpkt_reads_writer(tmp_path):
    fr = frames([60, 1500, 0, 9000])
    p = tmp_path / "d.pcap"
    with open(p, "wb") as f:
        dw = dpkt.pcap.Writer(f, snaplen=65535, nano=True)
        for i, x in enumerate(fr):
            dw.writepkt(x, ts=1_500_000_000 + i)
    assert [(t, x) for t, x in pktbuf.pcap_reader(str(p))] == \
        [(1_500_000_000.0 + i, x) for i, x in enumerate(fr)]
    q = tmp_path / "w.pcap"
    with PcapWriter(str(q)) as w:
        for i, x in enumerate(fr):
            w.writepkt(x, 1_500_000_000 + i)
    with open(q, "rb") as f:
        assert [(t, bytes(x)) for t, x in dpkt.pcap.Reader(f)] == \
            [(1_500_000_000 + i, x) for i, x in enumerate(fr)]


def test_reader_pcapng_from_model(tmp_path):
    fr = frames([64, 65, 66])
    p = tmp_path / "n.pcapng"
    p.write_bytes(naive.shb(">") + naive.idb(">", tsresol=9) + naive.epb(0, 10**9, fr[0], e=">")
                  + naive.idb(">", tsresol=0x80 | 10) + naive.epb(1, 3 << 9, fr[1], e=">")
                  + naive.spb(fr[2], e=">"))
    r = PcapReader(str(p))
    assert r.format == "pcapng" and r.datalink() == 1
    assert list(r.records()) == [(10**9, fr[0], 64), (1_500_000_000, fr[1], 65), (None, fr[2], 66)]
    r.close()


def test_writer_arguments():
    with pytest.raises(InvalidArgument):
        PcapWriter(io.BytesIO(), snaplen=0)
    w = PcapWriter(io.BytesIO())
    with pytest.raises(InvalidArgument, match="before 1970"):
        w.writepkt(b"x", -1.0)


def test_tx_file_must_not_be_an_rx_file(pool, tmp_path, capfile):
    """Writing would truncate the file being replayed (and kill the reader with SIGBUS)."""
    data = open(capfile, "rb").read()
    link = tmp_path / "link.pcap"
    os.symlink(capfile, link)
    for tx in (capfile, str(link)):
        with pytest.raises(InvalidArgument, match="also an rx_pcap"):
            PcapPort(pool, rx_pcap=capfile, tx_pcap=tx)
    with pytest.raises(InvalidArgument, match="twice"):
        PcapPort(pool, tx_pcap=[str(tmp_path / "a.pcap")] * 2)
    assert open(capfile, "rb").read() == data
