"""``rx_burst`` / ``tx_burst``: one call for every port type, as ``rte_eth_rx_burst`` is.

::

    n = rx_burst(eth, port, queue, lcore, pkts, 32)   # pkts[:n]: received mbufs, yours
    k = tx_burst(eth, port, queue, lcore, pkts, n)    # pkts[:k] sent (the port's now);
                                                      # pkts[k:n] are still yours

``eth`` is the port table (``ports.state``), ``port``/``queue`` ids, ``lcore`` the caller's
lcore (its mempool cache).  The call reads the port's kind from the table and calls that
driver's kernel (``memif_rx_burst``, ``eth_ring_rx_burst``, ...) with the queue's block: a
switch on a word the CPU predicts perfectly, in place of DPDK's function pointer.  An unknown
port or queue id, or a port being closed, gives 0 (DPDK checks ids only in debug builds).
Each driver's kernel can also be called directly with its queue block (``port.rx_queue(0)``).

**A queue's error state.**  A burst returns a count, never an error: a queue that failed for
good (a capture file that breaks its format, a write that failed) returns 0 from then on, as
it does at the end of its input.  :func:`rx_queue_error` / :func:`tx_queue_error` tell the
two apart -- the driver's code of the error that stopped the queue, 0 while it is sound -- and
:func:`rx_queue_eof` is true for both, so a loop that stops at the end of its input must ask
``rx_queue_error`` before it calls that a normal end (the port's facade, ``port.error()``,
says what happened in words).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .._jit import kernel
from ..drivers.af_packet.layout import AF_PACKET_RXQ, AF_PACKET_TXQ  # noqa: F401
from ..drivers.af_packet.rx import af_packet_rx_burst
from ..drivers.af_packet.tx import af_packet_tx_burst
from ..drivers.af_xdp.layout import AF_XDP_RXQ, AF_XDP_TXQ, AF_XDP_UMEM  # noqa: F401
from ..drivers.af_xdp.rx import af_xdp_rx_burst
from ..drivers.af_xdp.tx import af_xdp_tx_burst
from ..block import BlockType, block_at
from ..drivers.ring.burst import eth_ring_rx_burst, eth_ring_tx_burst
from ..drivers.ring.layout import ETH_RING_QUEUE  # noqa: F401  (block_at needs the layouts known)
from ..buf.mbuf.layout import MBUF_DTYPE  # noqa: F401
from ..drivers.memif.datapath import memif_rx_burst, memif_tx_burst
from ..drivers.memif.queue import MEMIF_QUEUE  # noqa: F401
from ..drivers.pcap.layout import PCAP_RXQ, PCAP_TXQ  # noqa: F401
from ..drivers.pcap.rx import pcap_rx_burst, pcap_rx_eof, pcap_rx_error
from ..drivers.pcap.tx import pcap_tx_burst, pcap_tx_error
from ..drivers.vhost.layout import VHOST_QUEUE  # noqa: F401
from ..drivers.vhost.rx import vhost_rx_burst
from ..drivers.vhost.tx import vhost_tx_burst
from ..drivers.virtio_user.layout import VIRTIO_USER_QUEUE  # noqa: F401
from ..drivers.virtio_user.rx import virtio_user_rx_burst
from ..drivers.virtio_user.tx import virtio_user_tx_burst
from .layout import (H_DOM, K_AF_PACKET, K_AF_XDP, K_MEMIF, K_PCAP, K_RING, K_VHOST,
                     K_VIRTIO_USER, MAX_PORTS, MAX_QUEUES, P_KIND, P_NB_RX, P_NB_TX)

__all__ = ["rx_burst", "tx_burst", "rx_queue_eof", "rx_queue_error", "tx_queue_error",
           "eth_domain"]


@kernel(inline="always")
def eth_domain(eth):
    """The domain block of the table's ports' pools (for the mbuf kernels)."""
    return block_at(eth.hdr[H_DOM], "domain")


@kernel(inline="always")
def _queue(eth, table, port, queue, count_word):
    """(kind, queue block address), kind 0 when the ids do not name an open queue."""
    if port < 0 or port >= MAX_PORTS or queue < 0 or queue >= MAX_QUEUES:
        return 0, 0
    p = eth.port[port]
    if queue >= p[count_word]:
        return 0, 0
    return p[P_KIND], table[port, queue]


@kernel
def rx_burst(eth, port, queue, lcore, pkts, n):
    """Receive up to ``n`` packets from ``port``'s Rx queue ``queue`` into ``pkts[:n]``."""
    kind, addr = _queue(eth, eth.rxq, port, queue, P_NB_RX)
    dom = eth_domain(eth)
    if kind == K_MEMIF:
        return memif_rx_burst(dom, block_at(addr, "memif_queue"), lcore, pkts, n)
    if kind == K_RING:
        return eth_ring_rx_burst(dom, block_at(addr, "eth_ring_queue"), lcore, pkts, n)
    if kind == K_AF_PACKET:
        return af_packet_rx_burst(dom, block_at(addr, "af_packet_rxq"), lcore, pkts, n)
    if kind == K_AF_XDP:
        return af_xdp_rx_burst(dom, block_at(addr, "af_xdp_rxq"), lcore, pkts, n)
    if kind == K_PCAP:
        return pcap_rx_burst(dom, block_at(addr, "pcap_rxq"), lcore, pkts, n)
    if kind == K_VHOST:
        return vhost_rx_burst(dom, block_at(addr, "vhost_queue"), lcore, pkts, n)
    if kind == K_VIRTIO_USER:
        return virtio_user_rx_burst(dom, block_at(addr, "virtio_user_queue"), lcore, pkts, n)
    return 0


