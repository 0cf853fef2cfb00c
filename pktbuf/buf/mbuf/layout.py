"""The mbuf descriptor: a 128-byte structured NumPy dtype.

Descriptors of every pool of a domain live in one table -- the domain's object table, which
the mempool layer sees as object headers (``dom.obj``) and this layer as mbufs (``dom.mb``);
an mbuf *handle* is an ``int32`` index into it, and ``NULL`` is ``-1``.  The layout follows DPDK's
``struct rte_mbuf`` (two 64-byte cache lines, same offsets for every field we keep), with four
deliberate differences, all because a handle is 4 bytes where DPDK stores 8-byte pointers:

=======  =====  =================  ============================================================
offset   size   field              notes
=======  =====  =================  ============================================================
0        8      ``buf_addr``       virtual address of the segment buffer in this process
8        8      ``buf_iova``       offset of the buffer inside its pool's shared region: what a
                                   memif peer (or a device) uses to find it
16       2      ``data_off``       start of the data inside the buffer
18       2      ``refcnt``         reference count; updated atomically when > 1
20       2      ``nb_segs``        segments in the packet (valid in the first segment)
22       2      ``port``           input port, ``PORT_INVALID`` = 0xFFFF
24       8      ``ol_flags``       offload flags; bit 62 ``F_INDIRECT``, bit 61 ``F_EXTERNAL``
32       4      ``packet_type``
36       4      ``pkt_len``        sum of ``data_len`` over all segments
40       2      ``data_len``       bytes in this segment
42       2      ``vlan_tci``
44       4      ``hash``           RSS hash (DPDK's ``hash.rss`` / ``fdir.hash``)
48       4      ``hash_hi``        second half of DPDK's 8-byte hash union (``fdir.id``)
52       2      ``vlan_tci_outer``
54       2      ``buf_len``        size of the segment buffer
56       2      ``pool``           **pool id** (DPDK: 8-byte pool pointer)
58       2      ``state``          **ours**: ``OBJ_FREE`` in the pool, ``OBJ_ALLOC`` when handed out
60       4      ``next``           **next segment handle** (DPDK: 8-byte pointer at offset 64);
                                   on the first line, so the free path reads one line only
64       4      ``direct``         **ours**: for an indirect mbuf, the handle whose buffer it
                                   uses (DPDK derives it from ``buf_addr``); -1 otherwise
68       4      ``nb_indirect``    **ours**: indirect mbufs attached to this buffer; their
                                   references are part of ``refcnt``, so a free can tell them
                                   from the references the application holds
72       8      ``tx_offload``     l2_len:7 l3_len:9 l4_len:8 tso_segsz:16 outer_l3_len:9
                                   outer_l2_len:7 (packed as in DPDK)
80       8      ``shinfo``         reserved for external buffers (not implemented; always 0)
88       2      ``priv_size``      private area size in front of the buffer
90       2      ``timesync``
92       36     ``dynfield1``      9 x uint32 for the application
=======  =====  =================  ============================================================

While an mbuf is in its pool it keeps DPDK's invariants -- ``refcnt == 1``, ``next == -1``,
``nb_segs == 1``, direct -- so a raw allocation has nothing to reset on the second line.

The same table serves plain mempools (``pktbuf.Mempool``): their objects use ``buf_addr``,
``buf_len``, ``pool`` and ``state`` only.
"""
from __future__ import annotations

import numpy as np

from ..mempool.layout import DOMAIN, OBJHDR_DTYPE

MBUF_DTYPE = np.dtype([
    ("buf_addr", np.uint64),
    ("buf_iova", np.uint64),
    ("data_off", np.uint16),
    ("refcnt", np.uint16),
    ("nb_segs", np.uint16),
    ("port", np.uint16),
    ("ol_flags", np.uint64),
    ("packet_type", np.uint32),
    ("pkt_len", np.uint32),
    ("data_len", np.uint16),
    ("vlan_tci", np.uint16),
    ("hash", np.uint32),
    ("hash_hi", np.uint32),
    ("vlan_tci_outer", np.uint16),
    ("buf_len", np.uint16),
    ("pool", np.uint16),
    ("state", np.uint16),
    ("next", np.int32),
    ("direct", np.int32),
    ("nb_indirect", np.uint32),
    ("tx_offload", np.uint64),
    ("shinfo", np.uint64),
    ("priv_size", np.uint16),
    ("timesync", np.uint16),
    ("dynfield1", np.uint32, (9,)),
], align=True)

assert MBUF_DTYPE.itemsize == 128, MBUF_DTYPE.itemsize
assert MBUF_DTYPE.fields["ol_flags"][1] == 24 and MBUF_DTYPE.fields["pool"][1] == 56
assert MBUF_DTYPE.fields["next"][1] == 60 and MBUF_DTYPE.fields["tx_offload"][1] == 72
assert MBUF_DTYPE.fields["dynfield1"][1] == 92
# the mempool's object header fields are at the same places
assert all(MBUF_DTYPE.fields[f][:2] == OBJHDR_DTYPE.fields[f][:2] for f in OBJHDR_DTYPE.names)

DOMAIN.alias("mb", MBUF_DTYPE, of="obj")     # dom.mb: the object table as mbuf descriptors

NULL = -1                    # the NULL handle
PORT_INVALID = 0xFFFF        # RTE_MBUF_PORT_INVALID
HEADROOM = 128               # RTE_PKTMBUF_HEADROOM
DEFAULT_DATAROOM = 2048      # RTE_MBUF_DEFAULT_DATAROOM
DEFAULT_BUF_SIZE = DEFAULT_DATAROOM + HEADROOM   # RTE_MBUF_DEFAULT_BUF_SIZE (2176)
PRIV_ALIGN = 8               # RTE_MBUF_PRIV_ALIGN
MAX_SEGS = 0xFFFF            # nb_segs is 16 bits
REFCNT_MAX = 0xFFFE          # 0xFFFF is rejected by the sanity check, as in DPDK

F_EXTERNAL = 1 << 61         # RTE_MBUF_F_EXTERNAL
F_INDIRECT = 1 << 62         # RTE_MBUF_F_INDIRECT
F_NOT_DIRECT = F_EXTERNAL | F_INDIRECT

