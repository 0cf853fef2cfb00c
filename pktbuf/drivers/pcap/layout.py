"""The queue blocks of a pcap port: :data:`PCAP_RXQ` (a file being replayed) and
:data:`PCAP_TXQ` (a file being written).

Each is a :class:`~pktbuf.block.Block`: ``cfg`` holds what the facade sets when it opens the
file (``C_*``/``T_*`` word indices), ``st`` the cursor, the error state and the counters
(``S_*``/``TS_*``), the rest is scratch and buffers.  A queue is used by one thread at a time,
as a DPDK queue; different queues of a port may run in different threads.

Counter names follow DPDK's ``rte_eth_stats``: ``ipackets``, ``ibytes``, ``imissed``,
``ierrors``, ``rx_nombuf`` per Rx queue; ``opackets``, ``obytes``, ``oerrors`` per Tx queue.
"""
from __future__ import annotations

import numpy as np

from ...block import Layout

# -- Rx -------------------------------------------------------------------------------------------
FMT_NONE = 0         # a null queue (a port with Tx files only): never delivers
FMT_PCAP = 1
FMT_PCAPNG = 2

BURST_MAX = 1024     # packets parsed per burst at most (n is clamped to it)
SCRATCH_SEGS = 8192  # mbufs per burst at most (a burst stops before it would need more)
MAX_IFACES = 256     # pcapng interfaces per section

# cfg words (Rx)
C_FD = 0             # the file's descriptor (-1: a null queue)
C_SIZE = 1           # the file's size when opened
C_WINDOW = 2         # bytes mapped at once (a multiple of the page size, > MAX_BLOCK)
C_FORMAT = 3         # FMT_*
C_SWAP = 4           # classic pcap: the file's byte order is not ours
C_NANO = 5           # classic pcap: ns timestamps
C_SNAPLIMIT = 6      # longest caplen accepted (the file's snaplen when strict, else MAX_SNAPLEN)
C_START = 7          # offset of the first record (pcap: 24) or block (pcapng: 0)
C_LOOP = 8           # infinite_rx: start over at the end
C_POOL = 9           # mempool id Rx allocates from
C_PORT = 10          # stored in mbuf.port
C_TS_WORD = 11       # dynfield1 word of the Rx timestamp field (-1: none)
C_TS_FLAG = 12       # ol_flags bit (value) that says the timestamp is valid (0: none)
C_STRICT = 13        # pcapng: caplen must not exceed the interface's snaplen
C_LINKTYPE = 14      # classic pcap: the file's link type (pcapng: per interface, IF_LINKTYPE)
C_LINKMODE = 15      # which link types are read (LT_* of .linktype: any, convertible, ethernet)
C_PARSE = 16         # pcapng: address of the parser's C wrapper, this process's (.ngcall; 0: none)
C_WORDS = 17

# st words (Rx)
S_CUR = 0            # file offset of the next record or block
S_WIN_ADDR = 1       # address of the current mapping (0: none)
S_WIN_OFF = 2        # file offset it starts at (page aligned)
S_WIN_LEN = 3        # its length
S_EOF = 4            # 1: at the end of the file and not looping
S_ERR = 5            # first format error (V_*), 0 = none; the queue then delivers nothing
S_ERR_OFF = 6        # file offset of the offending record or block
S_ERR_VAL = 7        # the offending value
S_ERRNO = 8          # errno of a failed mmap
S_SECTION = 9        # pcapng: 1 once a Section Header Block has been read
S_NSWAP = 10         # pcapng: the current section's byte order is not ours
S_NIF = 11           # pcapng: interfaces described in the current section
S_SEEN_PKT = 12      # 1 once any packet record was parsed (a looping file is not empty)
S_WRAPS = 13         # infinite_rx: times the file was started over
S_MAPS = 14          # mappings made (window moves)
S_SKIPPED = 15       # pcapng blocks skipped (types we do not read)
S_IPACKETS = 16
S_IBYTES = 17
S_IMISSED = 18       # always 0 for a file (DPDK counts libpcap's ps_drop: 0 offline)
S_IERRORS = 19       # format errors (the first one stops the queue)
S_RX_NOMBUF = 20     # bursts that found the pool short (the records stay unread)
S_SKIPPED_FRAMES = 21  # packet records not delivered: a link type that is not converted, or a
                       # frame its link type's rule cannot turn into Ethernet (.linktype)
S_CONVERTED = 22     # frames of another link type delivered as Ethernet (.linktype)
S_WORDS = 24

# interface table columns (pcapng)
IF_LINKTYPE = 0
IF_SNAPLEN = 1
IF_MUL = 2           # ns = ticks * IF_MUL // IF_DIV (decimal resolutions) ...
IF_DIV = 3
IF_SHIFT = 4         # ... or (ticks >> shift) s + fraction (binary resolutions; -1: decimal)
IF_OFFSET = 5        # if_tsoffset, seconds
IF_COLS = 8

