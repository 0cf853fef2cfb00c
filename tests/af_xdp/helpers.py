"""Helpers of the AF_XDP tests: open a port in the namespace, what `ip link` says is attached."""
from __future__ import annotations

import time

from pktbuf.api.af_xdp import AfXdpPort


def open_port(ns, pool, iface="veth0", **kw) -> AfXdpPort:
    with ns.entered():
        return AfXdpPort(pool, iface, **kw)


def xdp_attached(ns, iface="veth0"):
    """The XDP program attached to ``iface`` as ``ip -d -j link`` reports it (its ``xdp``
    object: ``mode``, ``prog``...), or None."""
    return ns.link(iface).get("xdp")


def wait_detached(ns, iface="veth0", timeout=5.0) -> bool:
    end = time.monotonic() + timeout
    while xdp_attached(ns, iface) is not None:
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def audit_whole(pool) -> None:
    """Every mbuf of the pool is back in it, each once."""
    assert pool.audit() == pool.n
    assert pool.in_use_count == 0
