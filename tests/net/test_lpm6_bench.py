"""``pktbuf.bench.lpm6``: lpm6_perf_autotest's rules and addresses, and with DPDK both sides
give every address the same next hop and count the same add/delete results.  No timing is
asserted."""
from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from pktbuf.bench import lpm6 as B
from pktbuf.bench import net


def test_rules_are_lpm6_perfs():
    ips, depths, nhs = B.load_routes()
    assert ips.shape == (1000, 16)
    first = ipaddress.IPv6Address(bytes(ips[0]))
    assert (str(first), int(depths[0]), int(nhs[0])) == ("4246:9a8f:c5e9::", 50, 146)
    assert (int(depths.min()), int(depths.max())) == (1, 128)
    assert B.fnv_routes(ips, depths, nhs) == 0x52567429B0D6DC4C


def test_bad_rule_files_are_refused(tmp_path):
    for text in ("00 8 1\n", "0" * 32 + " 129 1\n", "0" * 32 + " 8 2097152\n", "x" * 32 + " 8 1\n",
                 "0" * 32 + " 8\n"):
        p = tmp_path / "r.txt"
        p.write_text("# c\n" + text)
        with pytest.raises(ValueError):
            B.load_routes(p)


def _mask_ip6_prefix(out, rule, depth):
    """lpm6_perf's mask_ip6_prefix, restated in plain Python."""
    out = bytearray(out)
    for k in range(16):
        if depth >= 8:
            out[k] = rule[k]
        elif depth > 0:
            m = (0xFF << (8 - depth)) & 0xFF
            out[k] = (rule[k] & m) | (out[k] & ~m & 0xFF)
        else:
            break
        depth -= 8
    return bytes(out)


def test_addresses_keep_their_rules_prefix_and_random_rest():
    ips, depths, _ = B.load_routes()
    per = 3
    out = np.zeros((ips.shape[0] * per, 16), np.uint8)
    B.make_ips(ips, depths, per, 7, out)
    other = np.zeros_like(out)
    B.make_ips(ips, depths, per, 8, other)
    assert (out != other).any()                        # the seed matters
    s = 7
    mask = (1 << 64) - 1
    for i in range(out.shape[0]):
        words = []
        for _ in range(2):                             # splitmix64, two outputs per address
            s = (s + 0x9E3779B97F4A7C15) & mask
            z = s
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
            words.append(z ^ (z >> 31))
        rnd = words[0].to_bytes(8, "little") + words[1].to_bytes(8, "little")
        r = i // per
        assert bytes(out[i]) == _mask_ip6_prefix(rnd, bytes(ips[r]), int(depths[r])), i


def test_quick_run_same_results_as_dpdk():
    from pktbuf.bench import dpdk_ref as D
    try:
        D.toolchain()
    except D.DpdkMissing as e:
        pytest.skip(str(e))
    res = B.run(quick=True, reps=1, niter=1)
    assert res["dpdk"]["status"] == "ok", res["dpdk"]
    c = res["checks"]
    assert c["lookups_equal"] and c["misses"] == 0
    assert c["pktbuf_add"] == c["dpdk_add"] == {"ok": 1000, "einval": 0, "enospc": 0}
    assert c["pktbuf_delete"] == c["dpdk_delete"]
    assert c["pktbuf_delete"]["ok"] + c["pktbuf_delete"]["enoent"] == 1000
    assert c["groups_after_delete"] == 0
    for k in ("single", "bulk", "add", "delete"):
        assert res["pktbuf"][k]["median"] > 0 and res["dpdk_figures"][k]["median"] > 0
    rows = net._lpm6_rows(res)
    assert [r["case"] for r in rows] == ["LPM6 lookup, single", "LPM6 lookup, bulk",
                                         "LPM6 add, per rule", "LPM6 delete, per rule"]
    assert all(r["dpdk_status"] == "ok" and r["ratio"] > 0 for r in rows)
