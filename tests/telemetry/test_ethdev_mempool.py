"""/ethdev/*, /mempool/* and /pktbuf/domain over a real socket: DPDK 22.11's keys, order and
types, values read from the objects at request time, port id parsing as DPDK's."""
import json

import pytest

from pktbuf import Mempool, PktmbufPool
from pktbuf.errors import InvalidArgument

from .helpers import INFO_KEYS, MEMPOOL_KEYS, STATS_KEYS, Client, StubPort


@pytest.fixture
def ports(tel):
    p0, p1 = StubPort(0, "net_stub0"), StubPort(3, "net_af_packet3", "net_af_packet", 1)
    tel.add_port(p0)
    tel.add_port(p1)
    return p0, p1


def test_ethdev_list(tel, ports):
    with Client(tel.path) as c:
        assert c.raw(b"/ethdev/list") == b'{"/ethdev/list":[0,3]}'
        assert c.raw(b"/pktbuf/ports") == (b'{"/pktbuf/ports":{"0":{"name":"net_stub0","driver":'
                                           b'"net_stub"},"3":{"name":"net_af_packet3","driver":'
                                           b'"net_af_packet"}}}')
        tel.remove_port(0)
        assert c.raw(b"/ethdev/list") == b'{"/ethdev/list":[3]}'
        assert c.raw(b"/ethdev/stats,0") == b'{"/ethdev/stats":null}'


def test_ethdev_stats_shape_and_live_values(tel, ports):
    p0, _ = ports
    with Client(tel.path) as c:
        s = c.query("/ethdev/stats,0")["/ethdev/stats"]
        assert list(s) == STATS_KEYS
        assert s["ipackets"] == 10 and s["rx_nombuf"] == 4
        assert s["q_ipackets"] == [6, 4] + [0] * 14
        assert all(len(s[k]) == 16 for k in STATS_KEYS[8:])
        p0.counters["ipackets"] = (1 << 64) - 1          # counters are u64
        p0.queues["q_ipackets"] = list(range(1, 20))     # more queues than DPDK counts
        s = c.query("/ethdev/stats,0")["/ethdev/stats"]
        assert s["ipackets"] == (1 << 64) - 1
        assert s["q_ipackets"] == list(range(1, 17))


def test_ethdev_xstats_in_port_order_with_dpdk_names(tel, ports):
    with Client(tel.path) as c:
        x = c.query("/ethdev/xstats,0")["/ethdev/xstats"]
    # "driver.specific-name" has characters DPDK refuses in a name: left out, as DPDK does
    assert list(x) == ["rx_good_packets", "tx_good_packets", "rx_q0_packets", "tx_q1_bytes"]


def test_ethdev_link_status(tel, ports):
    p0, _ = ports
    with Client(tel.path) as c:
        assert c.raw(b"/ethdev/link_status,0") == \
            b'{"/ethdev/link_status":{"status":"UP","speed":10000,"duplex":"full-duplex"}}'
        p0.link_state = {"status": "UP", "speed": 100, "duplex": "half-duplex"}
        assert c.query("/ethdev/link_status,0")["/ethdev/link_status"]["duplex"] == "half-duplex"
        p0.link_state = {"status": "DOWN", "speed": 0, "duplex": "full-duplex"}
        assert c.raw(b"/ethdev/link_status,0") == b'{"/ethdev/link_status":{"status":"DOWN"}}'


def test_ethdev_info_has_dpdks_keys_with_defaults(tel, ports):
    with Client(tel.path) as c:
        i0 = c.query("/ethdev/info,0")["/ethdev/info"]
        i3 = c.query("/ethdev/info,3")["/ethdev/info"]
    assert list(i0) == INFO_KEYS and list(i3) == INFO_KEYS
    assert i0["name"] == "net_stub0" and i0["port_id"] == 0 and i0["mtu"] == 9000
    assert i0["mac_addr"] == "02:0A:BC:DE:F0:01"                 # upper case, as DPDK prints
    assert i0["rxq_state"] == [1, 1] and i0["txq_state"] == [1, 1]
    assert i3["nb_rx_queues"] == 1 and i3["rxq_state"] == [1] and i3["port_id"] == 3
    assert i0["state"] == 1 and i0["dev_started"] == 1 and i0["numa_node"] == -1
    assert "driver_name" not in i0                               # not a DPDK 22.11 field


def test_port_params_parsed_as_dpdk(tel):
    tel.add_port(StubPort(8, "net_stub8"))
    tel.add_port(StubPort(16, "net_stub16"))
    with Client(tel.path) as c:
        def port(cmd):
            v = c.query(cmd)[cmd.split(",")[0]]
            return None if v is None else v.get("port_id", "stats")
        assert port("/ethdev/info,8") == 8
        assert port("/ethdev/info,010") == 8           # strtoul base 0: octal
        assert port("/ethdev/info,0x10") == 16         # and hex
        assert port("/ethdev/info,16 extra") == 16     # trailing text ignored
        assert port("/ethdev/info,16,1") == 16
        # /ethdev/stats reads the id with atoi: "010" is port 10 there, not 8
        assert c.query("/ethdev/stats,010") == {"/ethdev/stats": None}
        p10 = StubPort(10, "net_stub10")
        p10.counters["ipackets"] = 1010
        tel.add_port(p10)
        assert c.query("/ethdev/stats,010")["/ethdev/stats"]["ipackets"] == 1010
        assert c.query("/ethdev/stats,0x10") == {"/ethdev/stats": None}   # atoi stops at x
        assert c.query("/ethdev/stats,16,extra")["/ethdev/stats"]["ipackets"] == 10
        for bad in ("/ethdev/info", "/ethdev/info,", "/ethdev/info, 8", "/ethdev/info,x8",
                    "/ethdev/info,-8", "/ethdev/info,9", "/ethdev/info,65544",
                    "/ethdev/stats,65544", "/ethdev/xstats,99999999999999999999"):
            assert c.query(bad) == {bad.split(",")[0]: None}, bad


