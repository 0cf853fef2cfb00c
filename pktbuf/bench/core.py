"""The core engine's measurements: the same cases as DPDK's reference benchmark.

Setup as DPDK's (``shared/tools/dpdk-reference``): pools of 8192 mbufs, cache 256, data room
2176, no hugepages.  Every loop runs inside Numba; what is timed is bracketed by fenced TSC
reads, and intervals longer than ``drop_ns`` (a preemption on this shared 2-core machine) are
dropped, as the reference does.  Each case returns ns per unit (mbuf, chain or object).
"""
from __future__ import annotations

import os

import numpy as np
from numba import njit

from ..kernels import (mbuf_refcnt_update, mempool_get_bulk, mempool_put_bulk, pktmbuf_alloc,
                       pktmbuf_alloc_bulk, pktmbuf_chain, pktmbuf_free, pktmbuf_free_bulk,
                       pktmbuf_free_bulk_staged)
from .tsc import tsc_begin, tsc_end, tsc_hz

POOL_N = 8192
CACHE = 256
DATAROOM = 2176
BURSTS = (1, 32, 64, 128, 256)
# PKTBUF_BENCH_QUICK=1 (CI: "does every benchmark still run?"): one short repetition each
QUICK = os.environ.get("PKTBUF_BENCH_QUICK", "") not in ("", "0")
LAYOUTS = ("flat", "grouped", "alternating", "shared", "chain2")
_LAYOUT = {name: i for i, name in enumerate(LAYOUTS)}


@njit(cache=True, nogil=True)
def roundtrip(dom, pid, lcore, n, iters, staged):
    """alloc_bulk + free_bulk of n, whole loop timed: TSC cycles per mbuf."""
    m = np.empty(max(n, 1), np.int32)
    t0 = tsc_begin()
    for _ in range(iters):
        if pktmbuf_alloc_bulk(dom, pid, lcore, m, n) != 0:
            return -1.0
        if staged:
            pktmbuf_free_bulk_staged(dom, lcore, m, n)
        else:
            pktmbuf_free_bulk(dom, lcore, m, n)
    t1 = tsc_end()
    return (t1 - t0) / (iters * n)


@njit(cache=True, nogil=True)
def free_only(dom, pid_a, pid_b, lcore, n, iters, layout, staged, drop_cyc):
    """free_bulk alone (the allocation is not timed): cycles per mbuf (per chain for chain2)."""
    m = np.empty(2 * n + 2, np.int32)
    tmp = np.empty(2 * n + 2, np.int32)
    acc = np.uint64(0)
    kept = 0
    h = n // 2
    for _ in range(iters):
        shared = -1
        if layout == 0:          # flat, one pool
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, m, n) != 0:
                return -1.0
        elif layout == 1:        # two pools grouped: AA..BB..
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, m, h) != 0:
                return -1.0
            if pktmbuf_alloc_bulk(dom, pid_b, lcore, tmp, n - h) != 0:
                return -1.0
            for j in range(n - h):
                m[h + j] = tmp[j]
        elif layout == 2:        # two pools alternating: ABAB..
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, tmp, h) != 0:
                return -1.0
            if pktmbuf_alloc_bulk(dom, pid_b, lcore, tmp[h:], n - h) != 0:
                return -1.0
            for j in range(h):
                m[2 * j] = tmp[j]
                m[2 * j + 1] = tmp[h + j]
            for j in range(2 * h, n):
                m[j] = tmp[h + j - h]
        elif layout == 3:        # one shared mbuf (refcnt 2) in the middle of each burst
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, m, n) != 0:
                return -1.0
            shared = m[h]
            mbuf_refcnt_update(dom, shared, 1)
        else:                    # n 2-segment chains
            if pktmbuf_alloc_bulk(dom, pid_a, lcore, tmp, 2 * n) != 0:
                return -1.0
            for j in range(n):
                pktmbuf_chain(dom, tmp[2 * j], tmp[2 * j + 1])
                m[j] = tmp[2 * j]
        # (no helper function here: a Numba function with its runtime on takes a reference
        # on every array of the DomainState it is passed -- ~100 ns a call)
        if staged:
            t0 = tsc_begin()
            pktmbuf_free_bulk_staged(dom, lcore, m, n)
            t1 = tsc_end()
        else:
            t0 = tsc_begin()
            pktmbuf_free_bulk(dom, lcore, m, n)
            t1 = tsc_end()
        if shared >= 0:
            pktmbuf_free(dom, lcore, shared)      # untimed: the last reference
        d = t1 - t0
        if d < drop_cyc:
            acc += d
            kept += 1
    return acc / (max(kept, 1) * n)


