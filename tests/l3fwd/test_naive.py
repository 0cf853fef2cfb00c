"""The l3fwd stage kernel against the naive model, on random bursts (hypothesis): every
packet's destination or drop reason, and every byte of what leaves -- including frames cut
short, with random bytes after them in the buffer (l3fwd reads them, so must the model)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.apps.l3fwd import kernels as K
from pktbuf.apps.l3fwd import naive, routes
from pktbuf.apps.l3fwd.app import Tables, make_state
from pktbuf.apps.l3fwd.options import Options
from pktbuf.drivers.common.kinds import MAX_PORTS

from .frames import ether, ipv4, ipv6, v6

MASK = 0x7
SRC = {p: bytes((0x02, 0x70, 0x63, 0x61, 0x70, p)) for p in range(MAX_PORTS)}
DST = {1: bytes.fromhex("aabbccddee01")}


def _rules(mode):
    if mode == "em":
        v4 = routes.default_em(False) + [routes.EmRule(bytes((10, 0, 0, 1)), bytes((10, 0, 0, 2)),
                                                       80, 1000, 6, 2)]
        return v4, routes.default_em(True)
    v4 = routes.default_lpm(False) + [routes.LpmRule(bytes((10, 0, 0, 0)), 8, 2),
                                      routes.LpmRule(bytes((10, 1, 2, 0)), 28, 1),
                                      routes.LpmRule(bytes((10, 1, 2, 3)), 32, 0)]
    v6 = routes.default_lpm(True) + [routes.LpmRule(bytes.fromhex("20010db8" + "00" * 12), 32, 2)]
    return v4, v6


@pytest.fixture(scope="module")
def env():
    pool = pktbuf.PktmbufPool(512, 64)
    tables, models = {}, {}
    for mode, v6em in (("lpm", False), ("fib", False), ("em", False), ("em", True)):
        v4, v6r = _rules(mode)
        tables[mode, v6em] = Tables(mode, MASK, v4, v6r, ipv6_em=v6em)
        for strict in (False, True):
            models[mode, v6em, strict] = naive.Model(mode, MASK, v4, v6r, ipv6_em=v6em,
                                                     eth_dest=DST, src_macs=SRC, strict=strict)
    yield pool, tables, models
    pool.close()


ADDR4 = st.sampled_from(["198.18.0.1", "198.18.1.0", "198.18.1.1", "198.18.2.7", "198.18.9.9",
                         "10.0.0.1", "10.0.0.2", "10.1.2.3", "10.1.2.9", "192.0.2.1"])
ADDR6 = st.sampled_from([v6(0, 0), v6(0, 1), v6(1, 0), v6(1, 1), v6(2, 5), v6(12, 1),
                         bytes.fromhex("20010db8" + "00" * 11 + "07"), bytes(16)])


@st.composite
def frame(draw):
    kind = draw(st.sampled_from(["v4", "v4", "v4", "v6", "v6", "vlan", "arp", "other"]))
    if kind == "v4":
        vihl = draw(st.sampled_from([0x45, 0x45, 0x45, 0x46, 0x4F, 0x44, 0x65, 0x00]))
        proto = draw(st.sampled_from([17, 6, 1, 132]))
        sport, dport = draw(st.sampled_from([(9, 9), (1000, 80), (9, 10)]))
        opts = bytes(((vihl & 0xF) - 5) * 4) if 0x45 < vihl <= 0x4F else b""
        l4 = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes(8)
        body = ipv4(draw(ADDR4), draw(ADDR4), proto=proto, payload=l4, vihl=vihl, opts=opts,
                    ttl=draw(st.integers(0, 255)),
                    tot_len=draw(st.one_of(st.none(), st.integers(0, 0xFFFF))),
                    good_cksum=False, cksum=draw(st.integers(0, 0xFFFF)))
        fr = ether(0x0800) + body
    elif kind == "v6":
        nh = draw(st.sampled_from([17, 6, 58, 0]))
        sport, dport = draw(st.sampled_from([(9, 9), (1000, 80)]))
        l4 = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes(8)
        fr = ether(0x86DD) + ipv6(draw(ADDR6), draw(ADDR6), nh=nh, payload=l4,
                                  hlim=draw(st.integers(0, 255)))
    elif kind == "vlan":
        fr = ether(0x8100) + b"\x00\x01\x08\x00" + ipv4("10.0.0.1", "198.18.1.1", payload=bytes(8))
    elif kind == "arp":
        fr = ether(0x0806) + bytes(28)
    else:
        fr = ether(draw(st.integers(0, 0xFFFF))) + draw(st.binary(min_size=0, max_size=60))
    cut = draw(st.integers(14, len(fr))) if draw(st.booleans()) else len(fr)
    stale = draw(st.binary(min_size=naive.SPAN, max_size=naive.SPAN))
    return fr[:cut], stale


CFG = st.tuples(st.sampled_from([("lpm", False), ("fib", False), ("em", False), ("em", True)]),
                st.booleans(), st.integers(0, 2))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(cfg=CFG, burst=st.lists(frame(), min_size=1, max_size=37))
def test_stage_equals_model(env, cfg, burst):
    pool, tables, models = env
    (mode, v6em), strict, rx = cfg
    model = models[mode, v6em, strict]
    o = Options(portmask=MASK, lookup=mode, ttl_expiry=strict, eth_dest=DST)
    from pktbuf.apps.l3fwd.app import make_cfg
    eth = np.zeros((MAX_PORTS, 12), np.uint8)
    for p in range(MAX_PORTS):
        eth[p, :6] = np.frombuffer(model.dst_mac[p], np.uint8)
        eth[p, 6:] = np.frombuffer(SRC[p], np.uint8)
    state = make_state(tables[mode, v6em], make_cfg(o), eth)
    mbufs = []
    try:
        for fr, stale in burst:
            m = pool.alloc()
            mbufs.append(m)
            m.append_bytes(fr)
            off = int(m.data_off) + len(fr)
            m.buffer[off:off + len(stale)] = np.frombuffer(stale, np.uint8)
        pkts = np.array([int(m) for m in mbufs], np.int32)
        dest = np.full(len(pkts), rx, np.int32)
        cnt = np.zeros(len(K.COUNTERS), np.int64)
        K.l3fwd_stage(state, pool.domain.state, rx, pkts, len(pkts), dest, cnt)
        for i, (fr, stale) in enumerate(burst):
            port, reason, out = model.forward(fr + stale, len(fr), rx)
            if port is None:
                assert dest[i] == -1 - K.DROP_REASONS.index(reason), (i, fr.hex())
            else:
                assert dest[i] == port, (i, fr.hex())
                assert bytes(mbufs[i].data) == out, (i, fr.hex())
        assert int(cnt.sum()) == len(burst)
    finally:
        for m in mbufs:
            m.free()


@st.composite
def em_group(draw):
    """Eight frames of one EM-bulk type (IPv4 IHL 5 or IPv6, all UDP or all TCP: the groups
    l3fwd_em_hlm.h looks up in bulk), addresses and ports from the rule sets or not, or now
    and then one frame of another kind (the group then goes one packet at a time)."""
    v4 = draw(st.booleans())
    proto = draw(st.sampled_from([17, 6]))
    out = []
    for _ in range(K.EM_GROUP):
        if draw(st.integers(0, 9)) == 0:
            out.append(draw(frame()))
            continue
        if draw(st.booleans()):
            # a default flow's tuple (198.18.X.1 -> 198.18.X.0, UDP 9 -> 9, to port X: X in
            # 0..2 is enabled in MASK, the rest is not) -- a hit, unless the group is TCP
            x = draw(st.integers(0, 15))
            src4, dst4, src6, dst6 = f"198.18.{x}.1", f"198.18.{x}.0", v6(x, 1), v6(x, 0)
            sport = dport = 9
        else:
            src4, dst4, src6, dst6 = draw(ADDR4), draw(ADDR4), draw(ADDR6), draw(ADDR6)
            sport, dport = draw(st.sampled_from([(9, 9), (1000, 80), (9, 10), (80, 1000)]))
        l4 = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes(8)
        if v4:
            fr = ether(0x0800) + ipv4(src4, dst4, proto=proto, payload=l4,
                                      ttl=draw(st.integers(2, 255)))
        else:
            fr = ether(0x86DD) + ipv6(src6, dst6, nh=proto, payload=l4,
                                      hlim=draw(st.integers(2, 255)))
        out.append((fr, draw(st.binary(min_size=naive.SPAN, max_size=naive.SPAN))))
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(v6em=st.booleans(), rx=st.integers(0, 2),
       groups=st.lists(em_group(), min_size=1, max_size=4),
       tail=st.lists(frame(), min_size=0, max_size=7))
def test_em_groups_equal_model(env, v6em, rx, groups, tail):
    """EM bursts made of whole groups of one type (one bulk lookup each), then a remainder:
    every destination and every byte as the model's single lookups give them."""
    test_stage_equals_model.hypothesis.inner_test(
        env, (("em", v6em), False, rx), [f for g in groups for f in g] + tail)
