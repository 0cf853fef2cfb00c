"""The small pieces every memif burst kernel shares.

* :func:`ring_u16` -- the ring (header and descriptors) as a ``uint16`` array; its ``uint32``
  view addresses descriptor words (:func:`~pktbuf.drivers.memif.layout.desc_word`);
* :func:`rx_window` -- how many slots the peer has filled for us, and the most it may have;
* :func:`tx_publish` -- account a Tx burst and publish it (one release store, then the kick);
* :func:`finish_packet` -- the header fields of a received packet;
* :func:`copy_short` -- a copy that becomes a few vector moves for small packets;
* :func:`kick` -- write the peer's eventfd when it asked for interrupts.

and the constants of the copy loops: their shapes (``L_*``) and the two negative results a
burst helper uses to stop early (``FAILED``: the queue failed validation and is down, the burst
returns 0; ``FALLBACK``: the fast loop cannot take this burst, the general loop will).
Per-packet helpers are inlined at the Numba-IR level (``inline="always"``) into the copy
loops, where the loop shape is a constant and the other shapes' branches are pruned; helpers
that run once per burst are ordinary kernels (LLVM may inline them), which keeps the copy
kernels small enough to compile in seconds.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...atomics import load_acquire, load_relaxed, store_release
from ...rawmem import addr_view, copy_in_bounds
from ._sys import eventfd_signal
from .layout import DESC_SIZE, H16_FLAGS, H16_HEAD, H16_TAIL, RING_FLAG_MASK_INT, RING_HDR_SIZE
from .queue import (Q_EVENTFD, Q_N, Q_RING, QS_BURSTS, QS_BYTES, QS_DROPS, QS_HEAD, QS_KICKS,
                    QS_LAST, QS_PACKETS)
from .validate import IDX_MASK, ring_distance

# copy loop shapes (chosen per queue from the buffer size relation, see rx_copy / tx_copy)
L_ONE = 1           # one descriptor <-> one mbuf segment
L_SPLIT = 2         # one descriptor or segment -> several of the other side
L_GENERAL = 3       # bytes packed: min(source left, room left) per copy, DPDK 22.11's shape

FAILED = -1         # a helper failed the queue (it is down): the burst returns 0
FALLBACK = -1000    # the fast loop cannot take this burst: run the general loop instead

MAX_DESC_LEN = 0xFFFF   # an mbuf's data_len is 16 bits: no longer descriptor is accepted
SHORT = 64              # copies up to this size are one fixed-size (inlined) copy


@kernel(inline="always")
def ring_u16(q):
    """The queue's ring -- header and ``N`` descriptors -- as a ``uint16`` array."""
    return addr_view(q.cfg[Q_RING], (RING_HDR_SIZE + DESC_SIZE * q.cfg[Q_N]) // 2, np.uint16)


@kernel(inline="always")
def ring_u32(q):
    """The same ring as a ``uint32`` array (descriptor words)."""
    return addr_view(q.cfg[Q_RING], (RING_HDR_SIZE + DESC_SIZE * q.cfg[Q_N]) // 4, np.uint32)


@kernel(inline="always")
def copy_short(dst, dst_base, dst_size, src, src_base, src_size, n, short_ok):
    """Copy ``n`` bytes from ``src`` to ``dst``, which lie in the buffers ``[*_base, *_base +
    *_size)`` (checked in the checked build).  If ``short_ok`` (both buffers have at least
    SHORT bytes from ``src``/``dst``) and ``n <= SHORT``, copy a fixed SHORT bytes: LLVM then
    emits a few vector moves in place of a call to libc's memcpy.  The extra bytes stay inside
    both buffers (beyond ``n`` at the destination, where nothing reads them)."""
    if short_ok and n <= SHORT:
        copy_in_bounds(dst, dst_base, dst_size, src, src_base, src_size, SHORT)
    else:
        copy_in_bounds(dst, dst_base, dst_size, src, src_base, src_size, n)


@kernel
def kick(q, r16):
    """Signal the peer's eventfd if it asked for interrupts (its MASK_INT is clear)."""
    if q.cfg[Q_EVENTFD] >= 0 and (load_relaxed(r16, H16_FLAGS) & RING_FLAG_MASK_INT) == 0:
        eventfd_signal(q.cfg[Q_EVENTFD])
        q.st[QS_KICKS] += 1


@kernel
def rx_window(q, r16, client):
    """``(our cursor, the peer's index, slots it has filled, the most it may have filled)``.

    Client: the server's ``tail`` may be at most our refilled ``head`` ahead of our cursor;
    server: the client's ``head`` at most one ring ahead.  The caller fails the queue when
    ``avail > limit``."""
    last = q.st[QS_LAST]
    if client:
        peer = np.int64(load_acquire(r16, H16_TAIL))
        limit = ring_distance(q.st[QS_HEAD], last)
    else:
        peer = np.int64(load_acquire(r16, H16_HEAD))
        limit = q.cfg[Q_N]
    return last, peer, ring_distance(peer, last), limit


@kernel(inline="always")
def finish_packet(mb, h, plen, nb, port):
    """Header fields of a received packet whose segments are filled and chained."""
    m = mb[h]
    m.pkt_len = plen
    m.nb_segs = nb
    m.port = port


@kernel
def tx_publish(q, r16, head_side, cur, j, p, n, nbytes):
    """Account a Tx burst of ``p`` of ``n`` packets in ``j`` slots and publish them (one
    release store of our index -- ``head`` for a client, ``tail`` for a server -- then the
    eventfd if the receiver asked for it)."""
    st = q.st
    st[QS_BURSTS] += 1
    if p < n:
        st[QS_DROPS] += n - p
    if p == 0:
        return
    cur = (cur + j) & IDX_MASK
    st[QS_LAST] = cur
    store_release(r16, H16_HEAD if head_side else H16_TAIL, cur)
    kick(q, r16)
    st[QS_PACKETS] += p
    st[QS_BYTES] += nbytes
