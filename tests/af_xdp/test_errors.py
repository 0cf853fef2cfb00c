"""What the kernel or the pool refuses gives a clear error, and no mbuf is ever lost: a
second socket on a queue, zero-copy on veth, pools with too little room, the native-XDP MTU
limit of veth, a full fill ring, an empty pool, a link going down under traffic, bad device
strings."""
import errno
import time

import numpy as np
import pytest

import pktbuf
from pktbuf.drivers.af_packet.api import AfPacketPort
from pktbuf.errors import (Busy, InvalidArgument, NoRoom, NoSuchInterface, PoolExhausted,
                           PortError)

from ..af_packet.helpers import RawPeer, frames, receive, send_all
from ..netns import Netns
from .conftest import need_root
from .helpers import audit_whole, open_port, xdp_attached


def test_bad_device_strings(pool):
    ports = pktbuf.Ports(pool)
    with pytest.raises(InvalidArgument, match="unknown argument 'bogus'.*accepted: iface"):
        ports.open("net_af_xdp0,iface=veth0,bogus=1")
    with pytest.raises(InvalidArgument, match="iface=<interface name> is required"):
        ports.open("net_af_xdp0,start_queue=0")
    with pytest.raises(InvalidArgument, match="shared_umem is not supported"):
        ports.open("net_af_xdp0,iface=veth0,shared_umem=1")
    with pytest.raises(InvalidArgument, match="busy_budget=70000 is out of range"):
        ports.open("net_af_xdp0,iface=veth0,busy_budget=70000")
    with pytest.raises(InvalidArgument, match="force_copy='maybe'"):
        ports.open("net_af_xdp0,iface=veth0,force_copy=maybe")
    assert len(ports) == 0
    audit_whole(pool)


def test_no_such_interface(ns, pool):
    with pytest.raises(NoSuchInterface, match="no interface 'nope0'"):
        open_port(ns, pool, "nope0")
    audit_whole(pool)


def test_second_socket_on_the_same_queue(ns, pool):
    x = open_port(ns, pool)
    try:
        with pytest.raises(Busy, match="queue 0 of 'veth0' has an AF_XDP socket already"):
            open_port(ns, pool)
        assert xdp_attached(ns) is not None          # the first port's program is intact
        with ns.entered():
            peer = RawPeer("veth1")
        want = frames([60, 1514] * 5, seed=41)
        peer.send(want)
        assert receive(x, pool, len(want), timeout=10) == want
        peer.close()
    finally:
        x.close()
    audit_whole(pool)


def test_zero_copy_refused_on_veth_copy_fallback(ns, pool):
    with pytest.raises(PortError, match="no AF_XDP zero-copy support"):
        open_port(ns, pool, zero_copy=True)
    assert xdp_attached(ns) is None
    audit_whole(pool)
    for kw in ({}, {"force_copy": True}):            # the default binds in copy mode on veth
        x = open_port(ns, pool, **kw)
        try:
            assert x.info()["zero_copy"] is False
            with ns.entered():
                peer = RawPeer("veth1")
            want = frames([60, 700], seed=42)
            peer.send(want)
            assert receive(x, pool, 2, timeout=10) == want
            peer.close()
        finally:
            x.close()
    audit_whole(pool)


def test_pools_with_too_little_room(ns):
    small = pktbuf.PktmbufPool(4096, 0, data_room=1024, name="afxdp-small")
    try:
        with pytest.raises(InvalidArgument, match="data_room is 1024.*at least 2048"):
            open_port(ns, small)
        audit_whole(small)
    finally:
        small.close()
    ns.run("ip", "link", "set", "veth0", "mtu", "2000")
    pool = pktbuf.PktmbufPool(4096, 0, name="afxdp-2176")
    try:
        with pytest.raises(InvalidArgument,
                           match="leaves 1920 bytes per frame after the kernel's 256-byte "
                                 "XDP headroom.*MTU 2000 needs 2014"):
            open_port(ns, pool)
        assert xdp_attached(ns) is None
        audit_whole(pool)
    finally:
        pool.close()


def test_veth_native_mtu_limit_generic_fallback():
    """veth refuses native XDP over MTU 3506 for a single-buffer program: xdp_mode='native'
    says so; 'auto' attaches in generic mode and receives 3614-byte frames byte for byte."""
    need_root()
    pool = pktbuf.PktmbufPool(2048, 0, data_room=4096, name="afxdp-4k")
    with Netns() as ns:
        ns.veth(queues=1, mtu=3600)
        with pytest.raises(InvalidArgument, match="refuses native XDP at MTU 3600.*ERANGE"):
            open_port(ns, pool, xdp_mode="native")
        assert xdp_attached(ns) is None
        x = open_port(ns, pool, rx_frames=512)
        try:
            assert x.info()["xdp_mode"] == "generic"
            assert xdp_attached(ns)["mode"] == 2      # XDP_ATTACHED_SKB
            with ns.entered():
                peer = RawPeer("veth1")
            want = frames([60, 1514, 3000, 3614], seed=43)
            peer.send(want)
            assert receive(x, pool, len(want), timeout=10) == want
            assert send_all(x, pool, want) == len(want)
            assert peer.recv(len(want), timeout=10) == want
            peer.close()
        finally:
            x.close()
    audit_whole(pool)
    pool.close()


