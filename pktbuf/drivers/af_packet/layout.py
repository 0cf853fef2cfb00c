"""The queue blocks of an AF_PACKET port, and the TPACKET_V3 constants the kernels use.

Linux UAPI (``linux/if_packet.h``) and ``Documentation/networking/packet_mmap.rst``:

* a V3 Rx ring is ``block_nr`` blocks of ``block_size`` bytes; each block starts with a
  ``tpacket_block_desc`` (48 bytes: ``block_status`` at +8, ``num_pkts`` at +12,
  ``offset_to_first_pkt`` at +16, ``blk_len`` at +20) and holds variable-size packets, each a
  ``tpacket3_hdr`` (``tp_next_offset`` +0, ``tp_snaplen`` +12, ``tp_len`` +16, ``tp_status``
  +20, ``tp_mac`` +24 (u16), ``tp_vlan_tci`` +32, ``tp_vlan_tpid`` +36 (u16)) followed, at
  ``tp_mac``, by the frame;
* a V3 Tx ring is ``frame_nr`` fixed frames of ``frame_size`` bytes (``frame_size`` divides
  ``block_size``); a frame is a ``tpacket3_hdr`` and its data at +48
  (``TPACKET3_HDRLEN - sizeof(struct sockaddr_ll)``).

Every offset and length read from the ring is checked against the block before use.
"""
from __future__ import annotations

import numpy as np

from ...block import Layout

# -- TPACKET_V3 ---------------------------------------------------------------------------------
BLK_HDR_LEN = 48            # sizeof(struct tpacket_block_desc), aligned to 8
BLK_W_STATUS = 2            # uint32 words of the block descriptor
BLK_W_NUM_PKTS = 3
BLK_W_FIRST = 4
BLK_W_LEN = 5
PKT_HDR_LEN = 48            # sizeof(struct tpacket3_hdr)
PKT_W_NEXT = 0              # uint32 words of tpacket3_hdr
PKT_W_SNAPLEN = 3
PKT_W_LEN = 4
PKT_W_STATUS = 5
PKT_W_MAC_NET = 6           # tp_mac (low 16 bits), tp_net (high)
PKT_W_VLAN_TCI = 8
PKT_W_VLAN_TPID = 9         # tp_vlan_tpid (low 16 bits)
TPACKET3_HDRLEN = 68        # header + struct sockaddr_ll
TX_DATA_OFF = TPACKET3_HDRLEN - 20      # where Tx data goes in a frame: 48

TP_STATUS_KERNEL = 0
TP_STATUS_USER = 0x1
TP_STATUS_CSUMNOTREADY = 0x8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
TP_STATUS_CSUM_VALID = 0x80
TP_STATUS_GSO_TCP = 0x100
TP_STATUS_AVAILABLE = 0
TP_STATUS_SEND_REQUEST = 0x1
TP_STATUS_SENDING = 0x2
TP_STATUS_WRONG_FORMAT = 0x4
TP_STATUS_TS_MASK = (1 << 29) | (1 << 31)   # TS_SOFTWARE | TS_RAW_HARDWARE (Tx frames)

ETHER_HDR_LEN = 14
VLAN_HLEN = 4
ETHER_TYPE_VLAN = 0x8100
ETHER_TYPE_QINQ = 0x88A8

# -- mbuf flags (DPDK's values) -----------------------------------------------------------------
RX_VLAN = 1 << 0                # RTE_MBUF_F_RX_VLAN: vlan_tci holds the frame's tag
RX_L4_CKSUM_BAD = 1 << 3
RX_VLAN_STRIPPED = 1 << 6       # RTE_MBUF_F_RX_VLAN_STRIPPED: ... and it is not in the data
RX_L4_CKSUM_GOOD = 1 << 8
RX_L4_CKSUM_NONE = RX_L4_CKSUM_BAD | RX_L4_CKSUM_GOOD   # data is fine, checksum not computed
RX_LRO = 1 << 16                # RTE_MBUF_F_RX_LRO: a coalesced (GSO) frame
TX_VLAN = 1 << 57               # RTE_MBUF_F_TX_VLAN: insert vlan_tci on transmit