@kernel
def tx_burst(eth, port, queue, lcore, pkts, n):
    """Send up to ``n`` packets from ``pkts[:n]`` on ``port``'s Tx queue ``queue``."""
    kind, addr = _queue(eth, eth.txq, port, queue, P_NB_TX)
    dom = eth_domain(eth)
    if kind == K_MEMIF:
        return memif_tx_burst(dom, block_at(addr, "memif_queue"), lcore, pkts, n)
    if kind == K_RING:
        return eth_ring_tx_burst(dom, block_at(addr, "eth_ring_queue"), lcore, pkts, n)
    if kind == K_AF_PACKET:
        return af_packet_tx_burst(dom, block_at(addr, "af_packet_txq"), lcore, pkts, n)
    if kind == K_AF_XDP:
        return af_xdp_tx_burst(dom, block_at(addr, "af_xdp_txq"), lcore, pkts, n)
    if kind == K_PCAP:
        return pcap_tx_burst(dom, block_at(addr, "pcap_txq"), lcore, pkts, n)
    if kind == K_VHOST:
        return vhost_tx_burst(dom, block_at(addr, "vhost_queue"), lcore, pkts, n)
    if kind == K_VIRTIO_USER:
        return virtio_user_tx_burst(dom, block_at(addr, "virtio_user_queue"), lcore, pkts, n)
    return 0


# -- bursts that serve only the port kinds a loop has --------------------------------------------
#
# ``rx_burst``/``tx_burst`` serve every port type, so a loop that calls them compiles every
# driver's burst kernels.  ``rx_burst_of(kinds, ...)`` / ``tx_burst_of(kinds, ...)`` take a
# constant mask of the kinds the loop's ports have (``kinds_mask``) and are built, when the loop
# is compiled, with a branch for those kinds only: a loop over memif ports compiles no pcap,
# AF_PACKET or AF_XDP kernel.  The mask must be a compile-time constant (pass it through
# ``numba.literally`` in the loop).

_BURSTS = {   # kind: (rx kernel, tx kernel, rx queue layout, tx queue layout)
    K_MEMIF: ("memif_rx_burst", "memif_tx_burst", "memif_queue", "memif_queue"),
    K_RING: ("eth_ring_rx_burst", "eth_ring_tx_burst", "eth_ring_queue", "eth_ring_queue"),
    K_AF_PACKET: ("af_packet_rx_burst", "af_packet_tx_burst", "af_packet_rxq", "af_packet_txq"),
    K_AF_XDP: ("af_xdp_rx_burst", "af_xdp_tx_burst", "af_xdp_rxq", "af_xdp_txq"),
    K_PCAP: ("pcap_rx_burst", "pcap_tx_burst", "pcap_rxq", "pcap_txq"),
    K_VHOST: ("vhost_rx_burst", "vhost_tx_burst", "vhost_queue", "vhost_queue"),
    K_VIRTIO_USER: ("virtio_user_rx_burst", "virtio_user_tx_burst", "virtio_user_queue",
                    "virtio_user_queue"),
}
KINDS_ALL = sum(1 << k for k in _BURSTS)


def kinds_mask(kinds) -> int:
    """The mask of port kinds (``K_*``) for :func:`rx_burst_of`; 0 for none."""
    m = 0
    for k in kinds:
        if k not in _BURSTS:
            raise ValueError(f"no such port kind: {k}")
        m |= 1 << int(k)
    return m


def _callee(name):
    return globals()[name]


