"""One XDP program shared by ports on different queues of one interface (``xsk_map=``): a
:class:`SharedXdpProgram` attaches it, each port puts its socket at its queue's key; what is
refused, and what happens when a port closes or the owner is killed."""
import os
import signal
import subprocess
import sys

import pytest

from pktbuf.drivers.af_xdp.api.port import SharedXdpProgram, parse_xsk_map
from pktbuf.errors import Busy, InvalidArgument

from ..af_packet.helpers import RawPeer, frames, receive
from ..netns import Netns
from .conftest import need_root
from .helpers import (audit_whole, need_cpus, open_port, send_on_queues, wait_detached,
                      xdp_attached)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def ns2():
    """A namespace with a veth pair of two Rx and two Tx queues on each end."""
    need_root()
    with Netns() as n:
        n.veth(queues=2)
        yield n


def _shared(ns, *a, **kw) -> SharedXdpProgram:
    with ns.entered():
        return SharedXdpProgram(*a, **kw)


def test_two_ports_one_program_each_gets_its_queue(ns2, pool):
    """Two ports on queues 0 and 1 of veth0 through one program: the frames of each Rx queue
    reach that queue's port only.  Once port 1 closes, queue 1's frames go on to the kernel's
    stack (a packet socket on veth0 sees them) while port 0 still gets queue 0's."""
    need_cpus(2)
    ns = ns2
    sh = _shared(ns, "veth0", 2)
    try:
        assert xdp_attached(ns) is not None and sh.xdp_mode == "native"
        pid, fd = parse_xsk_map(sh.xsk_map)
        assert pid == os.getpid()
        ports = [open_port(ns, pool, start_queue=q, xsk_map=sh.xsk_map) for q in (0, 1)]
        try:
            assert [p.info()["xdp_mode"] for p in ports] == ["shared", "shared"]
            assert ports[1].info()["xsk_map"] == sh.xsk_map
            sent = {0: frames([70] * 12, seed=51), 1: frames([90] * 9, seed=52)}
            send_on_queues(ns, "veth1", sent)
            for q in (0, 1):
                assert receive(ports[q], pool, len(sent[q]), timeout=10) == sent[q]
            assert [p.stats()["ipackets"] for p in ports] == [12, 9]
            ports[1].close()
            with ns.entered():
                stack = RawPeer("veth0")
            try:
                again = {0: frames([71] * 5, seed=53), 1: frames([91] * 6, seed=54)}
                send_on_queues(ns, "veth1", again)
                assert receive(ports[0], pool, 5, timeout=10) == again[0]
                seen = stack.recv(6, timeout=10, until=lambda b: b == again[1][-1])
                assert [b for b in seen if len(b) == 91] == again[1]
                assert not [b for b in seen if b in again[0]]   # XDP took queue 0's
            finally:
                stack.close()
            assert ports[0].stats()["ipackets"] == 17
        finally:
            for p in ports:
                p.close()
        assert xdp_attached(ns) is not None        # the ports do not own the program
    finally:
        sh.close()
    assert xdp_attached(ns) is None                # gone at once with the owner's link
    audit_whole(pool)


def test_refused(ns2, pool):
    ns = ns2
    with pytest.raises(InvalidArgument, match=r"queues 1\.\.2 of 'veth0', which has only 2 Rx "
                       r"queues \(0\.\.1\)"):
        _shared(ns, "veth0", 2, start_queue=1)
    with pytest.raises(InvalidArgument, match=r"start_queue=2 queue_count=1 needs queue 2 of "
                       r"'veth0', which has only 2 Rx queues"):
        open_port(ns, pool, start_queue=2)
    for bad in ("1", "a:b", "1:2:3", "-1:3", "0:3", ""):
        with pytest.raises(InvalidArgument, match="xsk_map"):
            open_port(ns, pool, xsk_map=bad)
    assert xdp_attached(ns) is None
    sh = _shared(ns, "veth0", 1)                   # an XSKMAP of one entry: queue 0 only
    try:
        with pytest.raises(Busy, match="share it with xsk_map="):
            _shared(ns, "veth0", 2)                # one program per interface
        with pytest.raises(Busy, match="another XDP program is attached"):
            open_port(ns, pool, start_queue=1)     # a port with its own program
        with pytest.raises(InvalidArgument, match="has 1 entries .* queue 1 does not fit"):
            open_port(ns, pool, start_queue=1, xsk_map=sh.xsk_map)
        with open(__file__, "rb") as f:
            with pytest.raises(InvalidArgument, match="is not a BPF map"):
                open_port(ns, pool, xsk_map=f"{os.getpid()}:{f.fileno()}")
        with pytest.raises(InvalidArgument, match="has no fd 999999"):
            open_port(ns, pool, xsk_map=f"{os.getpid()}:999999")
        gone = subprocess.Popen(["true"])
        gone.wait()
        with pytest.raises(InvalidArgument, match=f"there is no process {gone.pid}"):
            open_port(ns, pool, xsk_map=f"{gone.pid}:3")
        x = open_port(ns, pool, xsk_map=sh.xsk_map)   # and then the right one works
        x.close()
    finally:
        sh.close()
    assert xdp_attached(ns) is None
    audit_whole(pool)


OWNER = r"""
import os, sys, time
from pktbuf.drivers.af_xdp.api.port import SharedXdpProgram
sh = SharedXdpProgram("veth0", 2)
print("READY", sh.xsk_map, flush=True)
time.sleep(120)
"""


def test_owner_killed_takes_the_program_and_leaves_no_pin(ns2, pool):
    """The owner is killed: its link goes and the program with it (nothing pinned outlives
    it); a port that joined its map stays open, gets no frames, and closes cleanly; then the
    interface takes a new program."""
    ns = ns2
    child = subprocess.Popen(ns.exec_argv([sys.executable, "-c", OWNER]), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        assert line[:1] == ["READY"], child.stderr.read()
        assert parse_xsk_map(line[1])[0] == child.pid      # ip netns exec execs in place
        x = open_port(ns, pool, start_queue=1, xsk_map=line[1])
        try:
            assert xdp_attached(ns) is not None
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
            assert wait_detached(ns)
            assert x.info()["xdp_mode"] == "shared"
        finally:
            x.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    y = open_port(ns, pool, queue_count=2)                 # no EBUSY: nothing left behind
    y.close()
    audit_whole(pool)
