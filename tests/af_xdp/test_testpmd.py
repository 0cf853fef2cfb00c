"""Interop with DPDK 22.11's net_af_xdp (dpdk-testpmd in the test's namespace), both ways.

testpmd's port on veth1 forwards to itself in io mode, so every frame pktbuf's AF_XDP port
sends on veth0 comes back through testpmd's AF_XDP socket unchanged: one exchange checks both
directions byte for byte.  txonly checks testpmd -> pktbuf alone, rxonly pktbuf -> testpmd.
testpmd attaches its program through libxdp/netlink, which outlives a killed testpmd: then
pktbuf says so clearly; pktbuf's BPF link never blocks testpmd after pktbuf closed.
"""
import os
import signal
import time

import pytest

from pktbuf.apps import testpmd as T
from pktbuf.errors import Busy

from ..af_packet.helpers import (check_io_echo, check_rxonly, check_txonly, frames,
                                 receive, send_all, start_testpmd)
from .helpers import audit_whole, open_port, wait_detached, xdp_attached

if not T.available():
    if os.environ.get("CI"):
        pytest.fail("dpdk-testpmd is not installed (apt-get install dpdk)", pytrace=False)
    pytest.skip("dpdk-testpmd is not installed", allow_module_level=True)

SIZES = list(range(60, 1515, 29)) + [1514]


def _testpmd(ns, fwd, iface="veth1", **kw):
    return start_testpmd(ns, fwd, f"net_af_xdp0,iface={iface},start_queue=0,queue_count=1",
                         bpffs=True, **kw)


def test_io_echo_byte_exact(ns, pool):
    a = open_port(ns, pool)
    tp = _testpmd(ns, "io")
    try:
        check_io_echo(a, pool, tp, frames(SIZES * 4, seed=51))
    finally:
        tp.cleanup()
        a.close()
    audit_whole(pool)


def test_pktbuf_to_testpmd_rxonly(ns, pool):
    a = open_port(ns, pool)
    tp = _testpmd(ns, "rxonly")
    try:
        check_rxonly(a, pool, tp, frames(SIZES * 3, seed=52))
    finally:
        tp.cleanup()
        a.close()
    audit_whole(pool)


def test_testpmd_txonly_to_pktbuf(ns, pool):
    """testpmd's generator (64-byte UDP frames from its port's MAC) floods faster than a
    Python loop drains: what pktbuf receives is whole; what it could not take is counted in
    imissed (XDP_STATISTICS), never more than testpmd sent."""
    a = open_port(ns, pool)
    tp = _testpmd(ns, "txonly")
    try:
        check_txonly(a, pool, tp, ns)
    finally:
        tp.cleanup()
        a.close()
    audit_whole(pool)


def test_testpmd_attaches_after_pktbuf_closed(ns, pool):
    """pktbuf's program, attached with a BPF link, is gone once the port closes: testpmd
    (libxdp, netlink, XDP_FLAGS_UPDATE_IF_NOEXIST) attaches to the same interface and
    forwards."""
    b = open_port(ns, pool, "veth1")
    assert xdp_attached(ns, "veth1") is not None
    b.close()
    a = open_port(ns, pool)
    tp = _testpmd(ns, "io")
    try:
        want = frames([60, 1514] * 5, seed=53)
        assert send_all(a, pool, want) == len(want)
        assert receive(a, pool, len(want), timeout=20) == want
    finally:
        tp.cleanup()
        a.close()
    audit_whole(pool)


def test_netlink_program_left_by_killed_testpmd(ns, pool):
    """`kill -9` of testpmd leaves its netlink-attached program behind: opening a pktbuf port
    there says so (Busy, with how to detach it); once detached, the port opens."""
    tp = _testpmd(ns, "rxonly")
    try:
        assert xdp_attached(ns, "veth1") is not None
        _kill_testpmd(tp)
        time.sleep(0.2)
        assert xdp_attached(ns, "veth1") is not None       # still there: netlink
        with pytest.raises(Busy, match="another XDP program is attached to 'veth1'.*xdp off"):
            open_port(ns, pool, "veth1")
        audit_whole(pool)
        ns.run("ip", "link", "set", "dev", "veth1", "xdp", "off")
        assert wait_detached(ns, "veth1")
        b = open_port(ns, pool, "veth1")
        b.close()
    finally:
        tp.cleanup()
    audit_whole(pool)


def _kill_testpmd(tp) -> None:
    """SIGKILL the dpdk-testpmd process itself (under ip netns exec, sh, timeout, stdbuf)."""
    import subprocess
    out = subprocess.run(["pgrep", "-f", f"file-prefix={tp.prefix}"], capture_output=True,
                         text=True).stdout.split()
    pids = [int(p) for p in out]
    exe = [p for p in pids if os.path.basename(os.readlink(f"/proc/{p}/exe")) == "dpdk-testpmd"]
    assert exe, pids
    for p in exe:
        os.kill(p, signal.SIGKILL)
    end = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{p}") and _state(p) != "Z" for p in exe):
        assert time.monotonic() < end
        time.sleep(0.02)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