@intrinsic(prefer_literal=True)
def _switch(typingctx, kinds, rx, kind, dom, addr, lcore, pkts, n):
    """``kind``'s burst kernel of the constant mask ``kinds`` (``rx``: a constant, Rx or Tx)
    called on the queue block at ``addr``; 0 for a kind outside the mask.

    An intrinsic, not an ``@overload``: the calls are emitted straight into the loop being
    compiled, each driver's kernel loaded from the cache (or compiled) on its own.  An
    overload's body would be a function of its own, compiled per mask in every process
    (overloads are not cached) and optimised again with every driver kernel it calls linked
    into it -- seconds per loop, cold or warm."""
    if not isinstance(kinds, types.IntegerLiteral) or not isinstance(rx, types.BooleanLiteral):
        return None
    mask, is_rx = int(kinds.literal_value), bool(rx.literal_value)
    idx = 0 if is_rx else 1
    calls = []
    for k, names in _BURSTS.items():
        if mask >> k & 1:
            fnty = types.Dispatcher(_callee(names[idx]))
            qty = BlockType(names[2 + idx])
            csig = typingctx.resolve_function_type(fnty, (dom, qty, lcore, pkts, n), {})
            if csig is None:
                return None
            calls.append((k, fnty, qty, csig))
    sig = types.int64(kinds, rx, kind, dom, addr, lcore, pkts, n)

    def codegen(context, builder, sig, args):
        _, _, kind_v, dom_v, addr_v, lcore_v, pkts_v, n_v = args
        tys = sig.args
        i64 = ir.IntType(64)
        res = cgutils.alloca_once_value(builder, ir.Constant(i64, 0))
        kind_v = context.cast(builder, kind_v, tys[2], types.int64)
        addr_v = context.cast(builder, addr_v, tys[4], types.int64)
        for k, fnty, qty, csig in calls:
            with builder.if_then(builder.icmp_signed("==", kind_v, ir.Constant(i64, k))):
                q = builder.inttoptr(addr_v, ir.IntType(8).as_pointer())
                actual = (tys[3], qty, tys[5], tys[6], tys[7])
                vals = [context.cast(builder, v, t, ct) for v, t, ct in
                        zip((dom_v, q, lcore_v, pkts_v, n_v), actual, csig.args)]
                r = context.get_function(fnty, csig)(builder, vals)
                builder.store(context.cast(builder, r, csig.return_type, types.int64), res)
        return builder.load(res)

    return sig, codegen


@kernel(inline="always")
def rx_burst_of(kinds, eth, port, queue, lcore, pkts, n):
    """:func:`rx_burst` for the port kinds in the constant mask ``kinds`` (compiled code
    only: ``kinds`` must be a compile-time constant); a port of another kind gives 0."""
    kind, addr = _queue(eth, eth.rxq, port, queue, P_NB_RX)
    return _switch(kinds, True, kind, eth_domain(eth), addr, lcore, pkts, n)


@kernel(inline="always")
def tx_burst_of(kinds, eth, port, queue, lcore, pkts, n):
    """:func:`tx_burst` for the port kinds in the constant mask ``kinds`` (compiled code
    only: ``kinds`` must be a compile-time constant); a port of another kind takes nothing."""
    kind, addr = _queue(eth, eth.txq, port, queue, P_NB_TX)
    return _switch(kinds, False, kind, eth_domain(eth), addr, lcore, pkts, n)


@kernel
def rx_queue_error(eth, port, queue):
    """The code of the error that stopped ``port``'s Rx queue for good (> 0; the driver's:
    ``V_*`` of :mod:`pktbuf.drivers.pcap.layout` for a capture file), 0 while it can deliver
    or has merely reached its end.  0 for ids that name no queue."""
    kind, addr = _queue(eth, eth.rxq, port, queue, P_NB_RX)
    if kind == K_PCAP:
        return pcap_rx_error(block_at(addr, "pcap_rxq"))
    return 0


@kernel
def tx_queue_error(eth, port, queue):
    """The code of the error that stopped ``port``'s Tx queue for good (> 0: the errno of a
    failed write for a capture file), 0 while it takes packets."""
    kind, addr = _queue(eth, eth.txq, port, queue, P_NB_TX)
    if kind == K_PCAP:
        return pcap_tx_error(block_at(addr, "pcap_txq"))
    return 0


@kernel
def rx_queue_eof(eth, port, queue):
    """True once ``port``'s Rx queue can never deliver again (a capture file at its end,
    without looping, or stopped by an error: :func:`rx_queue_error` says which).  False for
    live ports and for ids that name no queue."""
    kind, addr = _queue(eth, eth.rxq, port, queue, P_NB_RX)
    if kind == K_PCAP:
        return pcap_rx_eof(block_at(addr, "pcap_rxq"))
    return False
