"""Helpers of the AF_XDP tests: open a port in the namespace, what `ip link` says is attached."""
from __future__ import annotations

import time

from pktbuf.drivers.af_xdp.api.port import AfXdpPort


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


def need_cpus(n: int = 2) -> None:
    """Tests that steer frames to an Rx queue by the sending CPU need ``n`` CPUs: a skip
    outside CI, a failure in CI (CI must run them)."""
    import os

    import pytest
    have = len(os.sched_getaffinity(0))
    if have < n:
        if os.environ.get("CI"):
            pytest.fail(f"needs {n} CPUs (has {have})", pytrace=False)
        pytest.skip(f"needs {n} CPUs")


def send_on_queues(ns, iface, by_queue: dict) -> None:
    """Send ``by_queue[q]`` (lists of frames) out of ``iface`` (a veth end in ``ns``) on its Tx
    queue ``q``, so that they arrive on Rx queue ``q`` of the peer: a packet socket with
    ``PACKET_QDISC_BYPASS`` picks the Tx queue ``cpu % real_num_tx_queues`` of the CPU it sends
    from (no XPS is set on a fresh veth), so each list goes from a thread pinned to CPU ``q``
    (``iface`` must have as many Tx queues as CPUs used, at most the CPUs there are)."""
    import os
    import socket
    import threading
    with ns.entered():
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        s.setsockopt(263, 20, 1)                      # SOL_PACKET, PACKET_QDISC_BYPASS
        s.bind((iface, 0))
        errors = []

        def send_from(cpu, fs):
            try:
                os.sched_setaffinity(0, {cpu})
                for f in fs:
                    s.send(f)
            except BaseException as e:              # reported by the caller
                errors.append(e)

        for q, fs in by_queue.items():
            t = threading.Thread(target=send_from, args=(q, fs))
            t.start()
            t.join()
        if errors:
            raise errors[0]
    finally:
        s.close()
