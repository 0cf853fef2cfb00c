"""A small ACL firewall: an ordered list of IPv4 rules, the first that matches decides,
every rule counts its hits.

    python examples/acl_firewall.py
    pktbuf fwd --stage examples/acl_firewall.py:stage ...

A rule matches on a source and a destination prefix, a protocol and, for TCP and UDP, ranges
of source and destination ports; its action is ``permit`` or ``deny``.  Rules are tried in
order and the first match wins; a packet no rule matches gets ``default``.  Denied packets
are dropped with the reason ``denied``.  What has no ports (other protocols, and IPv4
fragments after the first, whose L4 header is in the first fragment) matches only rules
without a port condition.  Frames that are not IPv4 get ``non_ipv4`` (``permit`` by default,
so that ARP keeps working); an IPv4 header, or the ports of a first fragment, cut off by the
end of the frame is dropped as ``malformed`` (as is a frame too short for its Ethernet
header and VLAN tags).

The rules are scanned linearly: right for tens of rules.  DPDK's ``rte_acl`` compiles large
rule sets into a trie instead; the semantics (ordered rules, first match) are the same.
"""
import ipaddress
import os
import sys

import numpy as np
from numba import njit

import pktbuf
from pktbuf.apps.stage.abi import stage_drop
from pktbuf.apps.stage.api import Stage, StageRunner
from pktbuf.kernels import hdr_read
from pktbuf.net.hdr.ether import ETHER_TYPE_IPV4, ether_l3_off
from pktbuf.net.hdr.ipv4 import (IPV4_HDR_OFFSET_MASK, ipv4_dst, ipv4_fragment_offset,
                                 ipv4_hdr_len, ipv4_hdr_ptr, ipv4_proto, ipv4_src)
from pktbuf.net.hdr.l4 import l4_dst_port, l4_src_port
from pktbuf.net.hdr.mem import stack_u8

PROTOS = {"any": -1, "icmp": 1, "tcp": 6, "udp": 17}
ACTIONS = {"deny": 0, "permit": 1}
# columns of the compiled rule table
R_SRC, R_SMASK, R_DST, R_DMASK, R_PROTO, R_SLO, R_SHI, R_DLO, R_DHI, R_ACTION = range(10)
COUNTERS = ("permitted", "denied", "not_ipv4", "malformed")
K_PERMIT, K_DENY, K_NOT4, K_BAD = range(4)
DROP_REASONS = ("denied", "malformed", "not_ipv4")
D_DENIED, D_MALFORMED, D_NOT4 = range(3)

# an example policy: a web and DNS server network 192.0.2.0/24 behind the firewall
RULES = [
    {"action": "deny", "src": "10.66.0.0/16"},                   # a quarantined subnet
    {"action": "deny", "proto": "tcp", "dst": "192.0.2.10/32", "dport": 23},
    {"action": "permit", "proto": "tcp", "dst": "192.0.2.0/24", "dport": (80, 81)},
    {"action": "permit", "proto": "tcp", "dst": "192.0.2.0/24", "dport": 443},
    {"action": "permit", "proto": "udp", "src": "10.0.0.0/8", "dst": "192.0.2.53/32",
     "dport": 53},
    {"action": "permit", "proto": "icmp"},
]


def _ports(spec, what):
    if spec is None:
        return -1, 0xFFFF                   # no condition: matches "no ports" (-1) too
    lo, hi = (spec, spec) if isinstance(spec, int) else spec
    if not 0 <= lo <= hi <= 0xFFFF:
        raise pktbuf.InvalidArgument(f"{what} must be a port or a range in 0..65535: {spec}")
    return lo, hi


def compile_rules(rules) -> np.ndarray:
    """The rule list as the stage's int64 table, one row per rule (``InvalidArgument`` for
    a bad rule)."""
    out = np.zeros((len(rules), 10), np.int64)
    for i, r in enumerate(rules):
        r = dict(r)
        act, proto = r.pop("action", None), r.pop("proto", "any")
        try:
            src, dst = (ipaddress.IPv4Network(r.pop(k, "0.0.0.0/0")) for k in ("src", "dst"))
        except ValueError as e:             # not a prefix, or host bits set
            raise pktbuf.InvalidArgument(f"rule {i}: {e}") from None
        sport, dport = _ports(r.pop("sport", None), "sport"), _ports(r.pop("dport", None), "dport")
        if act not in ACTIONS or r or not (proto in PROTOS or (
                isinstance(proto, int) and 0 <= proto <= 255)):
            raise pktbuf.InvalidArgument(f"rule {i}: action permit/deny, proto {list(PROTOS)} "
                                         f"or 0..255, src, dst, sport, dport; got {rules[i]}")
        if (sport[0] >= 0 or dport[0] >= 0) and proto not in ("tcp", "udp", 6, 17):
            raise pktbuf.InvalidArgument(f"rule {i}: ports need proto tcp or udp")
        out[i] = (int(src.network_address), int(src.netmask), int(dst.network_address),
                  int(dst.netmask), PROTOS.get(proto, proto), *sport, *dport, ACTIONS[act])
    return out


@njit(cache=True, nogil=True)
def acl_match(rules, src, dst, proto, sport, dport):
    """Index of the first rule matching the packet, or ``len(rules)`` (the default)."""
    for r in range(rules.shape[0]):
        if ((src & rules[r, R_SMASK]) == rules[r, R_SRC]
                and (dst & rules[r, R_DMASK]) == rules[r, R_DST]
                and (rules[r, R_PROTO] < 0 or rules[r, R_PROTO] == proto)
                and rules[r, R_SLO] <= sport <= rules[r, R_SHI]
                and rules[r, R_DLO] <= dport <= rules[r, R_DHI]):
            return r
    return rules.shape[0]


