"""Broken files: a clear PcapFormatError after every valid packet before the damage, no
mbuf lost, no read outside the file -- through the port (kernels) and PcapReader alike."""
import struct

import pytest

import pktbuf
from pktbuf import PcapFormatError, PcapPort, PcapReader
from pktbuf.kernels import pcap_rx_eof

from . import naive
from .helpers import frames, read_port

FR = frames([60, 200, 1514])
GOOD = [(i * 1000, f) for i, f in enumerate(FR)]


def _rec(cap, orig=None, ts=0):
    return struct.pack("<IIII", ts, 0, cap, cap if orig is None else orig)


def _ng(*blocks):
    return naive.shb() + naive.idb(snaplen=2000) + b"".join(blocks)


def _good_ng():
    return b"".join(naive.epb(0, t, f) for t, f in GOOD)


CASES = {
    # classic pcap: (file bytes, packets before the damage, message part)
    "truncated record header": (naive.write_pcap(GOOD) + _rec(10)[:9], 3, "truncated"),
    "truncated record data": (naive.write_pcap(GOOD) + _rec(100) + b"x" * 99, 3, "truncated"),
    "caplen above snaplen": (naive.write_pcap(GOOD, snaplen=1514) + _rec(1515) + b"x" * 1515, 3,
                             "snaplen"),
    "caplen above 262144": (naive.write_pcap(GOOD, snaplen=0x7FFFFFFF) + _rec(262145)
                            + b"x" * 262145, 3, "262144"),
    "caplen 0xffffffff": (naive.write_pcap(GOOD) + _rec(0xFFFFFFFF), 3, "snaplen"),
    # pcapng
    "pcapng truncated block": (_ng(_good_ng(), naive.epb(0, 1, FR[0])[:-1]), 3, "truncated"),
    "pcapng block length not x4": (_ng(_good_ng(), struct.pack("<II", 6, 33) + b"\0" * 25), 3,
                                   "multiple of 4"),
    "pcapng block length < 12": (_ng(_good_ng(), struct.pack("<II", 6, 8) + b"\0" * 8), 3,
                                 "too short"),
    "pcapng block length huge": (_ng(_good_ng(), struct.pack("<II", 6, 0xFFFFFFF0)
                                     + b"\0" * 24), 3, "above 1 MiB"),
    "pcapng trailing length differs": (_ng(_good_ng(), naive.epb(0, 1, FR[0])[:-4]
                                           + struct.pack("<I", 1000)), 3, "trailing"),
    "pcapng caplen beyond block": (_ng(_good_ng(), naive.block(6, struct.pack(
        "<IIIII", 0, 0, 0, 500, 500) + b"\0" * 100)), 3, "its block"),
    "pcapng caplen above snaplen": (_ng(_good_ng(), naive.epb(0, 1, b"x" * 2001)), 3, "snaplen"),
    "pcapng unknown interface": (_ng(_good_ng(), naive.epb(1, 1, FR[0])), 3, "interface"),
    "pcapng packet before IDB": (naive.shb() + naive.epb(0, 1, FR[0]), 0, "interface"),
    "pcapng linktype not Ethernet": (_ng(_good_ng(), naive.idb(linktype=105)), 3, "link type"),
    "pcapng bad second SHB magic": (_ng(_good_ng(), naive.shb()[:8] + b"\x11\x22\x33\x44"
                                        + naive.shb()[12:]), 3, "byte-order magic"),
    "pcapng SHB version 1.1": (_ng(_good_ng(), naive.shb()[:12] + struct.pack("<HH", 1, 1)
                                   + naive.shb()[16:]), 3, "version"),
    "pcapng option past its block": (naive.shb() + naive.block(1, struct.pack(
        "<HHI", 1, 0, 0) + struct.pack("<HH", 9, 200) + b"\0" * 4), 0, "option"),
    "pcapng bad if_tsresol": (naive.shb() + naive.idb(tsresol=40), 0, "if_tsresol"),
    "pcapng SPB before IDB": (naive.shb() + naive.spb(FR[0]), 0, "interface"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_port_raises_after_valid_packets(pool, tmp_path, case):
    data, n_ok, msg = CASES[case]
    p = tmp_path / ("f.pcapng" if case.startswith("pcapng") else "f.pcap")
    p.write_bytes(data)
    avail = pool.avail_count
    with PcapPort(pool, rx_pcap=str(p)) as port:
        got = []
        with pytest.raises(PcapFormatError, match=msg) as ei:
            while True:
                hs = port.rx_burst(32)
                got += [pool.mbuf(int(h)).tobytes() for h in hs]
                pool.free_bulk(hs)
        assert got == FR[:n_ok]
        assert ei.value.offset is not None and 0 <= ei.value.offset < len(data)
        assert pcap_rx_eof(port.rx_queue(0)) and port.stats()["ierrors"] == 1
        with pytest.raises(PcapFormatError):                # and it stays failed
            port.rx_burst(32)
        with pytest.raises(PcapFormatError, match=msg):     # a loop on rx_eof() sees it too
            port.rx_eof()
    assert pool.avail_count == avail
    with pytest.raises(naive.Malformed):
        naive.read_any(data)


@pytest.mark.parametrize("case", sorted(CASES))
def test_reader_raises_after_valid_packets(tmp_path, case):
    data, n_ok, msg = CASES[case]
    p = tmp_path / "f.cap"
    p.write_bytes(data)
    got = []
    with pytest.raises(PcapFormatError):
        for _, f in PcapReader(str(p)):
            got.append(f)
    assert got == FR[:n_ok]


BAD_HEADERS = {
    "empty": (b"", "shorter than a file header"),
    "bad magic": (b"\x00\x01\x02\x03" + b"\0" * 40, "not a pcap or pcapng file"),
    "short pcap header": (naive.write_pcap([])[:20], "truncated pcap file header"),
    "pcap version 1": (naive.write_pcap([], version=(1, 0)), "unsupported pcap version"),
    "pcap link type": (naive.write_pcap([], linktype=105), "link type 105"),
    "pcapng bad byte-order magic": (naive.shb()[:8] + b"abcd" + naive.shb()[12:],
                                    "byte-order magic"),
    "pcapng short": (naive.shb()[:10], "truncated pcapng"),
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_bad_header_refused_at_open(pool, tmp_path, case):
    data, msg = BAD_HEADERS[case]
    p = tmp_path / "h.pcap"
    p.write_bytes(data)
    with pytest.raises(PcapFormatError, match=msg):
        PcapPort(pool, rx_pcap=str(p))
    with pytest.raises(PcapFormatError, match=msg):
        PcapReader(str(p))


def test_strict_off_reads_records_above_snaplen(pool, tmp_path):
    """dpkt writes snaplen 1500 and longer records; strict=False reads them whole (as
    Wireshark and dpkt do), strict (the default) refuses them."""
    fr = frames([100, 3000])
    p = tmp_path / "d.pcap"
    p.write_bytes(naive.write_pcap([(0, fr[0])], snaplen=1500) + _rec(3000) + fr[1])
    with PcapPort(pool, rx_pcap=str(p), strict=False) as port:
        assert read_port(port, pool) == fr
    assert [f for _, f in PcapReader(str(p), strict=False)] == fr
    with PcapPort(pool, rx_pcap=str(p)) as port:
        with pytest.raises(PcapFormatError, match="snaplen"):
            read_port(port, pool)


def test_not_a_regular_file(pool, tmp_path):
    with pytest.raises(pktbuf.InvalidArgument, match="regular file"):
        PcapPort(pool, rx_pcap=str(tmp_path))
    with pytest.raises(pktbuf.InvalidArgument, match="No such file"):
        PcapPort(pool, rx_pcap=str(tmp_path / "missing.pcap"))
