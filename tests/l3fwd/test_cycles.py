"""Busy-cycle counting on both sides of ``pktbuf bench l3fwd``: ``pktbuf l3fwd
--record-core-cycles`` and DPDK's l3fwd built with ``cycles.patch`` print the same line, count
every packet they received, and forward exactly as without counting (byte-identical to each
other over net_pcap)."""
import re

import pytest

from pktbuf.bench.dpdk_ref import DpdkFailed, DpdkMissing

from .cases import frames_for
from .frames import read_pcap, write_pcap
from .test_vs_dpdk import _pktbuf, _vdevs

try:
    from pktbuf.bench.l3fwd_ref import build as ref
    REF = ref.build(cycles=True)
    WHY = ""
except (DpdkMissing, DpdkFailed) as e:
    REF, WHY = None, str(e)

LINE = re.compile(r"L3FWD: busy cycles=(\d+) packets=(\d+) tsc_hz=(\d+)")
APP = ["--", "-p", "0x3", "--config", "(0,0,0),(1,0,0)", "--parse-ptype"]


def _inputs(tmp_path, mode):
    ins = {0: frames_for(0, 1, mode), 1: frames_for(1, 0, mode)}
    write_pcap(tmp_path / "in0.pcap", ins[0])
    write_pcap(tmp_path / "in1.pcap", ins[1])
    return sum(len(f) for f in ins.values())


def test_pktbuf_counts_only_when_asked(tmp_path):
    n = _inputs(tmp_path, "lpm")
    r = _pktbuf(_vdevs(tmp_path, "p") + APP + ["--record-core-cycles"])
    assert r.returncode == 0, r.stdout + r.stderr
    m = LINE.findall(r.stdout)
    assert len(m) == 1, r.stdout
    cyc, pk, hz = (int(x) for x in m[0])
    assert pk == n and cyc > 0 and hz > 0
    r = _pktbuf(_vdevs(tmp_path, "q") + APP)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not LINE.search(r.stdout)
    for p in (0, 1):        # counting changes nothing on the wire
        assert read_pcap(tmp_path / f"p{p}.pcap") == read_pcap(tmp_path / f"q{p}.pcap")


@pytest.mark.skipif(REF is None, reason=f"DPDK's l3fwd unavailable: {WHY}")
@pytest.mark.parametrize("mode", ["lpm", "em"])
def test_patched_reference_counts_and_forwards_as_pktbuf(tmp_path, mode):
    n = _inputs(tmp_path, mode)
    app = APP + ["--lookup", mode]
    r = _pktbuf(_vdevs(tmp_path, "p") + app + ["--record-core-cycles"])
    assert r.returncode == 0, r.stdout + r.stderr
    mine = {p: read_pcap(tmp_path / f"p{p}.pcap") for p in (0, 1)}
    out = sum(len(f) for _, f in mine.values())
    d = ref.run(_vdevs(tmp_path, "d") + app, [tmp_path / "d0.pcap", tmp_path / "d1.pcap"],
                expect_frames=out, mem_mb=2048 if mode == "em" else 512, cycles=True)
    assert d.returncode == 0, d.stdout + d.stderr
    m = LINE.findall(d.stdout)
    assert len(m) == 1, d.stdout + d.stderr
    cyc, pk, hz = (int(x) for x in m[0])
    assert pk == n and cyc > 0 and hz > 0
    for p in (0, 1):
        assert read_pcap(tmp_path / f"d{p}.pcap") == mine[p], f"port {p} differs"
