"""Shared pieces of the hdr / ptype / cksum tests: a pool, packets cut into segments, and
DPDK itself as an oracle (pktbuf/bench/ptype_ref.c over a pipe; skipped without DPDK, failed
under CI)."""
from __future__ import annotations

import pytest

import pktbuf


@pytest.fixture(scope="module")
def pool():
    d = pktbuf.Domain(max_objects=1 << 14, max_ring_slots=1 << 15)
    p = pktbuf.PktmbufPool(2048, 0, domain=d)
    yield p
    p.close(force=True)


def packet(pool, frame: bytes, split=None, junk: bytes = b""):
    """An Mbuf holding ``frame`` in segments of the lengths ``split`` (None: one segment; the
    lengths must sum to len(frame)).  ``junk`` is written after each segment's data and
    trimmed off again: bytes a reader must never see."""
    lens = [len(frame)] if split is None else list(split)
    assert sum(lens) == len(frame)
    head, done = None, 0
    for n in lens:
        m = pool.alloc()
        if n or junk:
            m.append_bytes(frame[done:done + n] + junk)
            if junk:
                m.trim(len(junk))
        done += n
        if head is None:
            head = m
        else:
            head.chain(m)
    return head


class Oracle:
    """DPDK's rte_net_get_ptype / rte_raw_cksum_mbuf / rte_get_ptype_name on real mbufs."""

    def __init__(self, ref):
        self.ref = ref

    @staticmethod
    def _split(split):
        return "-" if split is None or len(split) <= 1 else ",".join(map(str, split[:-1]))

    def ptype(self, frame: bytes, layers: int = 0x0FFFFFFF, split=None):
        r = self.ref.command(f"ptype {layers:#x} {self._split(split)} {frame.hex()}", "ptype")
        return r["ptype"], r["lens"]

    def rawck(self, frame: bytes, off: int, n: int, split=None):
        r = self.ref.command(f"rawck {off} {n} {self._split(split)} {frame.hex()}", "rawck")
        return r["rc"], r["cksum"]

    def name(self, ptype: int) -> str:
        return self.ref.command(f"name {ptype:#x}", "name")["name"]


@pytest.fixture(scope="session")
def oracle():
    from tests.bench.conftest import dpdk_or_skip
    from pktbuf.bench import dpdk_ref as D
    from pktbuf.bench.net_ptype import SOURCE
    dpdk_or_skip()
    ref = D.DpdkRef(D.build(SOURCE), lcores=1)
    yield Oracle(ref)
    ref.close()
