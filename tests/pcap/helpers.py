"""Shared helpers of the pcap tests: frames with known bytes, mbufs from frames, reading a
port to its end."""
from __future__ import annotations

import os

import numpy as np

ETHERTYPE = b"\x88\xb5"        # IEEE local experimental: dissectors leave the payload alone


def frames(sizes, seed=1):
    """Ethernet frames of the given sizes (a header when there is room for one)."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        b = bytearray(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        if n >= 14:
            b[0:6] = b"\x02\x00\x00\x00\x00\x01"
            b[6:12] = b"\x02\x00\x00\x00\x00\x02"
            b[12:14] = ETHERTYPE
        out.append(bytes(b))
    return out


def make_packet(pool, payload: bytes, seg: int | None = None) -> int:
    """An mbuf (chained when ``seg`` is smaller than the payload) holding ``payload``."""
    room = int(pool.data_room) - int(pool.headroom)
    seg = min(seg or room, room)
    head = pool.alloc()
    head.append_bytes(payload[:seg])
    for off in range(seg, len(payload), seg):
        m = pool.alloc()
        m.append_bytes(payload[off:off + seg])
        head.chain(m)
    return head.handle


def read_port(port, pool, qid=0, burst=32, with_ts=False, limit=None):
    """Every packet of Rx queue ``qid`` until its end: bytes (and timestamps); freed."""
    out = []
    while not port.rx_eof(qid) and (limit is None or len(out) < limit):
        hs = port.rx_burst(burst, qid)
        for h in hs:
            m = pool.mbuf(int(h))
            out.append((m.tobytes(), port.rx_timestamp(h)) if with_ts else m.tobytes())
        pool.free_bulk(hs)
    return out


def require_tool(name):
    import shutil
    import pytest
    if shutil.which(name) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (apt-get install {name})", pytrace=False)
        pytest.skip(f"{name} is not installed")
