"""The XDP program lives exactly as long as the port: attached with a BPF link, it is gone
after close and after `kill -9` of the process that opened it, and the next attach works."""
import os
import signal
import subprocess
import sys

from .helpers import audit_whole, open_port, wait_detached, xdp_attached

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import sys, time
import pktbuf
from pktbuf.drivers.af_xdp.api.port import AfXdpPort
pool = pktbuf.PktmbufPool(4096, 0)
p = AfXdpPort(pool, "veth0")
print("READY", p.info()["xdp_mode"], flush=True)
time.sleep(120)
"""


def test_program_attached_while_open_and_gone_after_close(ns, pool):
    assert xdp_attached(ns) is None
    x = open_port(ns, pool)
    try:
        a = xdp_attached(ns)
        assert a is not None and a["mode"] == 1          # XDP_ATTACHED_DRV: native
        assert x.info()["xdp_mode"] == "native"
    finally:
        x.close()
    assert xdp_attached(ns) is None                      # at once: close() closed the link
    audit_whole(pool)
    y = open_port(ns, pool)                              # and the next attach works
    y.close()
    audit_whole(pool)


def test_program_gone_after_kill_9(ns, pool):
    x = open_port(ns, pool)          # compile the set-up kernels here first (shared cache)
    x.close()
    child = subprocess.Popen(ns.exec_argv([sys.executable, "-c", CHILD]), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        assert line[:1] == ["READY"], child.stderr.read()
        assert xdp_attached(ns) is not None
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL
        assert wait_detached(ns), ns.run("ip", "-d", "link", "show", "veth0").stdout
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    y = open_port(ns, pool)          # no EBUSY: nothing was left behind
    try:
        assert xdp_attached(ns) is not None
    finally:
        y.close()
    audit_whole(pool)
