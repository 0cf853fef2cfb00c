"""pktbuf l3fwd against DPDK 22.11's own l3fwd, frame for frame, over net_pcap ports.

Both run on the same two captures with the same options (DPDK's built once from dpdk-doc's
sources with the offloads patch, cached: pktbuf.bench.l3fwd_ref.build); every output port's
frames must be byte-identical, in order, and so must the capture files' headers.  The naive
model (pktbuf.apps.l3fwd.naive) is checked against DPDK's output in the same runs.
"""
import os
import subprocess
import sys

import pytest

from pktbuf.apps.l3fwd import naive, routes
from pktbuf.bench.dpdk_ref import DpdkFailed, DpdkMissing

from .cases import frames_for
from .frames import read_pcap, write_pcap

try:
    from pktbuf.bench.l3fwd_ref import build as ref
    REF = ref.build()
    WHY = ""
except (DpdkMissing, DpdkFailed) as e:       # no DPDK, no dpdk-doc, no compiler
    REF, WHY = None, str(e)

pytestmark = pytest.mark.skipif(REF is None, reason=f"DPDK's l3fwd unavailable: {WHY}")

PCAP_MACS = {0: bytes.fromhex("027063617000"), 1: bytes.fromhex("027063617001")}
ETH_DEST = ["--eth-dest", "0,AA:BB:CC:DD:EE:00", "--eth-dest=1,aa:bb:cc:dd:ee:01"]


def _vdevs(d, out="out"):
    return ["--vdev", f"net_pcap0,rx_pcap={d}/in0.pcap,tx_pcap={d}/{out}0.pcap",
            "--vdev", f"net_pcap1,rx_pcap={d}/in1.pcap,tx_pcap={d}/{out}1.pcap"]


def _pktbuf(args, timeout=240):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "pktbuf.apps.l3fwd", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def _rules(d, mode):
    """Route files exercising what the defaults do not: deeper and shorter prefixes, a route
    to a port outside -p (skipped), duplicates (the last wins)."""
    if mode == "em":
        v4 = ("# flows\nR198.18.0.0 198.18.0.1 9 9 0x11 1\nR198.18.1.0 198.18.1.1 9 9 17 0\n"
              "R198.18.1.0 198.18.1.1 9 10 17 1\nR10.0.0.1 198.18.1.7 0 0 6 1\n"
              "R198.18.5.0 198.18.5.1 9 9 17 2\n")
        v6 = "R2001:200:0:0::0 2001:200:0:0::1 9 9 17 1\n"
    else:
        v4 = ("# routes\n\nR198.18.0.0/24 1\nR198.18.1.0/24 0\nR198.18.1.7/32 1\n"
              "R10.0.0.0/8 2\nR10.9.0.0/16 1\nR198.18.200.0/0x18 0\nR198.18.0.0/24 0\n")
        v6 = ("R2001:200:0:1::/64 0\nR2001:200::/48 1\nR2001:200:0:0::/64 0\n"
              "R2001:db8::/32 1\nR2001:200:0:7::/64 3\n")
    (d / "r4").write_text(v4)
    (d / "r6").write_text(v6)
    return ["--rule_ipv4", str(d / "r4"), "--rule_ipv6", str(d / "r6")]


CASES = {
    "lpm": ["--parse-ptype"],
    "lpm-eth-dest-rules": ["--parse-ptype", "-P", "--max-pkt-len", "1518", *ETH_DEST, "RULES"],
    "em": ["--lookup", "em", "--parse-ptype"],
    "em-ipv6": ["--lookup=em", "--parse-ptype", "--ipv6", *ETH_DEST],
    "em-rules": ["-E", "--parse-ptype", "RULES"],
    "fib": ["--lookup", "fib", "--parse-ptype", "RULES"],
}


