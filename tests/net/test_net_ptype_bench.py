"""``pktbuf.bench.net_ptype``: shape and arithmetic only, no timing asserted.  With DPDK the C
side must classify the same frames to the same check value (the bench refuses otherwise)."""
from __future__ import annotations

from pktbuf.bench import net_ptype as B


def test_frames_are_valid_64_byte_udp():
    fr = B.make_frames()
    assert len(fr) == 32 and {len(f) for f in fr} == {64} and len(set(fr)) == 32
    from pktbuf.net.cksum import api
    assert all(api.ipv4_cksum(f[14:34]) == 0 for f in fr)


def test_quick_run_pktbuf_alone():
    doc = B.run(quick=True, dpdk=False, reps=1)
    f = doc["pktbuf_ns_per_packet"]
    assert len(f["samples"]) == 1 and f["median"] > 0
    assert doc["dpdk"]["status"] == "off" and "ratio" not in doc


def test_quick_run_against_dpdk():
    from tests.bench.conftest import dpdk_or_skip
    dpdk_or_skip()
    doc = B.run(quick=True, reps=2)
    assert doc["dpdk"]["status"] == "ok", doc["dpdk"]
    assert doc["interleaved"] and len(doc["dpdk_ns_per_packet"]["samples"]) == 2
    r = doc["ratio"]
    p, d = doc["pktbuf_ns_per_packet"]["median"], doc["dpdk_ns_per_packet"]["median"]
    assert abs(r["value"] - p / d) < 1e-9 and r["ci"][0] <= r["value"] <= r["ci"][1]