# -- Rx queue ------------------------------------------------------------------------------------
RC_FD = 0               # the queue pair's socket
RC_RING = 1             # address of the Rx ring (block 0)
RC_BLOCK_SIZE = 2
RC_BLOCK_NR = 3
RC_POOL = 4             # pool id Rx mbufs come from
RC_PORT = 5             # port id written into received mbufs
RC_FLAGS = 6            # RXF_*
RC_MBUF_CAP = 7         # data bytes per mbuf (data room minus headroom)
RC_WORDS = 8

RXF_VLAN_STRIP = 1      # keep the tag the kernel stripped in vlan_tci only (not in the data)

RS_PACKETS = 0          # packets delivered
RS_BYTES = 1            # their pkt_len summed
RS_ERRORS = 2           # ierrors: frames dropped (clamped by the kernel, or bad ring metadata)
RS_NOMBUF = 3           # bursts that found frames but no mbufs (frames left in the ring)
RS_TRUNCATED = 4        # frames the kernel clamped to the block (tp_snaplen < tp_len): dropped
RS_BAD_RING = 5         # blocks or packet headers whose offsets/lengths did not fit the block
RS_BLK = 6              # cursor: the block we read
RS_PKT = 7              # cursor: packets of that block already consumed
RS_OFF = 8              # cursor: offset of the next packet header in that block
RS_NPK = 9              # cursor: validated num_pkts of that block, -1 = not opened yet
RS_BLOCKS = 10          # blocks handed back to the kernel
RS_WAITS = 11           # af_packet_rx_wait calls that slept in poll()
RS_WORDS = 16

RX_MAX_BURST = 1024     # packets per burst (n is clamped)

AF_PACKET_RXQ = Layout("af_packet_rxq", [
    ("cfg", np.int64, RC_WORDS),
    ("st", np.int64, RS_WORDS),
    ("scr_src", np.int64, RX_MAX_BURST),     # per packet of a burst: frame address,
    ("scr_len", np.int64, RX_MAX_BURST),     # tp_snaplen,
    ("scr_meta", np.int64, RX_MAX_BURST),    # tp_status | tci << 32 | tpid << 48
    ("scr_mb", np.int32, None),              # the burst's mbufs (all segments)
])
"""One Rx queue (one socket's V3 Rx ring), for
:func:`~pktbuf.drivers.af_packet.rx.af_packet_rx_burst`."""

# -- Tx queue ------------------------------------------------------------------------------------
TC_FD = 0
TC_RING = 1             # address of the Tx ring (frame 0)
TC_BLOCK_SIZE = 2
TC_FRAME_SIZE = 3
TC_FRAME_NR = 4
TC_FPB = 5              # frames per block
TC_PORT = 6
TC_MAX_LEN = 7          # the link's MTU + 14: the longest untagged frame it takes
TC_WORDS = 8

TS_PACKETS = 0          # frames queued for sending
TS_BYTES = 1
TS_ERRORS = 2           # oerrors: packets taken and dropped (too long, too short)
TS_HEAD = 3             # the next frame of the ring we fill
TS_KICKS = 4            # sendto() calls
TS_KICK_ERRORS = 5      # sendto() errors other than ENOBUFS/EAGAIN (e.g. ENETDOWN)
TS_LAST_ERRNO = 6       # the last such errno
TS_FULL = 7             # bursts that stopped at a frame the kernel still owned
TS_TOO_LONG = 8         # dropped: longer than the MTU allows or than a frame holds
TS_RUNT = 9             # dropped: shorter than an Ethernet header
TS_WORDS = 16

AF_PACKET_TXQ = Layout("af_packet_txq", [
    ("cfg", np.int64, TC_WORDS),
    ("st", np.int64, TS_WORDS),
])
"""One Tx queue (one socket's V3 Tx ring), for
:func:`~pktbuf.drivers.af_packet.tx.af_packet_tx_burst`."""