def test_full_fill_ring(ns, pool):
    """rx_frames larger than the fill ring: the ring fills and a further fill says so; the
    kernel takes frames from it as they arrive and the bursts top it up again."""
    x = open_port(ns, pool, fill_size=64, rx_size=64, rx_frames=128)
    try:
        assert x.in_flight()["rx"] == 64
        with pytest.raises(NoRoom, match="fill ring of queue 0 is full"):
            x.fill(1)
        assert x.xstats()["rx_fill_ring_full"] == 1
        with ns.entered():
            peer = RawPeer("veth1")
        want = frames([100] * 40, seed=44)
        peer.send(want)
        got = receive(x, pool, len(want), timeout=10)
        assert got == want
        assert x.in_flight()["rx"] == 64           # the 40 the kernel took were replaced
        before = x.xstats()["rx_fill_ring_full"]
        with pytest.raises(NoRoom):
            x.fill(1)
        assert x.xstats()["rx_fill_ring_full"] == before + 1
        peer.close()
    finally:
        x.close()
    audit_whole(pool)


def test_pool_too_small_for_the_fill_ring(ns):
    pool = pktbuf.PktmbufPool(100, 0, name="afxdp-tiny")
    try:
        with pytest.raises(PoolExhausted, match="cannot give the 2048 frames queue 0"):
            open_port(ns, pool)
        assert xdp_attached(ns) is None
        audit_whole(pool)
    finally:
        pool.close()


def test_empty_pool(ns):
    """The application holds every free mbuf: the frames already posted are still received,
    refills fail (rx_nombuf), and once the fill ring is dry the kernel drops (imissed).  Every
    frame sent is either received or counted missed, and no mbuf is lost."""
    pool = pktbuf.PktmbufPool(320, 0, name="afxdp-empty")
    x = open_port(ns, pool, rx_frames=256, rx_size=256, fill_size=256)
    try:
        held = pool.alloc_bulk(pool.avail_count)
        with ns.entered():
            peer = RawPeer("veth1")
        want = frames([60] * 400, seed=45)
        got = []
        for i in range(0, 400, 50):
            peer.send(want[i:i + 50])
            time.sleep(0.05)
            for _ in range(5):
                got.extend(int(h) for h in x.rx_burst(64))
        for _ in range(50):
            got.extend(int(h) for h in x.rx_burst(64))
        s = x.stats()
        assert len(got) == 256 == s["ipackets"]
        assert s["rx_nombuf"] > 0
        assert s["ipackets"] + s["imissed"] == len(want)
        assert [pool.mbuf(h).tobytes() for h in got] == want[:256]
        pool.free_bulk(np.array(got, np.int32))
        pool.free_bulk(held)
        more = frames([80] * 20, seed=46)           # with mbufs back, refills resume
        x.rx_burst(64)
        peer.send(more)
        assert receive(x, pool, 20, timeout=10) == more
        peer.close()
    finally:
        x.close()
    audit_whole(pool)
    pool.close()


def test_link_down_mid_traffic(ns, pool):
    """veth0 goes down while the port sends: the kicks fail with ENETDOWN (counted, the
    link reports DOWN), frames taken are never lost -- completed or still on the ring --
    and after the link is back traffic flows again."""
    x = open_port(ns, pool)
    with ns.entered():
        p = AfPacketPort(pool, "veth1")
    try:
        assert send_all(x, pool, frames([200] * 100, seed=47)) == 100
        assert len(receive(p, pool, 100, timeout=10)) == 100
        ns.set_link("veth0", False)
        assert x.link()["status"] == "DOWN"
        sent = send_all(x, pool, frames([200] * 100, seed=48), timeout=2)
        xs = x.xstats()
        assert xs["tx_kick_errors"] > 0 and xs["tx_kick_last_errno"] == errno.ENETDOWN
        assert sent + xs["tx_ring_full"] >= 1
        ns.set_link("veth0", True)
        assert x.link()["status"] == "UP"
        receive(p, pool, 1 << 20, timeout=0.5)      # whatever went out after the link came back
        want = frames([300] * 50, seed=49)
        assert send_all(x, pool, want) == len(want)
        got = receive(p, pool, 1 << 20, timeout=10, until=lambda b: b == want[-1])
        assert got[-len(want):] == want             # the frames held while down went first
        assert all(len(g) == 200 for g in got[:-len(want)])
    finally:
        x.close()
        p.close()
    audit_whole(pool)


CHILD_MEMLOCK = r"""
import pktbuf
from pktbuf.drivers.af_xdp.api.port import AfXdpPort
from pktbuf.errors import OutOfMemory
pool = pktbuf.PktmbufPool(4096, 0)
try:
    AfXdpPort(pool, "veth0")
except OutOfMemory as e:
    assert pool.in_use_count == 0
    print("REFUSED", e)
"""


def test_umem_over_memlock_limit(ns, pool):
    """Without CAP_IPC_LOCK the UMEM's pinned pages count against RLIMIT_MEMLOCK: a pool over
    the limit is refused at open (XDP_UMEM_REG: ENOBUFS) with what to do about it."""
    import os
    import shutil
    import subprocess
    import sys
    if shutil.which("setpriv") is None or shutil.which("prlimit") is None:
        pytest.skip("needs util-linux's setpriv and prlimit")
    x = open_port(ns, pool)          # the set-up kernels compiled here first (shared cache)
    x.close()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run(ns.exec_argv(["setpriv", "--bounding-set", "-ipc_lock", "--inh-caps",
                                     "-ipc_lock", "prlimit", "--memlock=1048576",
                                     sys.executable, "-c", CHILD_MEMLOCK]),
                       cwd=root, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "REFUSED" in r.stdout and "RLIMIT_MEMLOCK" in r.stdout and "CAP_IPC_LOCK" in r.stdout