def test_a_failing_port_gives_null_and_others_still_work(tel, ports):
    p0, _ = ports

    def broken():
        raise OSError("device gone")

    p0.stats = broken
    p0.known["mtu"] = 1 << 40             # does not fit DPDK's int
    with Client(tel.path) as c:
        assert c.raw(b"/ethdev/stats,0") == b'{"/ethdev/stats":null}'
        assert c.raw(b"/ethdev/info,0") == b'{"/ethdev/info":null}'
        assert c.query("/ethdev/stats,3")["/ethdev/stats"]["ipackets"] == 10


def test_add_port_validation(tel, ports):
    with pytest.raises(InvalidArgument):
        tel.add_port(StubPort(0, "dup"))
    for bad_id in (-1, 65536, "0", 1.0, True):
        p = StubPort(1)
        p.port_id = bad_id
        with pytest.raises(InvalidArgument):
            tel.add_port(p)
    p = StubPort(1)
    p.xstats = None
    with pytest.raises(InvalidArgument):
        tel.add_port(p)
    with pytest.raises(InvalidArgument):
        tel.remove_port(1)


# -- mempools -------------------------------------------------------------------------------
def test_mempool_list_and_info(tel, domain):
    mb = PktmbufPool(512, 32, data_room=2176, priv_size=64, domain=domain, name="mb_pool_0")
    ob = Mempool(100, 200, 8, domain=domain, name="objs", sp_put=True, sc_get=True)
    tel.add_mempool(mb)
    tel.add_mempool(ob)
    with Client(tel.path) as c:
        assert c.raw(b"/mempool/list") == b'{"/mempool/list":["mb_pool_0","objs"]}'
        i = c.query("/mempool/info,mb_pool_0")["/mempool/info"]
        assert list(i) == MEMPOOL_KEYS
        assert i["name"] == "mb_pool_0" and i["size"] == 512 and i["cache_size"] == 32
        assert i["elt_size"] == 128 + 64 + 2176 and i["populated_size"] == 512
        assert i["mz_name"] == "MP_mb_pool_0" and i["mz_len"] == mb.region.size
        assert i["flags"] == 0x10 and i["pool_id"] == mb.id
        o = c.query("/mempool/info,objs")["/mempool/info"]
        assert o["flags"] == 0x10 | 0x4 | 0x8 and o["elt_size"] == ob.elt_size
        assert c.raw(b"/mempool/info,nope") == b'{"/mempool/info":{}}'   # DPDK: {} not null
        assert c.raw(b"/mempool/info") == b'{"/mempool/info":null}'
        assert c.raw(b"/mempool/info,objs\n") == b'{"/mempool/info":{}}'
        ob.close()                                         # a closed pool is gone
        assert c.query("/mempool/list") == {"/mempool/list": ["mb_pool_0"]}
        assert c.query("/mempool/info,objs") == {"/mempool/info": {}}
        tel.remove_mempool("mb_pool_0")
        assert c.query("/mempool/list") == {"/mempool/list": []}
    mb.close()


def test_add_mempool_validation(tel, domain):
    a = PktmbufPool(64, 8, domain=domain, name="same")
    b = PktmbufPool(64, 8, domain=domain, name="same")
    long = PktmbufPool(64, 8, domain=domain, name="p" * 32)
    try:
        tel.add_mempool(a)
        with pytest.raises(InvalidArgument):
            tel.add_mempool(b)            # DPDK's pool names are unique
        with pytest.raises(InvalidArgument):
            tel.add_mempool(long)         # /mempool/info could never find it
        with pytest.raises(InvalidArgument):
            tel.add_mempool("same")
        with pytest.raises(InvalidArgument):
            tel.remove_mempool("other")
        a.close()
        tel.add_mempool(b)                # the name is free once the first pool is closed
    finally:
        for p in (a, b, long):
            if not p.closed:
                p.close()


def test_pktbuf_domain_counts(prefix, domain):
    from pktbuf.telemetry.server import Telemetry
    pool = PktmbufPool(256, 16, domain=domain, name="rx")
    with Telemetry(prefix, domain=domain) as t, Client(t.path) as c:
        d = c.query("/pktbuf/domain")["/pktbuf/domain"]
        assert d["pool_count"] == 1
        row = d["pools"][str(pool.id)]
        assert row["name"] == "rx" and row["mbuf"] == 1 and row["size"] == 256
        assert row["avail"] == 256 and row["in_use"] == 0
        held = pool.alloc_bulk(100)
        row = c.query("/pktbuf/domain")["/pktbuf/domain"]["pools"][str(pool.id)]
        assert row["avail"] == 156 and row["in_use"] == 100
        pool.free_bulk(held)
        pool.close()
        assert c.query("/pktbuf/domain")["/pktbuf/domain"] == {"pool_count": 0, "pools": {}}