@njit(cache=True, nogil=True)
def acl_firewall(state, dom, rx_port, pkts, n, dest, cnt):
    """Permit (leave ``dest``) or drop every packet of the burst by the first matching rule."""
    rules, hits, cfg = state
    buf = stack_u8(64)
    for i in range(n):
        h = pkts[i]
        et, l3 = ether_l3_off(dom, h, 0, buf)
        if et < 0:                          # the Ethernet header or a VLAN tag cut off
            cnt[K_BAD] += 1
            dest[i] = stage_drop(D_MALFORMED)
            continue
        if et != ETHER_TYPE_IPV4:
            cnt[K_NOT4] += 1
            if cfg[1] == 0:
                dest[i] = stage_drop(D_NOT4)
            continue
        p = ipv4_hdr_ptr(dom, h, l3, buf)
        if p < 0:
            cnt[K_BAD] += 1
            dest[i] = stage_drop(D_MALFORMED)
            continue
        src, dst, proto = ipv4_src(p), ipv4_dst(p), ipv4_proto(p)
        sport = dport = -1
        if (proto == 6 or proto == 17) and (ipv4_fragment_offset(p) & IPV4_HDR_OFFSET_MASK) == 0:
            q = hdr_read(dom, h, l3 + ipv4_hdr_len(p), 4, buf)
            if q < 0:
                cnt[K_BAD] += 1
                dest[i] = stage_drop(D_MALFORMED)
                continue
            sport, dport = l4_src_port(q), l4_dst_port(q)
        r = acl_match(rules, src, dst, proto, sport, dport)
        hits[r] += 1
        if (rules[r, R_ACTION] if r < rules.shape[0] else cfg[0]) == 0:
            cnt[K_DENY] += 1
            dest[i] = stage_drop(D_DENIED)
        else:
            cnt[K_PERMIT] += 1


def stage(rules=RULES, default: str = "deny", non_ipv4: str = "permit") -> Stage:
    """The firewall for ``rules`` (a list of dicts as :data:`RULES`); ``default``: the action
    when no rule matches; ``non_ipv4``: what to do with frames that are not IPv4."""
    if default not in ACTIONS or non_ipv4 not in ACTIONS:
        raise pktbuf.InvalidArgument("default and non_ipv4 are 'permit' or 'deny'")
    table = compile_rules(rules)
    state = (table, np.zeros(len(rules) + 1, np.int64),
             np.array([ACTIONS[default], ACTIONS[non_ipv4]], np.int64))
    st = Stage(acl_firewall, state, counters=COUNTERS, drop_reasons=DROP_REASONS)
    st.rules = list(rules)
    return st


def rule_hits(st: Stage) -> list:
    """``[(rule, hits)]``, the default action last (as the string ``"default"``)."""
    return list(zip(st.rules + ["default"], (int(x) for x in st.state[1])))


def forward(st: Stage, frames, pool, ports, rx: int = 0, tx: int = 1):
    """Send ``frames`` (bytes) into loopback port ``rx``, run the stage's loop on the stream
    ``rx -> tx`` until it has received them all; what came out of ``tx`` (the mbufs freed)
    and the runner (its counters)."""
    ports[rx].tx_burst([pool.alloc().append_bytes(f) for f in frames])
    run = StageRunner(ports, st, [(rx, 0, tx)], idle_backoff=False)
    while run.port_counts(rx)["rx"] < len(frames):
        run.run(0.01)
    out = []
    while len(hs := ports[tx].rx_burst(32)):
        out += [pool.mbuf(int(h)).tobytes() for h in hs]
        pool.free_bulk(hs)
    return out, run


def main():
    import struct
    pool = pktbuf.PktmbufPool(1024, cache_size=32)
    ports = pktbuf.Ports(pool)
    try:
        for i in range(2):
            ports.open(f"net_ring{i}")

        def frame(src, dst, proto, dport=0):     # Ethernet/IPv4 + 4 port bytes + padding
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, proto, 0,
                             ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed)
            return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + struct.pack("!HH", 40000,
                                                                               dport) + bytes(16)
        frames = [frame("10.1.2.3", "192.0.2.10", 6, 80),        # permitted (web)
                  frame("10.1.2.3", "192.0.2.10", 6, 23),        # denied (telnet)
                  frame("10.66.1.1", "192.0.2.10", 6, 443),      # denied (quarantined)
                  frame("10.9.9.9", "192.0.2.53", 17, 53),       # permitted (DNS)
                  frame("198.51.100.7", "192.0.2.53", 17, 53),   # default: denied
                  frame("10.1.2.3", "192.0.2.1", 1),             # permitted (ICMP)
                  frame("10.1.2.3", "192.0.2.10", 6, 443)]       # permitted (web)
        st = stage()
        out, run = forward(st, frames, pool, ports)
        print(f"permitted {len(out)} of {len(frames)} frames; counters {run.counters()}; "
              f"drops {run.drop_counts()}")
        for r, k in rule_hits(st):
            print(f"  {k:3d} hits  {r}")
    finally:
        ports.close()
    pool.cache_flush()
    print(f"pool back to {pool.avail_count}/{pool.n}")


if __name__ == "__main__":
    # the compiled loop imports the stage by its module's name, which __main__ is not
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import acl_firewall
    acl_firewall.main()