def _model_outputs(mode, extra, d, ins):
    em = mode == "em"
    if "--rule_ipv4" in extra:
        rd = routes.read_em if em else routes.read_lpm
        v4, v6 = rd(d / "r4", False), rd(d / "r6", True)
    else:
        dflt = routes.default_em if em else routes.default_lpm
        v4, v6 = dflt(False), dflt(True)
    eth_dest = {}
    if "--eth-dest" in " ".join(extra):
        eth_dest = {0: bytes.fromhex("aabbccddee00"), 1: bytes.fromhex("aabbccddee01")}
    m = naive.Model(mode, 0x3, v4, v6, ipv6_em="--ipv6" in extra, eth_dest=eth_dest,
                    src_macs=PCAP_MACS)
    outs = {0: [], 1: []}
    # the loop polls port 0 then port 1, up to 32 packets each time (MAX_PKT_BURST)
    for k in range(0, max(len(f) for f in ins.values()), 32):
        for rx, frames in ins.items():
            for fr in frames[k:k + 32]:
                port, _, out = m.forward(fr + bytes(max(0, naive.SPAN - len(fr))), len(fr), rx)
                if port is not None:
                    outs[port].append(out)
    return outs


@pytest.mark.parametrize("case", list(CASES))
def test_byte_identical(tmp_path, case):
    mode = "em" if case.startswith("em") else case.split("-")[0]
    extra = list(CASES[case])
    if "RULES" in extra:
        i = extra.index("RULES")
        extra[i:i + 1] = _rules(tmp_path, mode)
    ins = {0: frames_for(0, 1, mode), 1: frames_for(1, 0, mode)}
    write_pcap(tmp_path / "in0.pcap", ins[0])
    write_pcap(tmp_path / "in1.pcap", ins[1])
    app = ["--", "-p", "0x3", "--config", "(0,0,0),(1,0,0)", *extra]
    r = _pktbuf(_vdevs(tmp_path, "p") + app)
    assert r.returncode == 0, r.stdout + r.stderr
    mine = {p: read_pcap(tmp_path / f"p{p}.pcap") for p in (0, 1)}
    n = sum(len(f) for _, f in mine.values())
    d = ref.run(_vdevs(tmp_path, "d") + app, [tmp_path / "d0.pcap", tmp_path / "d1.pcap"],
                expect_frames=n, mem_mb=2048 if mode == "em" else 512)
    assert d.returncode == 0, d.stdout + d.stderr
    theirs = {p: read_pcap(tmp_path / f"d{p}.pcap") for p in (0, 1)}
    model = _model_outputs(mode, extra, tmp_path, ins)
    for p in (0, 1):
        (h1, f1), (h2, f2) = mine[p], theirs[p]
        assert h1 == h2, f"port {p}: pcap header {h1.hex()} != DPDK's {h2.hex()}"
        assert len(f1) == len(f2), f"port {p}: {len(f1)} frames, DPDK {len(f2)}"
        for i, (a, b) in enumerate(zip(f1, f2)):
            assert a == b, f"port {p} frame {i}:\n pktbuf {a.hex()}\n dpdk   {b.hex()}"
        assert model[p] == f2, f"the naive model differs from DPDK on port {p}"
    assert "l3fwd:" in r.stdout


def test_refuses_without_parse_ptype(tmp_path):
    """l3fwd asks the port for its packet types; net_pcap has none: status 1, and each Tx
    file holds its header only."""
    ins = frames_for(0, 1, "lpm")[:4]
    write_pcap(tmp_path / "in0.pcap", ins)
    write_pcap(tmp_path / "in1.pcap", ins)
    app = ["--", "-p", "0x3", "--config", "(0,0,0),(1,0,0)"]
    r = _pktbuf(_vdevs(tmp_path, "p") + app)
    assert r.returncode == 1
    assert "port 0 cannot parse packet type, please add --parse-ptype" in r.stdout
    d = ref.run(_vdevs(tmp_path, "d") + app, [tmp_path / "d0.pcap", tmp_path / "d1.pcap"],
                settle_s=0.2, timeout_s=20)
    assert d.returncode == 1
    assert "port 0 cannot parse packet type, please add --parse-ptype" in d.stdout
    for p in (0, 1):
        assert (tmp_path / f"p{p}.pcap").read_bytes() == (tmp_path / f"d{p}.pcap").read_bytes()
