"""Bad input gets a clear exception, and every pool stays exactly as it was."""
import os
import subprocess
import sys
import time

import pytest

import pktbuf
from pktbuf.drivers.af_packet.api import AfPacketPort
from pktbuf.ethdev.api import Ports
from pktbuf.errors import InvalidArgument, NoSuchInterface

from .helpers import RawPeer, frames, receive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("dev, msg", [
    ("net_af_packet0,iface=veth0,bogus=1", "unknown argument 'bogus'"),
    ("net_af_packet0", "iface=<interface name> is required"),
    ("net_af_packet0,iface=veth0,qpairs=0", "qpairs=0 is out of range"),
    ("net_af_packet0,iface=veth0,qpairs=x", "is not an integer"),
    ("net_af_packet0,iface=veth0,blocksz=5000", "not a multiple of the page size"),
    ("net_af_packet0,iface=veth0,framesz=2001", "multiple of 16"),
    ("net_af_packet0,iface=veth0,framesz=8192,blocksz=4096", "larger than blocksz"),
    ("net_af_packet0,iface=veth0,framecnt=3", "not a multiple of the 2 frames"),
    ("net_af_packet0,iface=veth0,qdisc_bypass=maybe", "is not yes/no"),
    ("net_af_packet0,iface=veth0,fanout_mode=random", "fanout_mode='random'"),
    ("net_af_packet0,iface=veth0,fanout_id=70000", "out of range"),
    ("net_af_packet0,iface=" + "x" * 16, "not an interface name"),
])
def test_bad_devargs(ns, pool, dev, msg):
    ports = Ports(pool)
    with ns.entered():
        with pytest.raises(InvalidArgument, match=msg):
            ports.open(dev)
    assert len(ports) == 0 and pool.avail_count == pool.n
    assert ns.link("veth0")["promiscuity"] == 0


def test_missing_interface(ns, pool):
    with ns.entered():
        with pytest.raises(NoSuchInterface, match="no interface 'nope0'"):
            AfPacketPort(pool, "nope0")
        with pytest.raises(NoSuchInterface):
            Ports(pool).open("net_af_packet0,iface=nope0")
    assert pool.avail_count == pool.n


def test_no_permission_without_cap_net_raw(ns):
    """Without CAP_NET_RAW (dropped with setpriv, still uid 0) opening fails with
    PermissionDenied, naming the capability."""
    code = ("import pktbuf, sys\n"
            "from pktbuf.drivers.af_packet.api import AfPacketPort\n"
            "from pktbuf.errors import PermissionDenied\n"
            "pool = pktbuf.PktmbufPool(256, 0)\n"
            "try:\n"
            "    AfPacketPort(pool, 'veth0')\n"
            "except PermissionDenied as e:\n"
            "    assert pool.avail_count == pool.n\n"
            "    print('DENIED', e); sys.exit(0)\n"
            "sys.exit(3)\n")
    r = subprocess.run(ns.exec_argv(["setpriv", "--inh-caps=-net_raw", "--bounding-set=-net_raw",
                                     "--", sys.executable, "-c", code]),
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "DENIED" in r.stdout and "CAP_NET_RAW" in r.stdout
    # the control: the same program with the capability gets its port (exit 3)
    r = subprocess.run(ns.exec_argv([sys.executable, "-c", code]), cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 3, r.stdout + r.stderr


def test_closed_port_refuses(ns, pool):
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
    a.close()
    a.close()                                    # idempotent
    with pytest.raises(InvalidArgument, match="closed"):
        a.rx_burst(4)
    m = pool.alloc()
    with pytest.raises(InvalidArgument, match="closed"):
        a.tx_burst([m.handle])
    m.free()                                     # still ours: the port took nothing
    assert a.link()["status"] == "DOWN"
    assert a.info()["mtu"] == 1500 and a.stats()["ipackets"] == 0   # still answers
    assert pool.avail_count == pool.n


def test_tx_bad_handles_send_nothing(ns, pool):
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
    try:
        m = pool.alloc()
        m.append_bytes(frames([60])[0])
        with pytest.raises(pktbuf.DoubleFree):
            a.tx_burst([m.handle, m.handle])
        assert a.stats()["opackets"] == 0
        assert a.tx_burst([m.handle]) == 1
    finally:
        a.close()
    assert pool.avail_count == pool.n


def test_rx_no_mbufs_leaves_frames_in_ring(ns):
    """With the pool empty a burst takes nothing and counts rx_nombuf; the frames wait in
    the ring and arrive once mbufs are back."""
    pool = pktbuf.PktmbufPool(64, 0)
    with ns.entered():
        a = AfPacketPort(pool, "veth0")
        peer = RawPeer("veth1")
    try:
        held = pool.alloc_bulk(64)
        want = frames([60, 1514, 300], seed=30)
        peer.send(want)
        time.sleep(0.1)
        assert a.rx_wait(0, 2000) == 1
        assert a.rx_burst(32).size == 0
        assert a.stats()["rx_nombuf"] >= 1
        pool.free_bulk(held)
        assert receive(a, pool, 3) == want
    finally:
        a.close()
        peer.close()
    assert pool.avail_count == pool.n
    pool.close()
