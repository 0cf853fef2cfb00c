"""A hostile peer process scribbles over rings and descriptors while traffic runs.

pktbuf must never crash (the test process would die), never touch memory outside the peer's
region (peer regions sit between guard pages; the fuzz tests in test_validate.py check exact
bytes), disconnect with a reason each time, accept the peer again, and end with every mbuf back
in its pool.
"""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import pktbuf
from pktbuf import Memif
from pktbuf.drivers.memif import proto as P
from pktbuf.drivers.memif import validate as V

from .helpers import sock_name

EVIL = os.path.join(os.path.dirname(__file__), "evil_peer.py")
SECONDS = 6.0
# A hostile server closes its listening socket when its time is up, a moment before its process
# exits: our client's reconnect attempt in between is refused ("connect failed: ...").
REASONS = set(V.REASONS.values()) | {P.R_COOKIE, P.R_EOF, P.R_UNEXPECTED, "connect failed: "}


def _reason_ok(r):
    return r is None or any(r.startswith(x) for x in REASONS)


def _drive(m, pool, proc, seconds):
    """Traffic both ways until the evil peer exits; returns (reasons seen, rx packets)."""
    reasons = set()
    rx = 0
    out = np.empty(64, np.int32)
    end = time.monotonic() + seconds + 20
    last = None
    while proc.poll() is None and time.monotonic() < end:
        if m.state == "connected":
            try:
                hs = pool.alloc_bulk(8)
            except pktbuf.PoolExhausted:
                hs = np.empty(0, np.int32)
            for h in hs:
                pool.domain.state.mb[h]["data_len"] = 60
                pool.domain.state.mb[h]["pkt_len"] = 60
            k = m.tx_burst(hs) if hs.size else 0
            if k < hs.size:
                pool.free_bulk(hs[k:])
            got = m.rx_burst(64, out=out)
            rx += got.size
            if got.size:
                pool.free_bulk(got)
        r = m.disconnect_reason
        if r != last and r:
            reasons.add(r)
        last = r
        time.sleep(0.0002)
    return reasons, rx


@pytest.mark.parametrize("evil_role", ["client", "server"])
def test_hostile_peer_never_crashes_us(warm, evil_role):
    pool = pktbuf.PktmbufPool(4096, 64, name="hostile")
    name = sock_name("evil")
    seed = 1234
    if evil_role == "client":
        m = Memif.server(name, pool=pool, ring_size_log2=6)
        proc = subprocess.Popen([sys.executable, EVIL, "client", name, str(SECONDS), str(seed)],
                                stdout=subprocess.PIPE, text=True)
    else:
        proc = subprocess.Popen([sys.executable, EVIL, "server", name, str(SECONDS), str(seed)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "LISTENING"
        m = Memif.client(name, pool=pool, ring_size_log2=6, reconnect=True)
    try:
        reasons, rx = _drive(m, pool, proc, SECONDS)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        m.close()
    stats = dict(kv.split("=") for kv in out.split())
    assert proc.returncode == 0
    assert int(stats["scribbles"]) > 0 and int(stats["connects"]) >= 2, stats
    assert m.connect_count >= 2
    validation = [r for r in reasons if any(r.startswith(x) for x in V.REASONS.values())
                  or r == P.R_COOKIE]
    print(evil_role, stats, m.connect_count, rx, sorted(reasons))
    assert validation, reasons        # at least one drop was ours, with a reason
    assert all(_reason_ok(r) for r in reasons), reasons
    from pktbuf.buf.mempool.kernels import mempool_cache_flush
    from pktbuf.lcore import facade_lcore
    mempool_cache_flush(pool.domain.state, pool.id, facade_lcore())
    assert pool.audit() == pool.n     # every mbuf back, none twice
    pool.close()
