"""The pcapng parser, compiled on first use and called through its address.

:func:`~pktbuf.drivers.pcap.parse.parse_pcapng` is as large as the rest of the Rx burst
together, and a capture in classic pcap format never runs it.  So :func:`pcap_rx_burst
<pktbuf.drivers.pcap.rx.pcap_rx_burst>` does not call it by name -- that would compile it, and
link and optimise it again, into every burst (and forwarding loop) compiled -- but through the
address in its queue's ``cfg[C_PARSE]``: the facade compiles the parser (or loads it from the
cache) when it opens a pcapng file and stores the address of its C wrapper there
(:func:`pcapng_parser`).  A queue reading a classic pcap file, or a cold ``pktbuf fwd`` over
one, compiles none of it.

The address is the facade's own, of this process (the queue block is private memory), set
before the queue's format says pcapng; a queue without one delivers nothing.  One indirect
call per burst, not per packet.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ...block import BlockType

_ADDR = 0          # pcapng_parser(), once per process


@intrinsic
def call_parser(typingctx, addr, q, n, cap):
    """In compiled code: ``parser(q, n, cap)`` for the parser whose C wrapper is at ``addr``
    (an ``int64 (pcap_rxq, int64, int64)`` kernel: :func:`pcapng_parser`)."""
    if not (isinstance(addr, types.Integer) and isinstance(q, BlockType)
            and q.kind == "pcap_rxq" and isinstance(n, types.Integer)
            and isinstance(cap, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        a, qv, nv, cv = args
        i64 = ir.IntType(64)
        nv = context.cast(builder, nv, sig.args[2], types.int64)
        cv = context.cast(builder, cv, sig.args[3], types.int64)
        fnty = ir.FunctionType(i64, [ir.IntType(8).as_pointer(), i64, i64])
        fn = builder.inttoptr(context.cast(builder, a, sig.args[0], types.int64),
                              fnty.as_pointer())
        return builder.call(fn, [qv, nv, cv])

    return types.int64(addr, q, n, cap), codegen


def pcapng_parser() -> int:
    """The address of the pcapng parser's C wrapper in this process (compiled, or loaded from
    the cache, on the first call)."""
    global _ADDR
    if _ADDR == 0:
        from ..._jit import cfunc_address
        from .parse import parse_pcapng
        sig = (BlockType("pcap_rxq"), types.int64, types.int64)
        addr = cfunc_address(parse_pcapng, sig)
        ret = parse_pcapng.overloads[sig].signature.return_type
        if ret != types.int64:           # the C signature call_parser calls it with
            raise RuntimeError(f"parse_pcapng returns {ret}, not int64")
        _ADDR = addr
    return _ADDR
