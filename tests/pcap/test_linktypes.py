"""Link types other than Ethernet (docs/pcap.md, "Link types"): LINUX_SLL, LINUX_SLL2 and raw
IP become Ethernet frames by the documented rule, any other link type is skipped and counted
(``linktypes=any``) or refused; pcap and pcapng, per interface.  The port (kernels) and
PcapReader agree; captures made by real ``tcpdump``/``dumpcap`` on ``any`` and on a tun device
in a network namespace are checked against ``tshark``."""
from __future__ import annotations

import fcntl
import ipaddress
import os
import signal
import socket
import struct
import subprocess
import time

import pytest

from pktbuf import PcapFormatError, PcapPort, PcapReader

from ..netns import Netns, need_root
from . import naive
from .helpers import read_port, require_tool

IP4 = bytes.fromhex("450000200001000040110000") + bytes([10, 0, 0, 1, 10, 0, 0, 2]) + \
    struct.pack(">HHHH", 1000, 2000, 12, 0) + b"abcd"
IP6 = bytes.fromhex("6000000000081140") + b"\x20\x01\x0d\xb8" + b"\0" * 11 + b"\x01" + \
    b"\x20\x01\x0d\xb8" + b"\0" * 11 + b"\x02" + struct.pack(">HHHH", 1, 2, 8, 0)
MAC = bytes.fromhex("02aabbccddee")


def sll(payload, proto=0x0800, pkttype=0, halen=6, addr=MAC):
    return struct.pack(">HHH", pkttype, 1, halen) + addr.ljust(8, b"\0") + \
        struct.pack(">H", proto) + payload


def sll2(payload, proto=0x0800, pkttype=0, halen=6, addr=MAC):
    return struct.pack(">HHIHBB", proto, 0, 3, 1, pkttype, halen) + addr.ljust(8, b"\0") + \
        payload


def eth(dst, src, proto, payload):
    return dst + src + struct.pack(">H", proto) + payload


Z, B = b"\0" * 6, b"\xff" * 6
# link type -> [(record, the Ethernet frame it must become, or None: skipped)]
RECORDS = {
    113: [(sll(IP4), eth(Z, MAC, 0x0800, IP4)),
          (sll(IP6, 0x86DD, pkttype=1), eth(B, MAC, 0x86DD, IP6)),
          (sll(b"\x42\x42\x03xyz", proto=4), None),               # 802.2 LLC: no EtherType
          (sll(IP4, 0x0806, halen=0, addr=b""), eth(Z, Z, 0x0806, IP4)),
          (sll(IP4)[:15], None)],                                  # shorter than its header
    276: [(sll2(IP4), eth(Z, MAC, 0x0800, IP4)),
          (sll2(IP6, 0x86DD, pkttype=1, halen=8, addr=b"12345678"), eth(B, Z, 0x86DD, IP6)),
          (sll2(IP4, proto=0x000C), None)],                        # CAN
    101: [(IP4, eth(Z, Z, 0x0800, IP4)), (IP6, eth(Z, Z, 0x86DD, IP6)), (b"\x10abc", None),
          (b"", None)],
    228: [(IP4, eth(Z, Z, 0x0800, IP4))],
    229: [(IP6, eth(Z, Z, 0x86DD, IP6))],
    1: [(eth(MAC, Z, 0x88B5, b"e" * 50), eth(MAC, Z, 0x88B5, b"e" * 50))],
    105: [(b"\x08\x02" + b"w" * 30, None)],                       # IEEE 802.11: not read
}


def pcap_of(lt, recs):
    data = naive.write_pcap([(i * 1000, r) for i, r in enumerate(recs)])
    return data[:20] + struct.pack("<I", lt) + data[24:]


def _read(pool, path, **kw):
    with PcapPort(pool, rx_pcap=str(path), **kw) as port:
        got = read_port(port, pool)
        x = port.xstats()
    return got, x


