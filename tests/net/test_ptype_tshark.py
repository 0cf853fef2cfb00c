"""The parser against tshark's dissection of a real capture: a pcap of varied frames written
with dpkt, dissected by tshark (-T fields), compared frame by frame with the header offsets
and lengths net_get_ptype finds."""
from __future__ import annotations

import shutil
import subprocess

import dpkt
import numpy as np
import pytest

from pktbuf.net.ptype import values as V
from pktbuf.net.ptype.parse import net_get_ptype_lens

from .frames import NAMED
from .pktnet import packet, pool  # noqa: F401  (fixture)

FIELDS = ["frame.number", "eth.type", "vlan.id", "ieee8021ad.id", "ip.hdr_len", "ip.proto", "ipv6.nxt",
          "udp.srcport", "tcp.srcport", "tcp.hdr_len", "gre.proto", "sctp.srcport"]
# frames tshark reads differently on purpose (MPLS payload, cut-off or malformed headers,
# the IPv4 in the EGP-numbered payload DPDK's quirk parses, DPDK-unknown GRE routing)
SKIP = {"mpls", "runt", "eth-only", "vlan-cut", "ipv4-bad-vihl", "ipv4-ihl-3", "short-tcp",
        "ipip-short-tcp", "ethertype-0x2f00", "ipv4-proto-8", "gre-routing", "teb-ethertype",
        "ipv6-six-ext"}


def _first(v):
    return v.split(",")[0] if v else ""


def test_parser_agrees_with_tshark(pool, tmp_path):
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    names = [n for n in NAMED if n not in SKIP]
    path = tmp_path / "varied.pcap"
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, n in enumerate(names):
            w.writepkt(NAMED[n], ts=1700000000 + i)
    cmd = ["tshark", "-r", str(path), "-n", "-o", "ip.defragment:FALSE",
           "-o", "ipv6.defragment:FALSE", "-T", "fields", "-E", "separator=\t",
           "-E", "occurrence=a", "-E", "aggregator=,"]
    for fld in FIELDS:
        cmd += ["-e", fld]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert len(rows) == len(names)
    st_ = pool.domain.state
    checked = 0
    for name, row in zip(names, rows):
        t = dict(zip(FIELDS, row))
        f = NAMED[name]
        m = packet(pool, f, [len(f) // 2, len(f) - len(f) // 2])     # straddling, too
        hl = np.full(7, -1, np.int32)
        pt = int(net_get_ptype_lens(st_, m.handle, V.PTYPE_ALL_MASK, hl))
        m.free()
        l2, l3, l4 = int(hl[V.HL_L2]), int(hl[V.HL_L3]), int(hl[V.HL_L4])
        tags = sum(len(t[k].split(",")) for k in ("vlan.id", "ieee8021ad.id") if t[k])
        tags -= {V.PTYPE_INNER_L2_ETHER_VLAN: 1, V.PTYPE_INNER_L2_ETHER_QINQ: 2}.get(
            pt & V.PTYPE_INNER_L2_MASK, 0)                              # the inner frame's
        assert l2 == 14 + 4 * tags, (name, t)
        assert int(_first(t["eth.type"]), 16) == int.from_bytes(f[12:14], "big")
        l3t = pt & V.PTYPE_L3_MASK
        if l3t in (V.PTYPE_L3_IPV4, V.PTYPE_L3_IPV4_EXT):
            assert l3 == int(_first(t["ip.hdr_len"])), (name, t)
            assert f[l2 + 9] == int(_first(t["ip.proto"]))
        if l3t in (V.PTYPE_L3_IPV6, V.PTYPE_L3_IPV6_EXT):
            assert f[l2 + 6] == int(_first(t["ipv6.nxt"])), (name, t)
        l4t = pt & V.PTYPE_L4_MASK
        at = int.from_bytes(f[l2 + l3:l2 + l3 + 2], "big") if l3 > 0 else None
        if l4t == V.PTYPE_L4_UDP:
            assert at == int(_first(t["udp.srcport"])), (name, t)
        elif l4t == V.PTYPE_L4_TCP:
            assert at == int(_first(t["tcp.srcport"])), (name, t)
            assert l4 == int(_first(t["tcp.hdr_len"])), (name, t)
        elif l4t == V.PTYPE_L4_SCTP:
            assert at == int(_first(t["sctp.srcport"])), (name, t)
        elif l4t == 0 and name != "ipv6-ah-tcp":     # DPDK stops at AH, tshark walks past it
            assert not (t["udp.srcport"] or t["tcp.srcport"]) or pt & V.PTYPE_TUNNEL_MASK, (name, t)
        if pt & V.PTYPE_TUNNEL_MASK in (V.PTYPE_TUNNEL_GRE, V.PTYPE_TUNNEL_NVGRE):
            assert int(_first(t["gre.proto"]), 16) in (0x0800, 0x86DD, 0x6558), (name, t)
        if pt & V.PTYPE_INNER_L3_MASK in (V.PTYPE_INNER_L3_IPV4, V.PTYPE_INNER_L3_IPV4_EXT):
            assert int(hl[V.HL_INNER_L3]) == int(t["ip.hdr_len"].split(",")[-1]), (name, t)
        if pt & V.PTYPE_INNER_L4_MASK == V.PTYPE_INNER_L4_TCP:
            assert int(hl[V.HL_INNER_L4]) == int(t["tcp.hdr_len"].split(",")[-1]), (name, t)
        checked += 1
    assert checked == len(names)
