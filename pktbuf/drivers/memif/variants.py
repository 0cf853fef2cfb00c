"""memif's general and zero-copy burst paths, compiled on first use and called through their
address.

A memif queue runs one copy loop for good (chosen at connect from the buffer sizes,
:mod:`.datapath`), so a process compiles only the loops its queues run:

================ ======================================== ==========================
path             when                                     how the burst calls it
================ ======================================== ==========================
one-to-one,      copy mode, by the size relation          by name (compiled with it)
split
general          copy mode: a fast loop's ``FALLBACK``,   through ``cfg[Q_FN_GENERAL]``
                 ``force_general``, every copy queue
zero-copy        a zero-copy client                       through ``cfg[Q_FN_PATH]``
================ ======================================== ==========================

Called by name, a loop is compiled into the burst -- and linked and optimised again into
every loop that calls the burst (the forwarder's, the demo's traffic loop, a stage's) -- even
where no queue ever runs it.  Through its address a loop is compiled once, in its own cache
entry, when a device that needs it is created (:func:`burst_address`, called by the facade),
or ahead of time by ``pktbuf compile``: the general loops, which every copy queue may fall
back to, by every target that compiles the bursts, each in a unit of its own beside them.
The fast loops, one-to-one and split, stay calls by name, inlined by LLVM into the burst:
through an address the split loops measured slower in interleaved runs.

The addresses are this process's (the queue block is private memory) and are written into a
queue's ``cfg`` at connect with the rest of its configuration.  A burst that finds no address
where its path needs one takes the queue down (``V_NO_PATH``) and moves nothing.  One
indirect call per burst, not per packet.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..._jit import kernel
from ...block import BlockType
from ...rawmem import addr_view
from .queue import queue_fail
from .rx_copy import rx_copy_general
from .tx_copy import tx_copy_general
from .validate import V_NO_PATH
from .zerocopy import zc_rx, zc_tx

__all__ = ["burst_address", "queue_paths", "via_address", "BURST_PATHS"]


@intrinsic
def _call_at(typingctx, addr, dom, q, lcore, arr, n):
    """In compiled code: ``path(dom, q, lcore, arr's data address, n)`` for the path whose C
    wrapper is at ``addr`` (an ``int64 (domain, memif_queue, int64, int64, int64)`` kernel)."""
    if not (isinstance(addr, types.Integer) and isinstance(dom, BlockType)
            and dom.kind == "domain" and isinstance(q, BlockType) and q.kind == "memif_queue"
            and isinstance(lcore, types.Integer) and isinstance(arr, types.Array)
            and arr.ndim == 1 and arr.dtype == types.int32 and isinstance(n, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        a, dv, qv, lv, av, nv = args
        i64 = ir.IntType(64)
        lv = context.cast(builder, lv, sig.args[3], types.int64)
        nv = context.cast(builder, nv, sig.args[5], types.int64)
        data = cgutils.create_struct_proxy(sig.args[4])(context, builder, value=av).data
        fnty = ir.FunctionType(i64, [ir.IntType(8).as_pointer(), ir.IntType(8).as_pointer(),
                                     i64, i64, i64])
        fn = builder.inttoptr(context.cast(builder, a, sig.args[0], types.int64),
                              fnty.as_pointer())
        return builder.call(fn, [dv, qv, lv, builder.ptrtoint(data, i64), nv])

    return types.int64(addr, dom, q, lcore, arr, n), codegen


@kernel(inline="always")
def via_address(addr, dom, q, lcore, arr, n):
    """Run the burst path at ``addr`` over ``arr[:n]`` (``n <= arr.size``, the burst checked);
    no address: the queue goes down (``V_NO_PATH``), nothing moves."""
    if addr == 0:
        return queue_fail(q, V_NO_PATH, 0)
    return _call_at(addr, dom, q, lcore, arr, n)


# -- the paths, each a kernel with a C wrapper: (dom, q, lcore, address of the handles, n): the
# general loops are their own (.rx_copy, .tx_copy), the zero-copy ones wrap theirs ---------------
@kernel(cfunc=True)
def rx_zerocopy(dom, q, lcore, out_addr, n):
    return np.int64(zc_rx(dom, q, lcore, addr_view(out_addr, n, np.int32), n))


@kernel(cfunc=True)
def tx_zerocopy(dom, q, lcore, mbufs_addr, n):
    return np.int64(zc_tx(dom, q, lcore, addr_view(mbufs_addr, n, np.int32), n))


BURST_PATHS = {
    "rx_general": rx_copy_general, "rx_zerocopy": rx_zerocopy,
    "tx_general": tx_copy_general, "tx_zerocopy": tx_zerocopy,
}
"""The paths called through their address, by name (``pktbuf compile`` warms them by name)."""

_ADDR: dict[str, int] = {}      # this process's addresses, by name


def burst_address(name: str) -> int:
    """The address of burst path ``name``'s C wrapper in this process (compiled, or loaded
    from the cache, on the first call): what a device writes into its queues."""
    addr = _ADDR.get(name)
    if addr is None:
        from ..._jit import cfunc_address
        from ...buf.mbuf import layout  # noqa: F401  (the domain block's layout)
        disp = BURST_PATHS[name]
        sig = (BlockType("domain"), BlockType("memif_queue"), types.int64, types.int64,
               types.int64)
        addr = cfunc_address(disp, sig)
        ret = disp.overloads[sig].signature.return_type
        if ret != types.int64:           # the C signature _call_at calls it with
            raise RuntimeError(f"{name} returns {ret}, not int64")
        _ADDR[name] = addr
    return addr


def queue_paths(rx: bool, zero_copy: bool) -> tuple[int, int]:
    """The ``(cfg[Q_FN_GENERAL], cfg[Q_FN_PATH])`` addresses for the Rx (``rx``) or Tx queues
    of a copy-mode or a zero-copy device: the paths they run that the bursts call through an
    address, compiled or loaded now."""
    d = "rx" if rx else "tx"
    if zero_copy:
        return 0, burst_address(f"{d}_zerocopy")
    return burst_address(f"{d}_general"), 0
