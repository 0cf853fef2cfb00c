"""Interop with DPDK 22.11's net_af_packet (dpdk-testpmd in the test's namespace), both ways.

testpmd's single port forwards to itself in io mode: every frame pktbuf sends on veth0 reaches
testpmd on veth1 and comes back unchanged, so one exchange checks both directions byte for
byte.  rxonly and txonly check each direction on its own.  In CI these tests must run.
"""
import os

import pytest

from pktbuf.drivers.af_packet.api import AfPacketPort
from pktbuf.apps import testpmd as T

from .helpers import (check_io_echo, check_rxonly, check_txonly, frames,
                      receive, send_all, start_testpmd, vlan_tag)

if not T.available():
    if os.environ.get("CI"):
        pytest.fail("dpdk-testpmd is not installed (apt-get install dpdk)", pytrace=False)
    pytest.skip("dpdk-testpmd is not installed", allow_module_level=True)

SIZES = list(range(60, 1515, 29)) + [1514]


def _testpmd(ns, fwd, vdev="net_af_packet0,iface=veth1", **kw):
    return start_testpmd(ns, fwd, vdev, **kw)


def _port(ns, pool, **kw):
    with ns.entered():
        return AfPacketPort(pool, "veth0", **kw)


def test_io_echo_byte_exact(ns, pool):
    a = _port(ns, pool)
    tp = _testpmd(ns, "io")
    try:
        check_io_echo(a, pool, tp, frames(SIZES * 4, seed=21))
    finally:
        tp.cleanup()
        a.close()
    assert pool.avail_count == pool.n


def test_vlan_through_testpmd(ns, pool):
    """A tagged frame crosses two AF_PACKET receivers, each of which gets it untagged from the
    kernel and puts the tag back: it comes back byte for byte."""
    a = _port(ns, pool)
    tp = _testpmd(ns, "io")
    try:
        want = [vlan_tag(f, 0x2000 | i) for i, f in enumerate(frames([60, 200, 1514] * 5,
                                                                        seed=22))]
        assert send_all(a, pool, want) == len(want)
        got = receive(a, pool, len(want), timeout=20)
        assert got == want
    finally:
        tp.cleanup()
        a.close()


def test_pktbuf_to_testpmd_rxonly(ns, pool):
    a = _port(ns, pool)
    tp = _testpmd(ns, "rxonly")
    try:
        check_rxonly(a, pool, tp, frames(SIZES * 3, seed=23))
    finally:
        tp.cleanup()
        a.close()


def test_testpmd_txonly_to_pktbuf(ns, pool):
    """testpmd's generator (64-byte UDP frames from its port's MAC) floods faster than a
    Python loop drains: pktbuf receives them whole, and what it could not take is counted in
    imissed (PACKET_STATISTICS), never more than testpmd sent."""
    a = _port(ns, pool)
    tp = _testpmd(ns, "txonly")
    try:
        check_txonly(a, pool, tp, ns)
    finally:
        tp.cleanup()
        a.close()
    assert pool.avail_count == pool.n


def test_jumbo_io_echo():
    """MTU 9000 on both veth ends; testpmd 22.11 with a Tx/Rx frame slot that holds 9014 bytes
    (framesz = blocksz: DPDK assumes frames evenly spaced over the whole ring, true only when
    framesz divides blocksz) and mbufs as large (--mbuf-size), without --max-pkt-len (its
    net_af_packet reports a 1518-byte maximum and refuses more).  Frames up to 9014 bytes go
    to testpmd and back byte for byte; pktbuf receives them as chains."""
    import pktbuf
    from ..netns import Netns
    from .conftest import _need_root
    _need_root()
    pool = pktbuf.PktmbufPool(8192, 64)
    with Netns() as ns:
        ns.veth(mtu=9000)
        a = _port(ns, pool)
        tp = _testpmd(ns, "io", vdev="net_af_packet0,iface=veth1,blocksz=12288,framesz=12288,"
                      "framecnt=64", app_extra=["--mbuf-size=12400"], mbufs=2048)
        try:
            want = frames([60, 1514, 1515, 4000, 8000, 9014] * 10, seed=24)
            assert send_all(a, pool, want, seg=1500) == len(want)
            got = receive(a, pool, len(want), timeout=20)
            assert got == want
        finally:
            tp.cleanup()
            a.close()
    assert pool.avail_count == pool.n
    pool.close()