# format errors (st[S_ERR]); docs/pcap.md and the facade say them in words
V_TRUNCATED = 1      # the file ends inside a record or block
V_CAPLEN = 2         # caplen above the snaplen (strict) or MAX_SNAPLEN
V_BLOCK_LEN = 3      # pcapng block length < minimum, not a multiple of 4, > MAX_BLOCK, or the
                     # trailing copy differs
V_NO_SHB = 4         # pcapng: the file does not start with a Section Header Block
V_SHB = 5            # pcapng: bad byte-order magic or version
V_IFACE = 6          # pcapng: a packet refers to an interface not described (yet)
V_LINKTYPE = 7       # pcapng: an interface of a link type the queue refuses (C_LINKMODE)
V_TOO_MANY_IFACES = 8
V_OPTION = 9         # pcapng: an option runs past its block, or a bad if_tsresol
V_MMAP = 10          # mapping the file failed (errno in S_ERRNO)
V_EMPTY_LOOP = 11    # infinite_rx over a file without any packet

PCAP_RXQ = Layout("pcap_rxq", [
    ("cfg", np.int64, C_WORDS),
    ("st", np.int64, S_WORDS),
    ("ifs", np.int64, MAX_IFACES, (IF_COLS,)),
    ("scr_addr", np.int64, BURST_MAX),      # per packet of a burst: address of its data
    ("scr_cap", np.int64, BURST_MAX),       # its captured length
    ("scr_ts", np.int64, BURST_MAX),        # its timestamp, ns since the epoch
    ("scr_end", np.int64, BURST_MAX),       # mbufs needed by packets 0..i (a running sum)
    ("scr_next", np.int64, BURST_MAX),      # file offset after it
    ("scr_conv", np.int64, BURST_MAX),      # 1: put the Ethernet header scr_eh0/1 in front
    ("scr_eh0", np.int64, BURST_MAX),       # its bytes 0..7 (first byte lowest)
    ("scr_eh1", np.int64, BURST_MAX),       # its bytes 8..13
    ("scr_skip", np.int64, BURST_MAX),      # blocks | frames << 32 skipped before it (this burst)
    ("scr_mb", np.int32, SCRATCH_SEGS),     # the mbufs of one burst
])
"""State of one Rx queue (a block), passed to :func:`~pktbuf.drivers.pcap.rx.pcap_rx_burst`."""

# -- Tx -------------------------------------------------------------------------------------------
TFMT_DROP = 0        # a drop queue (a port with Rx files only): counts and frees
TFMT_PCAP = 1
TFMT_PCAPNG = 2

TX_BUF = 1 << 20     # records are formatted here and written when it is full

# cfg words (Tx)
T_FD = 0
T_FORMAT = 1         # TFMT_*
T_NANO = 2           # classic pcap: ns timestamps (pcapng is always written in ns)
T_SNAPLEN = 3        # records are cut to this many bytes (orig_len keeps the packet length)
T_TS_WORD = 4        # dynfield1 word of the timestamp field (-1: none)
T_TS_FLAG = 5        # ol_flags bit (value) that says it is valid (0: none)
T_FLUSH_BURST = 6    # write at the end of every burst (DPDK flushes every burst)
T_WORDS = 8

# st words (Tx)
TS_FILL = 0          # bytes formatted in buf
TS_RECS = 1          # records in buf
TS_ERRNO = 2         # errno of the write that failed; the queue then takes nothing
TS_WRITES = 3        # write() calls
TS_TRUNCATED = 4     # packets longer than the snaplen, written cut (orig_len kept): a loss
                     # the facade reports (PcapPort.warnings)
TS_OPACKETS = 8
TS_OBYTES = 9
TS_OERRORS = 10      # records lost to a failed write
TS_WORDS = 16

PCAP_TXQ = Layout("pcap_txq", [
    ("cfg", np.int64, T_WORDS),
    ("st", np.int64, TS_WORDS),
    ("buf", np.uint8, TX_BUF, (), 4096),
])
"""State of one Tx queue (a block), passed to :func:`~pktbuf.drivers.pcap.tx.pcap_tx_burst`."""


def rxq_alloc():
    """A fresh Rx queue: a null queue until the facade opens a file for it."""
    q = PCAP_RXQ.create()
    q.cfg[C_FD] = -1
    q.cfg[C_TS_WORD] = -1
    return q


def txq_alloc():
    """A fresh Tx queue: a drop queue until the facade opens a file for it."""
    q = PCAP_TXQ.create()
    q.cfg[T_FD] = -1
    q.cfg[T_TS_WORD] = -1
    return q
