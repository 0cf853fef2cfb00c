"""The stage calling convention: what a stage receives, what it writes, what the loop counts.

A stage is an ``@njit`` function (``numba.njit`` or :func:`pktbuf._jit.kernel`) of exactly
seven positional parameters, called once per received burst::

    def my_stage(state, dom, rx_port, pkts, n, dest, cnt):
        ...

* ``state``  -- what the user passed as ``state=`` (an array, a tuple of arrays, a pktbuf
  table's ``.block``, a number, None): owned by the user, read and written as they like;
* ``dom``    -- the buffer domain block (``dom.mb[h]`` is packet ``h``'s descriptor);
* ``rx_port``-- the port the burst came from (int64); the queue is the stream's;
* ``pkts``   -- int32 handles ``pkts[:n]``, read-only for the stage (the loop owns them);
* ``dest``   -- int32 ``dest[:n]``, prefilled with the stream's default Tx port; the stage
  writes, per packet, a Tx port id (>= 0) or a drop: :func:`stage_drop` ``(reason)``, i.e.
  ``-1 - reason``;
* ``cnt``    -- int64 ``cnt[:k]``, the stage's own counters (``k`` = ``len(counters)`` of its
  :class:`~pktbuf.apps.stage.api.Stage`), added to by the stage, reported by the loop's owner.

It returns nothing.  It must not allocate (the loop runs without Numba's runtime, as every
pktbuf kernel does), and must not raise.  A stage may call other jitted functions, stages
included: composition is ordinary compiled calls; :meth:`Stage.chain` generates the calls for
a list of stages, each given its own state and its own slice of the counters, in order, over
the whole burst (a later stage sees the ``dest`` the earlier ones wrote; by convention it
leaves dropped packets dropped).

The loop then frees the dropped packets and counts them per reason (``drops[reason]``; a
negative ``dest`` past the last declared reason, or a port id past the port table, counts in
the last slot, :data:`DROP_INVALID`), and queues the rest in per-port Tx buffers, sent a
burst at a time and drained before the loop returns (:mod:`pktbuf.apps.stage.loop`), each
port's packets in their received order.
"""
from __future__ import annotations

from ..._jit import kernel

# per-port counters of the loop, cnt[port, :] -- the same words as pktbuf fwd's loop
F_RX = 0            # packets received
F_TX = 1            # packets a Tx queue took
F_TX_DROP = 2       # packets a Tx queue did not take (freed)
F_RX_BYTES = 3
F_TX_BYTES = 4
F_BUSY_CYCLES = 5   # record_cycles: TSC cycles of the iterations that received packets
F_STAGE_DROP = 6    # packets the stage dropped, counted on their Rx port
F_WORDS = 8

# what the loop returns (as pktbuf fwd's)
R_DEADLINE = 0
R_ALL_EOF = 1
R_PORT_ERROR = 2

DROP_INVALID = -1   # index (from the end) of the drops slot for undeclared reasons / bad ports


@kernel(inline="always")
def stage_drop(reason):
    """The ``dest`` value that drops a packet for ``reason`` (0, 1, ...)."""
    return -1 - reason


@kernel
def noop_stage(state, dom, rx_port, pkts, n, dest, cnt):
    """The do-nothing stage: every packet to its stream's default Tx port (``--forward-mode
    io``)."""
    return
