"""Interop with the tools people read captures with: tcpdump (libpcap 1.10) and tshark
(Wireshark 4.0).  Files we write, read by them byte for byte; files they write, read by us.
In CI these tests must run: ``.ci/run`` installs tcpdump and tshark."""
import subprocess

import numpy as np
import pytest

from pktbuf import PcapPort, PcapReader

from . import naive
from .helpers import frames, make_packet, read_port, require_tool

SIZES = [0, 1, 14, 60, 64, 65, 128, 1514, 1515, 2048, 4000, 9018]
TS = [1_700_000_000_000_000_000 + i * 1_234_567_891 for i in range(len(SIZES))]


def _run(argv):
    return subprocess.run(argv, capture_output=True, check=True, timeout=120).stdout.decode()


def tcpdump_frames(path):
    """Every frame's bytes as ``tcpdump -xx`` prints them (link header included)."""
    out = []
    for line in _run(["tcpdump", "-r", str(path), "-xx", "-nn", "-tt"]).splitlines():
        if line.startswith("\t0x"):
            out[-1] += bytes.fromhex("".join(line.split(":", 1)[1].split()))
        else:
            out.append(b"")
    return out


def tshark_frames(path):
    """Every frame's bytes from ``tshark -x`` (the frame's own hex dump only)."""
    out = [b""]
    for line in _run(["tshark", "-r", str(path), "-x"]).splitlines():
        if not line.strip():
            if out[-1]:
                out.append(b"")
            continue
        out[-1] += bytes.fromhex("".join(line[6:6 + 47].split()))
    return [f for f in out if f] if out[-1] else out[:-1]


def tshark_fields(path):
    rows = _run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.len", "-e",
                 "frame.cap_len", "-e", "frame.time_epoch"]).splitlines()
    return [tuple(r.split("\t")) for r in rows]


@pytest.fixture
def ours(pool, tmp_path, request):
    """Files written by a PcapPort: classic pcap µs and ns, pcapng; snaplen 4000."""
    fr = frames(SIZES, seed=5)
    src = tmp_path / "src.pcapng"
    src.write_bytes(naive.shb() + naive.idb(tsresol=9)
                    + b"".join(naive.epb(0, t, f) for t, f in zip(TS, fr)))
    outs = {k: tmp_path / f"ours_{k}" for k in ("us.pcap", "ns.pcap", "ng.pcapng")}
    for name, out in outs.items():
        with PcapPort(pool, rx_pcap=str(src), tx_pcap=str(out), nano=name != "us.pcap",
                      snaplen=4000) as port:
            while not port.rx_eof():
                hs = port.rx_burst(5)
                assert port.tx_burst(hs) == hs.size
    return fr, outs


@pytest.mark.parametrize("kind", ["us.pcap", "ns.pcap", "ng.pcapng"])
def test_tcpdump_reads_ours(ours, kind):
    require_tool("tcpdump")
    fr, outs = ours
    assert tcpdump_frames(outs[kind]) == [f[:4000] for f in fr]


@pytest.mark.parametrize("kind", ["us.pcap", "ns.pcap", "ng.pcapng"])
def test_tshark_reads_ours(ours, kind):
    require_tool("tshark")
    fr, outs = ours
    # (tshark -x prints nothing for an empty frame: its length is checked below)
    assert tshark_frames(outs[kind]) == [f[:4000] for f in fr if f]
    fields = tshark_fields(outs[kind])
    assert [(int(a), int(b)) for a, b, _ in fields] == [(len(f), min(len(f), 4000)) for f in fr]
    res = 1000 if kind == "us.pcap" else 1
    want = [f"{t // 10**9}.{(t % 10**9) // res * res:09d}" for t in TS]
    assert [c for _, _, c in fields] == want


def _theirs_read_by_us(pool, path, fr, ts):
    """Through the port (kernels) and through PcapReader."""
    with PcapPort(pool, rx_pcap=str(path)) as port:
        got = read_port(port, pool, with_ts=True)
    assert [g[0] for g in got] == fr
    assert [g[1] for g in got] == ts
    with PcapReader(str(path)) as r:
        assert [(f, t) for t, f, _ in r.records()] == list(zip(fr, ts))


@pytest.mark.parametrize("prec", ["micro", "nano"])
def test_we_read_tcpdump(pool, ours, tmp_path, prec):
    require_tool("tcpdump")
    fr, outs = ours
    theirs = tmp_path / "tcpdump.pcap"
    _run(["tcpdump", "-r", str(outs["ng.pcapng"]), "-w", str(theirs),
          f"--time-stamp-precision={prec}"])
    res = 1000 if prec == "micro" else 1
    _theirs_read_by_us(pool, theirs, [f[:4000] for f in fr], [t // res * res for t in TS])


@pytest.mark.parametrize("fmt", ["pcapng", "pcap", "nsecpcap"])
def test_we_read_tshark(pool, ours, tmp_path, fmt):
    require_tool("tshark")
    fr, outs = ours
    theirs = tmp_path / f"tshark.{fmt}"
    _run(["tshark", "-r", str(outs["ns.pcap"]), "-F", fmt, "-w", str(theirs)])
    res = 1000 if fmt == "pcap" else 1
    _theirs_read_by_us(pool, theirs, [f[:4000] for f in fr], [t // res * res for t in TS])