@njit(cache=True, nogil=True)
def single(dom, pid, lcore, n, iters):
    """pktmbuf_alloc x n then pktmbuf_free x n, one at a time: cycles per mbuf."""
    m = np.empty(max(n, 1), np.int32)
    t0 = tsc_begin()
    for _ in range(iters):
        for j in range(n):
            h = pktmbuf_alloc(dom, pid, lcore)
            if h < 0:
                return -1.0
            m[j] = h
        for j in range(n):
            pktmbuf_free(dom, lcore, m[j])
    t1 = tsc_end()
    return (t1 - t0) / (iters * n)


@njit(cache=True, nogil=True)
def raw_mempool(dom, pid, lcore, n, iters):
    """mempool_get_bulk + mempool_put_bulk: cycles per object."""
    o = np.empty(max(n, 1), np.int32)
    t0 = tsc_begin()
    for _ in range(iters):
        if mempool_get_bulk(dom, pid, lcore, o, n) != 0:
            return -1.0
        mempool_put_bulk(dom, pid, lcore, o, n)
    t1 = tsc_end()
    return (t1 - t0) / (iters * n)


class CoreBench:
    """Pools and warm kernels for the core cases; ``run(case, burst, variant)`` -> ns per unit."""

    def __init__(self, domain=None):
        from ..api.pools import PktmbufPool
        self.a = PktmbufPool(POOL_N, CACHE, DATAROOM, domain=domain, name="bench_a")
        self.b = PktmbufPool(POOL_N, CACHE, DATAROOM, domain=self.a.domain, name="bench_b")
        self.raw = PktmbufPool(POOL_N, CACHE, DATAROOM, domain=self.a.domain, name="bench_raw")
        self.dom = self.a.domain.state
        self.ns_per_cyc = 1e9 / tsc_hz()
        self.drop_cyc = np.uint64(20e-6 * tsc_hz())   # a 20 us burst was preempted
        self.lcore = 0
        for n in (1, 32):          # compile (or load) every loop before anything is timed
            for staged in (False, True):
                roundtrip(self.dom, self.a.id, self.lcore, n, 1, staged)
                for lay in range(len(LAYOUTS)):
                    free_only(self.dom, self.a.id, self.b.id, self.lcore, n, 1, lay, staged,
                              self.drop_cyc)
            single(self.dom, self.a.id, self.lcore, n, 1)
            raw_mempool(self.dom, self.raw.id, self.lcore, n, 1)

    def run(self, case: str, burst: int, staged: bool = False, units: int = 400_000) -> float:
        """One measurement of about ``units`` mbufs: ns per unit."""
        if QUICK:
            units = min(units, 20_000)
        iters = max(4, units // max(burst, 1))
        if case == "roundtrip":
            cyc = roundtrip(self.dom, self.a.id, self.lcore, burst, iters, staged)
        elif case in _LAYOUT:
            if case in ("grouped", "alternating") and burst < 2:
                raise ValueError("two pools need a burst of at least 2")
            cyc = free_only(self.dom, self.a.id, self.b.id, self.lcore, burst,
                            max(4, iters // 4), _LAYOUT[case], staged, self.drop_cyc)
        elif case == "single":
            cyc = single(self.dom, self.a.id, self.lcore, burst, iters)
        elif case == "raw":
            cyc = raw_mempool(self.dom, self.raw.id, self.lcore, burst, iters)
        else:
            raise ValueError(f"unknown case {case!r}")
        if cyc < 0:
            raise RuntimeError(f"{case}: pool ran dry")
        return cyc * self.ns_per_cyc

    def median(self, case, burst, staged=False, reps=7, units=400_000):
        if QUICK:
            reps = 1
        vals = sorted(self.run(case, burst, staged, units) for _ in range(reps))
        return vals[len(vals) // 2]

    def close(self):
        for p in (self.a, self.b, self.raw):
            p.close(force=True)
