"""A fresh network namespace with a veth pair, for tests that need real interfaces.

::

    with Netns() as ns:                   # `ip netns add pktbuf-<pid>-<n>`, removed on exit
        a, b = ns.veth()                  # veth0 <-> veth1, both up (mtu= to change it)
        with ns.entered():                # this thread in the namespace: sockets made here
            port = AfPacketPort(pool, a)  # stay in it after we come back
        ns.run("ip", "link", "set", a, "down")
        subprocess.run(ns.exec_argv(["dpdk-testpmd", ...]))

IPv6 is disabled in the namespace before any interface comes up, so no router solicitation or
MLD report lands among a test's frames.  Needs root (CI runs as root).
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import os
import subprocess
import time

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
_seq = itertools.count()


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


def need_root(what: str) -> None:
    """Skip (fail in CI) a test that needs root for ``what``."""
    import pytest
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail(f"the {what} tests need root", pytrace=False)
        pytest.skip(f"the {what} tests need root")


class Netns:
    def __init__(self, name: str | None = None):
        self.name = name or f"pktbuf-{os.getpid()}-{next(_seq)}"
        self.made = False

    def __enter__(self) -> "Netns":
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True)
        self.made = True
        for k in ("all", "default"):
            self.run("sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1")
        self.run("ip", "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.made:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
            self.made = False

    # -- commands ----------------------------------------------------------------------------
    def exec_argv(self, argv) -> list:
        return ["ip", "netns", "exec", self.name] + list(argv)

    def run(self, *argv, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(self.exec_argv(argv), capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {self.name}: {r.stderr.strip()}")
        return r

    def veth(self, a: str = "veth0", b: str = "veth1", *, mtu: int | None = None,
             offloads: bool = True, peer: "Netns | None" = None,
             queues: int | None = None) -> tuple[str, str]:
        """A veth pair ``a`` <-> ``b``, both up; ``b`` in namespace ``peer`` if given.
        ``offloads=False`` turns TSO/GSO/checksum offload off on both (then locally sent TCP
        crosses in MTU-sized frames).  ``queues``: Rx and Tx queues of each end (the
        kernel's default otherwise, which may be one per CPU)."""
        extra = ["netns", peer.name] if peer is not None else []
        nq = [] if queues is None else ["numtxqueues", str(queues), "numrxqueues", str(queues)]
        self.run("ip", "link", "add", a, *nq, "type", "veth", "peer", "name", b, *nq, *extra)
        for owner, x in ((self, a), (peer or self, b)):
            if mtu is not None:
                owner.run("ip", "link", "set", x, "mtu", str(mtu))
            if not offloads:
                owner.run("ethtool", "-K", x, "tso", "off", "gso", "off", "tx", "off")
            owner.run("ip", "link", "set", x, "up")
        for owner, x in ((self, a), (peer or self, b)):
            owner.wait_running(x)
        return a, b

    def wait_running(self, ifname: str, timeout: float = 5.0) -> None:
        """Wait until the interface has carrier (the kernel sets it a moment after `up`,
        from its link-watch work; frames sent before are dropped)."""
        end = time.monotonic() + timeout
        while "LOWER_UP" not in self.link(ifname)["flags"]:
            if time.monotonic() > end:
                raise RuntimeError(f"{ifname} in {self.name} has no carrier")
            time.sleep(0.01)

    def link(self, ifname: str) -> dict:
        """``ip -d -j link show`` of one interface (``promiscuity``, ``mtu``, ``flags``...)."""
        return json.loads(self.run("ip", "-d", "-j", "link", "show", "dev", ifname).stdout)[0]

    def set_link(self, ifname: str, up: bool) -> None:
        self.run("ip", "link", "set", ifname, "up" if up else "down")
        if up:
            self.wait_running(ifname)

    # -- this thread inside ------------------------------------------------------------------
    @contextlib.contextmanager
    def entered(self):
        """Run the body with this thread in the namespace (sockets made there stay in it)."""
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
            try:
                _setns(fd)
            finally:
                os.close(fd)
            try:
                yield self
            finally:
                _setns(back)
        finally:
            os.close(back)
