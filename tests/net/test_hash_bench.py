"""``python -m pktbuf.bench.hash --quick``: shape, arithmetic and agreement only -- no timing
is asserted.  With DPDK, the C reference must find the same hits at the same positions with the
same data (the bench refuses otherwise)."""
from __future__ import annotations

import numpy as np

from pktbuf.bench import hash as B
from pktbuf.net.hash import naive

from tests.bench.conftest import dpdk_or_skip


def test_keys_and_stream():
    keys = B.make_keys(64)
    assert keys.shape == (128, 16) and len({r.tobytes() for r in keys}) == 128
    # splitmix64(seed 1): first output 0x910a2dec89025cc1, stored little-endian
    assert keys[0, :8].tobytes() == (0x910A2DEC89025CC1).to_bytes(8, "little")
    st = B.make_stream(keys, 64, 256)
    added = {r.tobytes() for r in keys[:64]}
    hits = sum(r.tobytes() in added for r in st)
    assert 80 < hits < 176                   # about half


def test_quick_run_without_dpdk():
    doc = B.run(quick=True, reps=1, dpdk=False)
    assert doc["dpdk"]["status"] == "off"
    rows = {(r["variant"], r["op"]): r["cycles_per_key"] for r in doc["rows"]}
    assert set(rows) == {("pktbuf", op) for op in B.OPS}
    for f in rows.values():
        assert len(f["samples"]) == 1 and np.isfinite(f["median"]) and f["median"] > 0
    c = doc["checks"]["stream"]["pktbuf"]
    m = doc["method"]
    assert doc["checks"]["fill"]["pktbuf"] == {**doc["checks"]["fill"]["pktbuf"],
                                               "failed": 0, "count": m["keys"]}
    assert c["hits"] == c["data_hits"] and 0.4 < c["hits"] / m["lookups"] < 0.6
    # position i + 1 and data i for key i: the sums differ by exactly the hit count
    assert c["possum"] - c["datasum"] == c["hits"]
    # the filled table: some of its block is in RAM, never more than the block
    mem = doc["memory"]["pktbuf"]
    assert 0 < mem["resident"] <= mem["reserved"]


def test_quick_run_against_dpdk():
    dpdk_or_skip()
    doc = B.run(quick=True, reps=1, dpdk=True, dpdk_variants=("dpdk_lf",))
    assert doc["dpdk"]["status"] == "ok", doc["dpdk"]
    s = doc["checks"]["stream"]
    assert s["dpdk_lf"] == s["pktbuf"]
    assert doc["checks"]["after_adddel_agree"], doc["checks"]["stream_after_adddel"]
    r = next(e for e in doc["ratios"] if e["op"] == "lookup_bulk" and e["vs"] == "dpdk_lf")
    p = next(x["cycles_per_key"]["median"] for x in doc["rows"]
             if x["variant"] == "pktbuf" and x["op"] == "lookup_bulk")
    d = next(x["cycles_per_key"]["median"] for x in doc["rows"]
             if x["variant"] == "dpdk_lf" and x["op"] == "lookup_bulk")
    assert abs(r["value"] - p / d) < 1e-9 and r["target"] == "<= 1.0"
    # DPDK's table took heap memory of the order of pktbuf's block (buckets + key slots)
    mem = doc["memory"]
    assert mem["pktbuf"]["reserved"] / 4 < mem["dpdk_lf"]["reserved"] < 4 * mem["pktbuf"]["reserved"]
    assert mem["dpdk_lf"]["pktbuf_resident_ratio"] == \
        mem["pktbuf"]["resident"] / mem["dpdk_lf"]["reserved"]


def test_naive_crc_matches_the_generated_keys():
    keys = B.make_keys(4)
    from pktbuf.net.hash.crc import hash_crc
    for r in keys:
        assert hash_crc(r, 16, 0) == naive.crc32c(r.tobytes())
