"""Back-off for polling loops: what a kernel does when it found no work.

On a 2-core machine two busy-polling threads leave nothing for anyone else, and a third makes
all of them crawl (a spinning thread burns the time slice the producer it waits for needs).
``idle_backoff(n)`` escalates with the number of consecutive empty polls: a few ``pause``
spins, then ``sched_yield()``, then sleeps of growing length up to ``max_us``.  Callable from
``@njit`` code; libc's ``sched_yield``/``usleep`` are called by symbol, so callers stay
cacheable (a ctypes function pointer would make every caller uncacheable).
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
def usleep(typingctx, us):
    """libc ``usleep(us)``: sleep for ``us`` microseconds."""
    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.uint32)
        return builder.call(_declare(builder, "usleep", 1), [v])

    return types.int32(us), codegen


SPIN_POLLS = 64      # empty polls answered with a pause instruction
YIELD_POLLS = 256    # then with sched_yield()


@kernel
def idle_backoff(empty_polls, max_us):
    """Wait a little after ``empty_polls`` consecutive polls found nothing.

    0..63: ``pause``; 64..255: ``sched_yield()``; then sleep 1, 2, 4 ... ``max_us`` microseconds.
    Reset your counter to 0 whenever a poll finds work.
    """
    if empty_polls < SPIN_POLLS:
        cpu_pause()
    elif empty_polls < YIELD_POLLS:
        sched_yield()
    else:
        shift = (empty_polls - YIELD_POLLS) // 16
        us = 1 << min(shift, 20)
        usleep(min(us, max_us))
