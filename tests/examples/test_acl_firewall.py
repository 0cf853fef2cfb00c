"""examples/acl_firewall.py against the model in naive.py over random rule lists and frames:
the verdict of every frame, permitted frames unchanged and in order, counters, drop reasons
and per-rule hits, every mbuf back in the pool; bad rules refused."""
from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pktbuf

from .frames import DST4, PORTS, SRC4, all_back, example, frame, make_ports, run, splits
from .naive import acl_model

acl_firewall = example("acl_firewall")


@pytest.fixture(scope="module")
def wire():
    pool, ports = make_ports()
    yield pool, ports
    ports.close()


def prefix():
    return st.builds(lambda a, n: str(ipaddress.IPv4Network((a, n), strict=False)),
                     st.sampled_from(SRC4 + DST4).map(lambda b: int.from_bytes(b, "big")),
                     st.sampled_from([0, 8, 16, 24, 31, 32]))


def ports_spec():
    return st.one_of(st.none(), st.sampled_from(PORTS),
                     st.tuples(st.sampled_from(PORTS), st.sampled_from(PORTS)).map(sorted)
                     .map(tuple))


@st.composite
def rule(draw):
    r = {"action": draw(st.sampled_from(["permit", "deny"]))}
    proto = draw(st.sampled_from(["any", "tcp", "udp", "icmp", 47]))
    if proto != "any" or draw(st.booleans()):
        r["proto"] = proto
    for k in ("src", "dst"):
        if draw(st.booleans()):
            r[k] = draw(prefix())
    if proto in ("tcp", "udp"):
        for k in ("sport", "dport"):
            p = draw(ports_spec())
            if p is not None:
                r[k] = p
    return r


@given(data=st.data(), frames=st.lists(frame(ipv6=True), min_size=1, max_size=40),
       rules=st.lists(rule(), max_size=6), default=st.sampled_from(["permit", "deny"]),
       non_ipv4=st.sampled_from(["permit", "deny"]))
def test_acl_matches_model(wire, data, frames, rules, default, non_ipv4):
    pool, ports = wire
    stg = acl_firewall.stage(rules, default, non_ipv4)
    out, r = run(stg, frames, data.draw(splits(len(frames))), pool, ports)
    verdicts, counters, drops, hits = acl_model(frames, rules, default, non_ipv4)
    assert out == [f for f, v in zip(frames, verdicts) if v == "permit"]
    assert r.counters() == counters
    assert r.drop_counts() == drops
    assert [h for _, h in acl_firewall.rule_hits(stg)] == hits
    assert r.port_counts(0)["stage_dropped"] == sum(drops.values())
    assert all_back(pool)


def test_example_policy(wire):
    """The policy in the example, on the frames its main sends: which rule each hits."""
    pool, ports = wire
    import dpkt

    from .frames import ether

    def f(src, dst, proto, dport=0):
        l4 = dpkt.tcp.TCP(sport=40000, dport=dport) if proto == 6 else \
            dpkt.udp.UDP(sport=40000, dport=dport) if proto == 17 else \
            dpkt.icmp.ICMP(type=8, data=dpkt.icmp.ICMP.Echo(id=1))
        return ether(0x0800, bytes(dpkt.ip.IP(src=ipaddress.IPv4Address(src).packed,
                                              dst=ipaddress.IPv4Address(dst).packed,
                                              p=proto, data=l4)))
    frames = [f("10.1.2.3", "192.0.2.10", 6, 80), f("10.1.2.3", "192.0.2.10", 6, 23),
              f("10.66.1.1", "192.0.2.10", 6, 443), f("10.9.9.9", "192.0.2.53", 17, 53),
              f("198.51.100.7", "192.0.2.53", 17, 53), f("10.1.2.3", "192.0.2.1", 1),
              f("10.1.2.3", "192.0.2.10", 6, 8080), ether(0x0806, bytes(28))]
    stg = acl_firewall.stage()
    out, r = run(stg, frames, [[]] * len(frames), pool, ports)
    assert out == [frames[i] for i in (0, 3, 5, 7)]
    assert [h for _, h in acl_firewall.rule_hits(stg)] == [1, 1, 1, 0, 1, 1, 2]
    assert r.drop_counts() == {"denied": 4, "malformed": 0, "not_ipv4": 0, "invalid": 0}
    assert all_back(pool)


@pytest.mark.parametrize("bad", [
    {"action": "allow"}, {"action": "permit", "src": "10.0.0.0/33"},
    {"action": "permit", "dst": "10.0.0.1/8"}, {"action": "permit", "proto": "sctp"},
    {"action": "permit", "proto": 256},
    {"action": "permit", "proto": "tcp", "dport": (90, 80)},
    {"action": "permit", "proto": "icmp", "dport": 80}, {"action": "deny", "port": 1},
    {"action": "permit", "proto": "tcp", "sport": 70000}])
def test_bad_rules_are_refused(bad):
    with pytest.raises(pktbuf.InvalidArgument):
        acl_firewall.stage([bad])
