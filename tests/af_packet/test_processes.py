"""Other processes: a fanout group shared by two processes, and `pktbuf fwd` over an AF_PACKET
port."""
import json
import os
import subprocess
import sys

from pktbuf.drivers.af_packet.api import AfPacketPort

from .helpers import RawPeer, frames, receive, udp_frame

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import json, sys, time
import pktbuf
from pktbuf.drivers.af_packet.api import AfPacketPort
pool = pktbuf.PktmbufPool(4096, 0)
p = AfPacketPort(pool, "veth0", fanout_mode="lb", fanout_id=int(sys.argv[1]))
p.rx_burst(1)                                   # the kernel loaded before we say READY
print("READY", flush=True)
seen = []
end = time.monotonic() + float(sys.argv[2])
last = None
while time.monotonic() < end and (last is None or time.monotonic() - last < 2.0):
    for h in p.rx_burst(64):
        m = pool.mbuf(int(h))
        seen.append(m.tobytes().hex())
        m.free()
        last = time.monotonic()
    p.rx_wait(0, 20)
p.close()
assert pool.avail_count == pool.n
print(json.dumps(seen), flush=True)
"""


def test_fanout_group_across_processes(ns, pool):
    """Two processes, one port each, in one fanout group (same fanout_id, lb): every frame
    the peer sends reaches exactly one of them, and both get some."""
    gid = 0x4242
    child = subprocess.Popen(ns.exec_argv([sys.executable, "-c", CHILD, str(gid), "60"]),
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "READY", child.stderr.read()
        with ns.entered():
            a = AfPacketPort(pool, "veth0", fanout_mode="lb", fanout_id=gid)
            peer = RawPeer("veth1")
        try:
            a.rx_burst(1)                 # the kernel loaded (compiled on a cold cache) first
            want = [udp_frame(i, 60 + i % 100) for i in range(300)]
            peer.send(want)
            mine = receive(a, pool, len(want), timeout=5.0)       # about half
        finally:
            a.close()
            peer.close()
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        theirs = [bytes.fromhex(x) for x in json.loads(out.strip().splitlines()[-1])]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert mine and theirs
    assert sorted(mine + theirs) == sorted(want)
    assert pool.avail_count == pool.n


def test_pktbuf_fwd_io(ns):
    """`pktbuf fwd --vdev net_af_packet0,iface=veth0 --forward-mode io` inside the namespace
    sends back every frame the peer sends, unchanged, and counts them."""
    p = subprocess.Popen(ns.exec_argv([sys.executable, "-m", "pktbuf.cli", "fwd", "--vdev",
                                       "net_af_packet0,iface=veth0", "--forward-mode", "io",
                                       "--seconds", "15", "--json"]),
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        start = json.loads(p.stdout.readline())
        assert start["event"] == "start" and start["ports"][0]["driver"] == "net_af_packet"
        with ns.entered():
            peer = RawPeer("veth1")
        try:
            want = frames([60, 1514, 700] * 30, seed=40)
            peer.send(want)
            got = peer.recv(len(want), timeout=14)
        finally:
            peer.close()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert got == want
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["event"] == "summary" and summary["mbufs_in_use_at_close"] == 0
    port = summary["ports"][0]
    assert port["rx"] == port["tx"] == len(want)
