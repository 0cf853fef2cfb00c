"""The LPM facade (pktbuf.net.lpm.api): address forms, bad input refused with the table left
as it was, errors mapped to pktbuf.errors."""
from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from pktbuf.errors import InvalidArgument, NoRoom, OutOfRange, PktbufError
from pktbuf.net.lpm.api import Lpm, Lpm6, NoSuchRule


def state(t):
    return [np.array(a) for a in t.block] + [t.block.meta.copy()]


def unchanged(t, before):
    return all(np.array_equal(a, b) for a, b in zip(before, state(t)))


def test_lpm_address_forms_and_verbs():
    t = Lpm(16, 4)
    t.add("10.0.0.0", 8, 1)
    t.add(ipaddress.IPv4Address("10.1.0.0"), 16, 2)
    t.add(0x0A010200, 25, 3)
    assert t.lookup("10.9.9.9") == 1 and t.lookup(ipaddress.ip_address("10.1.9.9")) == 2
    assert t.lookup(0x0A010201) == 3 and t.lookup("11.0.0.0") is None
    assert t.is_rule_present("10.1.2.127", 25) == 3 and t.is_rule_present("10.1.2.0", 24) is None
    out = t.lookup_bulk(np.array([0x0A010201, 0x0B000000], np.uint32))
    assert out[0] == 0x65000003 and not out[1] & 0x01000000
    assert t.lookup_bulk(["10.9.9.9"])[0] & 0xFFFFFF == 1
    assert t.lookupx4(["10.9.9.9", "10.1.9.9", "10.1.2.1", "12.0.0.0"], 7) == [1, 2, 3, 7]
    assert len(t) == 3 and t.groups_used == 1
    m = t.memory()
    assert m["reserved"] >= 64 << 20 and 0 < m["resident"] <= m["reserved"]
    t.delete("10.1.2.0", 25)
    assert t.lookup("10.1.2.1") == 2 and t.groups_used == 0
    with pytest.raises(NoSuchRule):
        t.delete("10.1.2.0", 25)
    t.delete_all()
    assert len(t) == 0 and t.lookup("10.9.9.9") is None


@pytest.mark.parametrize("args, exc", [
    (("10.0.0.0", 0, 1), InvalidArgument), (("10.0.0.0", 33, 1), InvalidArgument),
    (("10.0.0.0", 8, 1 << 24), OutOfRange), (("10.0.0.0", 8, -1), InvalidArgument),
    ((1 << 32, 8, 1), OutOfRange), (("10.0.0.300", 8, 1), InvalidArgument),
    (("::1", 8, 1), InvalidArgument), ((1.5, 8, 1), InvalidArgument),
    ((True, 8, 1), InvalidArgument), ((None, 8, 1), InvalidArgument),
    (("10.0.0.0", 8.0, 1), InvalidArgument), (("10.0.0.0", True, 1), InvalidArgument),
])
def test_lpm_bad_input_leaves_table(args, exc):
    t = Lpm(4, 2)
    t.add("1.0.0.0", 8, 1)
    before = state(t)
    with pytest.raises(exc):
        t.add(*args)
    assert unchanged(t, before)


def test_lpm_no_room_and_bad_arrays():
    with pytest.raises(InvalidArgument):
        Lpm(0, 4)
    with pytest.raises(InvalidArgument):
        Lpm(4, 0)
    with pytest.raises(InvalidArgument):
        Lpm(4, (1 << 24) + 1)
    t = Lpm(2, 1)
    t.add("1.1.1.1", 32, 1)
    before = state(t)
    with pytest.raises(NoRoom):
        t.add("2.2.2.2", 32, 1)           # no second tbl8 group
    t.add("3.0.0.0", 8, 1)
    with pytest.raises(NoRoom):
        t.add("4.0.0.0", 8, 1)            # max_rules
    assert isinstance(NoRoom("x"), PktbufError)
    with pytest.raises(InvalidArgument):
        t.lookup_bulk(np.zeros((2, 2), np.uint32))
    with pytest.raises(OutOfRange):
        t.lookup_bulk(np.array([-1], np.int64))
    with pytest.raises(InvalidArgument):
        t.lookup_bulk([1, 2], out=np.zeros(1, np.uint32))
    with pytest.raises(InvalidArgument):
        t.lookup_bulk([1, 2], out=np.zeros(2, np.int64))
    with pytest.raises(InvalidArgument):
        t.lookupx4([1, 2, 3])
    del before