@pytest.mark.parametrize("lt", sorted(RECORDS))
def test_pcap_of_each_link_type(pool, tmp_path, lt):
    recs = [r for r, _ in RECORDS[lt]]
    want = [f for _, f in RECORDS[lt] if f is not None]
    p = tmp_path / "f.pcap"
    p.write_bytes(pcap_of(lt, recs))
    got, x = _read(pool, p, linktypes="any")
    assert got == want
    assert x["rx_q0_skipped_frames"] == len(recs) - len(want)
    assert x["rx_q0_converted"] == (0 if lt == 1 else len(want))
    with PcapReader(str(p), linktypes="any") as r:
        assert [f for _, f in r] == want and r.skipped == len(recs) - len(want)
    if lt == 1:
        return
    with pytest.raises(PcapFormatError, match=f"link type {lt}"):
        PcapPort(pool, rx_pcap=str(p), linktypes="ethernet")
    if lt == 105:
        with pytest.raises(PcapFormatError, match="link type 105"):
            PcapPort(pool, rx_pcap=str(p))                   # Python's default: convertible
    else:
        assert _read(pool, p)[0] == want


def test_pcapng_per_interface_and_bursts(pool, tmp_path):
    """Interfaces of every link type in one section, their packets interleaved: each is
    delivered by its own interface's rule, at every burst size (skips counted once)."""
    lts = sorted(RECORDS)
    blocks = [naive.shb()] + [naive.idb(linktype=lt) for lt in lts]
    want = []
    for k in range(3):
        for i, lt in enumerate(lts):
            for rec, f in RECORDS[lt]:
                blocks.append(naive.epb(i, k, rec))
                if f is not None:
                    want.append(f)
    nskip = 3 * sum(f is None for lt in lts for _, f in RECORDS[lt])
    p = tmp_path / "m.pcapng"
    p.write_bytes(b"".join(blocks))
    for burst in (1, 3, 32):
        with PcapPort(pool, rx_pcap=str(p), linktypes="any") as port:
            assert read_port(port, pool, burst=burst) == want
            assert port.xstats()["rx_q0_skipped_frames"] == nskip
    with PcapReader(str(p), linktypes="any") as r:
        assert [f for _, f in r] == want
    with PcapPort(pool, rx_pcap=str(p)) as port:           # convertible: 105 is refused
        with pytest.raises(PcapFormatError, match="link type 105"):
            read_port(port, pool)
    with PcapPort(pool, rx_pcap=str(p), linktypes="ethernet") as port:
        with pytest.raises(PcapFormatError, match="link type 101"):
            read_port(port, pool)


# -- real captures ----------------------------------------------------------------------------
TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000


