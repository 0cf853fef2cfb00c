"""Back-off for polling loops: what a kernel does when it found no work.

On a 2-core machine two busy-polling threads leave nothing for anyone else, and a third makes
all of them crawl (a spinning thread burns the time slice the producer it waits for needs).
``idle_backoff(n, max_us)`` escalates with ``n``, the number of consecutive empty polls the
caller counts (reset it to 0 when a poll finds work): a few ``pause`` spins, then
``sched_yield()``, then sleeps of growing length up to ``max_us``.  An idle loop then costs
about a thousand short wake-ups per second (``max_us`` = 1 ms) instead of a core.

This is the one back-off of pktbuf: memif's ``memif_rx_wait`` falls back to it in polling
mode, and the apps' and benchmarks' loops call it directly::

    idle = 0
    while running:
        if memif_rx_burst(dom, q, lcore, pkts, 32) == 0:
            idle_backoff(idle, IDLE_SLEEP_MAX_US)
            idle += 1
            continue
        idle = 0
        ...

:func:`now_ns` is the clock such loops take their deadlines from (``CLOCK_MONOTONIC``, the
clock of Python's ``time.monotonic_ns()``, so a deadline can be set in Python).

Callable from ``@njit`` code; libc's ``sched_yield``/``usleep``/``clock_gettime`` are called by
symbol, so callers stay cacheable (a ctypes function pointer would make every caller
uncacheable).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._jit import kernel
from .atomics import cpu_pause


def _declare(builder, name, nargs):
    fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32)] * nargs)
    return cgutils.get_or_insert_function(builder.module, fnty, name)


@intrinsic
def sched_yield(typingctx):
    """libc ``sched_yield()``: give the CPU to another runnable thread (called by symbol, so
    callers stay cacheable; a ctypes function pointer would make them uncacheable)."""
    def codegen(context, builder, sig, args):
        return builder.call(_declare(builder, "sched_yield", 0), [])

    return types.int32(), codegen


@intrinsic
def _clock_monotonic_ns(typingctx):
    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        ts = cgutils.alloca_once(builder, i64, size=2)       # struct timespec
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), ir.IntType(8).as_pointer()])
        f = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        builder.call(f, [ir.Constant(ir.IntType(32), 1),                 # CLOCK_MONOTONIC
                         builder.bitcast(ts, ir.IntType(8).as_pointer())])
        sec = builder.load(ts)
        nsec = builder.load(builder.gep(ts, [ir.Constant(ir.IntType(32), 1)]))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)

    return types.int64(), codegen


@kernel
def now_ns():
    """CLOCK_MONOTONIC in nanoseconds (same clock as Python's ``time.monotonic_ns()``)."""
    return _clock_monotonic_ns()


@intrinsic
def usleep(typingctx, us):
    """libc ``usleep(us)``: sleep for ``us`` microseconds."""
    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.uint32)
        return builder.call(_declare(builder, "usleep", 1), [v])

    return types.int32(us), codegen


SPIN_POLLS = 64          # empty polls answered with a pause instruction
YIELD_POLLS = 256        # then with sched_yield()
SLEEP_DOUBLING = 16      # then sleeps of 1 us, doubling every 16 empty polls, up to max_us
IDLE_SLEEP_MAX_US = 1000  # the cap pktbuf's own polling loops use
BUSY_POLL = -1           # a max_us that never yields or sleeps: pause only, as DPDK's lcores poll

IDLE_PAUSE = 0           # idle_action: one pause instruction
IDLE_YIELD = -1          # idle_action: sched_yield()


@kernel(inline="always")
def idle_action(empty_polls, max_us):
    """What :func:`idle_backoff` does after ``empty_polls`` consecutive empty polls:
    ``IDLE_PAUSE``, ``IDLE_YIELD``, or a sleep of that many microseconds (1 ..
    ``max(max_us, 1)``).  ``max_us < 0`` (:data:`BUSY_POLL`): always ``IDLE_PAUSE``."""
    if empty_polls < SPIN_POLLS or max_us < 0:
        return IDLE_PAUSE
    if empty_polls < YIELD_POLLS:
        return IDLE_YIELD
    shift = min((empty_polls - YIELD_POLLS) // SLEEP_DOUBLING, 20)
    return max(1, min(1 << shift, max_us))


@kernel
def idle_backoff(empty_polls, max_us):
    """Wait a little after ``empty_polls`` consecutive polls found nothing.

    0..63: ``pause``; 64..255: ``sched_yield()``; then sleep 1, 2, 4 ... ``max_us`` microseconds
    (:func:`idle_action`).  Reset your counter to 0 whenever a poll finds work.  With
    ``max_us`` = :data:`BUSY_POLL` it only ever pauses: the core stays busy, as a DPDK lcore's.
    """
    act = idle_action(empty_polls, max_us)
    if act == IDLE_PAUSE:
        cpu_pause()
    elif act == IDLE_YIELD:
        sched_yield()
    else:
        usleep(act)
