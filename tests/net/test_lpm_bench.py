"""``pktbuf.bench.lpm`` in quick mode: the route generator reproduces lpm_perf_autotest's set,
and with DPDK both sides build the same tables and return the same next hops.  No timing is
asserted."""
from __future__ import annotations

import ipaddress

import pytest

from pktbuf.bench import lpm as B


def test_route_generator_matches_lpm_perf():
    ips, depths = B.make_routes()
    routes = list(zip(ips.tolist(), depths.tolist()))
    assert len(routes) == 1_076_806 and int((depths > 24).sum()) == 41_830
    assert len(set(routes)) == 1_030_550
    show = [f"{ipaddress.IPv4Address(a)}/{d}" for a, d in routes]
    assert show[:4] == ["0.0.0.0/3", "48.0.0.0/5", "112.0.0.0/5", "28.0.0.0/6"]
    assert show[-3:] == ["10.2.23.147/32", "203.163.180.0/23", "192.168.25.100/24"]
    assert show[538400] == "0.0.0.0/8"


def test_quick_run_same_results_as_dpdk():
    from pktbuf.bench import dpdk_ref as D
    try:
        D.toolchain()
    except D.DpdkMissing as e:
        pytest.skip(str(e))
    res = B.run(quick=True, reps=1)
    assert res["dpdk"]["status"] == "ok", res["dpdk"]
    c = res["checks"]
    assert c["tables_equal_after_add"] and c["tables_equal_after_delete"]
    assert c["lookups_equal"]
    assert c["pktbuf_add"] == c["dpdk_add"]
    assert c["pktbuf_delete"] == c["dpdk_delete"]
    for k in ("single", "bulk", "x4", "add", "delete"):
        assert res["pktbuf"][k]["median"] > 0 and res["dpdk_figures"][k]["median"] > 0
        assert res["ratios"][k] > 0
    m = res["memory"]
    assert 0 < m["resident"] <= m["reserved"] and m["groups_used"] > 0


def _fnv_py(words):
    h = 0xCBF29CE484222325
    for w in map(int, words):
        for k in range(4):
            h = ((h ^ ((w >> (8 * k)) & 0xFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


@pytest.mark.parametrize("n24", range(1, 7))
def test_table_fnv_is_unsigned_and_matches_fnv1a(n24):
    """fnv_tables as lpm_ref.c computes it: unsigned, whatever the top bit of the running hash
    between tbl24 and tbl8 (a signed result once failed the full-route-set comparison)."""
    import numpy as np

    class T:
        tbl24 = np.arange(n24, dtype=np.uint32) * np.uint32(0x01000001)
        tbl8 = np.array([0x03000007, 5], np.uint32)
    got = B.fnv_tables(T)
    assert got == _fnv_py(list(T.tbl24) + list(T.tbl8))
