"""Fenced time-stamp-counter reads for in-JIT timing (``lfence; rdtsc`` ... ``rdtscp; lfence``).

``tsc_hz()`` calibrates the counter against ``time.perf_counter`` once per process.  On x86-64
the TSC ticks at a constant rate whatever the core clock does, so cycles convert to wall time.
``pair_overhead_cycles()`` is what an empty fenced pair costs; loops that time short regions one
by one subtract it from every interval they keep.  The DPDK reference program
(``dpdk_ref.c``) reads the counter with the same instructions and reduces the same way.
"""
from __future__ import annotations

import time

import numpy as np

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


def _fence(builder):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                        "llvm.x86.sse2.lfence")
    builder.call(fn, [])


@intrinsic
def tsc_begin(typingctx):
    """``lfence; rdtsc``: earlier instructions finish before the counter is read."""
    def codegen(context, builder, sig, args):
        _fence(builder)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.x86.rdtsc")
        return builder.call(fn, [])

    return types.uint64(), codegen


@intrinsic
def tsc_end(typingctx):
    """``rdtscp; lfence``: the measured code finishes before the read; nothing starts early."""
    def codegen(context, builder, sig, args):
        i32p = ir.IntType(32).as_pointer()
        fn = cgutils.get_or_insert_function(builder.module,
                                            ir.FunctionType(ir.IntType(64), [i32p]),
                                            "llvm.x86.rdtscp")
        aux = cgutils.alloca_once(builder, ir.IntType(32))
        v = builder.call(fn, [aux])
        _fence(builder)
        return v

    return types.uint64(), codegen


@njit(cache=True)
def _read_pair():
    return tsc_begin(), tsc_end()


@njit(cache=True)
def _empty_pairs(out):
    for i in range(out.size):
        t0 = tsc_begin()
        t1 = tsc_end()
        out[i] = t1 - t0


def pair_overhead_cycles(n: int = 10001) -> int:
    """Mean cycles of an empty ``tsc_begin`` / ``tsc_end`` pair.

    ``n`` empty intervals; those longer than 4x their median (an interrupt hit them) are left
    out and the rest averaged -- the mean rather than the median because the counter may
    advance in steps of many cycles, and a sum of many intervals carries the mean.
    """
    d = np.empty(max(int(n), 1), np.uint64)
    _empty_pairs(d)
    lim = 4 * int(np.sort(d)[d.size // 2])
    kept = d[d <= lim]
    return int((int(kept.sum()) + kept.size // 2) // kept.size)


_HZ = None


def tsc_hz() -> float:
    """Counter ticks per second (calibrated over ~50 ms, median of 3)."""
    global _HZ
    if _HZ is None:
        rates = []
        for _ in range(3):
            c0, _x = _read_pair()
            t0 = time.perf_counter()
            time.sleep(0.05)
            c1, _x = _read_pair()
            t1 = time.perf_counter()
            rates.append((int(c1) - int(c0)) / (t1 - t0))
        _HZ = sorted(rates)[1]
    return _HZ