def test_lpm6_facade():
    t = Lpm6(8, 16)
    t.add("2001:db8::", 32, 1)
    t.add(ipaddress.IPv6Address("2001:db8:1::"), 48, 2)
    t.add(int(ipaddress.IPv6Address("2001:db8:1::1")), 128, 3)
    assert t.lookup("2001:db8::9") == 1 and t.lookup("2001:db8:1::9") == 2
    assert t.lookup("2001:db8:1::1") == 3 and t.lookup("::") is None
    out = t.lookup_bulk(["2001:db8::9", "::", "2001:db8:1::1"])
    assert out.tolist() == [1, -1, 3]
    arr = np.zeros((1, 16), np.uint8)
    assert t.lookup_bulk(arr).tolist() == [-1]
    assert t.is_rule_present("2001:db8:1::ffff", 48) == 2
    assert t.groups_used == 13
    t.delete("2001:db8:1::1", 128)
    assert t.groups_used == 3
    with pytest.raises(NoSuchRule):
        t.delete("2001:db8:1::1", 128)
    before = state(t)
    for args, exc in [(("2001:db8::", 129, 1), InvalidArgument), (("2001:db8::", 0, 1),
                      InvalidArgument), (("2001:db8::", 8, 1 << 21), OutOfRange),
                      (("10.0.0.0", 8, 1), InvalidArgument), ((1 << 128, 8, 1), OutOfRange)]:
        with pytest.raises(exc):
            t.add(*args)
    with pytest.raises(InvalidArgument):
        t.lookup_bulk(np.zeros((2, 8), np.uint8))
    assert unchanged(t, before)
    with pytest.raises(InvalidArgument):
        Lpm6(4, (1 << 21) + 1)
    t.delete_all()
    assert len(t) == 0 and t.groups_used == 0


def test_shared_table_is_a_memfd_block():
    t = Lpm(4, 2, shared=True)
    t.add("10.0.0.0", 8, 5)
    assert t.block.memory.fd is not None and t.lookup("10.1.1.1") == 5


def test_add_bulk_is_add_in_order_and_checks_first():
    from pktbuf.net.lpm.naive import NaiveLpm
    rng = np.random.default_rng(9)
    n = 400
    ips = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    depths = rng.integers(1, 33, n)
    nhs = rng.integers(0, 1 << 24, n)
    lpm, nv = Lpm(n, 512), NaiveLpm(n, 512)
    progress = np.zeros(1, np.int64)
    lpm.add_bulk(ips, depths, nhs, progress=progress)
    for a, d, h in zip(ips.tolist(), depths.tolist(), nhs.tolist()):
        nv.add(a & (((1 << d) - 1) << (32 - d)), d, h)
    assert progress[0] == n and len(lpm) == len(nv.rules)
    probe = rng.integers(0, 1 << 32, 2000, dtype=np.uint64).astype(np.uint32)
    probe[:n] = ips
    assert [lpm.lookup(int(a)) for a in probe] == \
        [None if nv.lookup(int(a)) < 0 else nv.lookup(int(a)) for a in probe]
    # bad arguments: nothing added
    before = len(lpm)
    for args, exc in (((ips[:3], [1, 0, 3], [1, 2, 3]), InvalidArgument),
                      ((ips[:3], [1, 2, 33], [1, 2, 3]), InvalidArgument),
                      ((ips[:3], [1, 2, 3], [1, 2, 1 << 24]), OutOfRange),
                      ((ips[:3], [1, 2], [1, 2, 3]), InvalidArgument),
                      ((ips[:3], [1.0, 2.0, 3.0], [1, 2, 3]), InvalidArgument)):
        with pytest.raises(exc):
            lpm.add_bulk(*args, progress=progress)
    with pytest.raises(InvalidArgument):
        lpm.add_bulk(ips[:1], [8], [1], progress=np.zeros(1, np.int32))
    assert len(lpm) == before and progress[0] == n
    # no room: the adds before the one that does not fit stay
    small = Lpm(2, 4)
    with pytest.raises(NoRoom, match="adds 2 of 3"):
        small.add_bulk([0x0A000000, 0x0B000000, 0x0C000000], [8, 8, 8], [1, 2, 3])
    assert len(small) == 2 and small.lookup("11.1.1.1") == 2