class Capture:
    """``tcpdump`` or ``dumpcap`` capturing in namespace ``ns`` until :meth:`stop`."""

    def __init__(self, ns, argv, path):
        self.path = path
        self.p = subprocess.Popen(ns.exec_argv(argv), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        line = ""
        end = time.monotonic() + 20
        while time.monotonic() < end:                      # "listening on", "Capturing on"
            line = self.p.stderr.readline()
            if "listening on" in line or "Capturing on" in line or not line:
                break
        assert "listening" in line or "Capturing" in line, line
        time.sleep(0.2)

    def stop(self):
        time.sleep(0.3)
        self.p.send_signal(signal.SIGINT)
        self.err = self.p.communicate(timeout=20)[1]
        return self.path


def tshark(path, *fields):
    r = subprocess.run(["tshark", "-r", path, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f",
                        *sum((["-e", f] for f in fields), [])],
                       capture_output=True, text=True, check=True)
    return [line.split("|") for line in r.stdout.splitlines()]


def linktypes_of(path):
    """capinfos' short name of the file's encapsulation (``per-packet``: several)."""
    r = subprocess.run(["capinfos", "-E", "-T", "-r", path], capture_output=True, text=True,
                       check=True)
    return r.stdout.split("\t")[-1].strip()


def addrs(frame):
    """(EtherType, source, destination) of an Ethernet frame's IP header, as tshark says them."""
    et = int.from_bytes(frame[12:14], "big")
    if et == 0x0800:
        return "0x0800", str(ipaddress.ip_address(frame[26:30])), \
            str(ipaddress.ip_address(frame[30:34]))
    if et == 0x86DD:
        return "0x86dd", str(ipaddress.ip_address(frame[22:38])), \
            str(ipaddress.ip_address(frame[38:54]))
    return f"0x{et:04x}", "", ""


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """tcpdump -i any (LINUX_SLL2 and LINUX_SLL), dumpcap -i any (pcapng), tcpdump on a tun
    device (raw IP) and on a veth (Ethernet), and mergecap of an Ethernet and an SLL one."""
    need_root("capturing in a network namespace")
    for t in ("tcpdump", "dumpcap", "tshark", "mergecap", "capinfos"):
        require_tool(t)
    d = tmp_path_factory.mktemp("cap")
    out = {}
    with Netns() as a, Netns() as b:
        a.veth("veth0", "veth1", peer=b)
        a.run("ip", "addr", "add", "10.7.0.1/24", "dev", "veth0")
        b.run("ip", "addr", "add", "10.7.0.2/24", "dev", "veth1")
        with a.entered():                                  # the device is made in `a`
            tun = os.open("/dev/net/tun", os.O_RDWR)
            fcntl.ioctl(tun, TUNSETIFF, struct.pack("16sH", b"tun0", IFF_TUN | IFF_NO_PI))
        a.run("ip", "link", "set", "tun0", "up")
        caps = {
            "sll2": ["tcpdump", "--immediate-mode", "-i", "any", "-y", "LINUX_SLL2", "-U", "-w", str(d / "sll2.pcap")],
            "sll": ["tcpdump", "--immediate-mode", "-i", "any", "-y", "LINUX_SLL", "-U", "-w", str(d / "sll.pcap")],
            "dumpcap": ["dumpcap", "-q", "-i", "any", "-w", str(d / "any.pcapng")],
            "tun": ["tcpdump", "--immediate-mode", "-i", "tun0", "-U", "-w", str(d / "tun.pcap")],
            "eth": ["tcpdump", "--immediate-mode", "-i", "veth0", "-U", "-w", str(d / "eth.pcap")],
        }
        running = {k: Capture(a, argv, argv[argv.index("-w") + 1]) for k, argv in caps.items()}
        try:
            with a.entered():                              # UDP over the veth (and ARP)
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for i in range(3):
                u.sendto(b"pktbuf %d" % i, ("10.7.0.2", 9))
                time.sleep(0.05)
            u.close()
            for pkt in (IP4, IP6, IP4[:20] + IP4[20:]):
                os.write(tun, pkt)                         # raw IP "received" on tun0
        finally:
            for k, c in running.items():
                out[k] = c.stop()
                out[k + ".err"] = c.err
            os.close(tun)
    subprocess.run(["mergecap", "-w", str(d / "merged.pcapng"), out["eth"], out["sll"]],
                   check=True)
    out["merged"] = str(d / "merged.pcapng")
    return out


@pytest.mark.parametrize("which, linktype", [
    ("sll2", "linux-sll2"), ("sll", "linux-sll"), ("dumpcap", "linux-sll"), ("tun", "rawip"),
    ("merged", "per-packet")])
def test_real_captures_against_tshark(pool, captures, which, linktype):
    path = captures[which]
    assert linktypes_of(path) == linktype
    with PcapPort(pool, rx_pcap=path, linktypes="any") as port:
        got = read_port(port, pool)
        x = port.xstats()
    rows = tshark(path, "frame.cap_len", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
                  "sll.src.eth", "sll.etype")
    assert len(got) == len(rows) > 0, captures.get(which + ".err")
    assert x["rx_q0_skipped_frames"] == 0
    n_sll = sum(1 for r in rows if r[6])
    assert x["rx_q0_converted"] == (n_sll if which == "merged" else len(got))
    kinds = set()
    for f, (cap, s4, d4, s6, d6, sll_src, sll_et) in zip(got, rows):
        et, src, dst = addrs(f)
        kinds.add(et)
        if et == "0x0800":
            assert (src, dst) == (s4, d4)
        elif et == "0x86dd":
            assert (src, dst) == (s6, d6)
        if sll_et:                                         # converted from SLL / SLL2
            assert int(sll_et, 16) == int(et, 16)
            assert len(f) == int(cap) - (20 if which == "sll2" else 16) + 14
            if sll_src and len(sll_src.split(":")) == 6:
                assert f[6:12] == bytes.fromhex(sll_src.replace(":", ""))
        elif which == "tun":
            assert len(f) == int(cap) + 14 and f[:12] == b"\0" * 12
        else:
            assert len(f) == int(cap)
    assert "0x0800" in kinds
    if which in ("tun", "sll", "sll2", "dumpcap"):
        assert "0x86dd" in kinds or which != "tun"
    with PcapReader(path, linktypes="any") as r:
        assert [fr for _, fr in r] == got
