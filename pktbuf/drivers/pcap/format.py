"""Constants of the two capture file formats, and the little readers kernels parse them with.

Classic pcap (libpcap's savefile, IETF draft-ietf-opsawg-pcap): a 24-byte file header, then
records of a 16-byte header (``ts_sec``, ``ts_frac``, ``caplen``, ``len``) and ``caplen`` bytes,
unpadded; the whole file is in the writer's byte order, told by the magic.  pcapng
(draft-ietf-opsawg-pcapng): blocks of ``type``, ``total length``, body padded to 4 bytes, and the
total length again; a Section Header Block sets the byte order of the blocks after it, Interface
Description Blocks give each interface its link type, snaplen and timestamp resolution, and
packets come in Enhanced (and Simple, and obsolete) Packet Blocks.  docs/pcap.md has the field
tables.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel

# classic pcap
MAGIC_US = 0xA1B2C3D4          # microsecond timestamps
MAGIC_NS = 0xA1B23C4D          # nanosecond timestamps
PCAP_HDR_LEN = 24
PCAP_REC_LEN = 16
VERSION_MAJOR = 2
VERSION_MINOR = 4

LINKTYPE_ETHERNET = 1          # DLT_EN10MB
MAX_SNAPLEN = 262144           # libpcap's MAXIMUM_SNAPLEN: no record may be longer
DEFAULT_SNAPLEN = MAX_SNAPLEN  # what pktbuf writes: every frame libpcap reads, whole (DPDK's
                               # net_pcap writes 65535 and cuts longer frames)
DPDK_SNAPLEN = 65535           # pcap_open_dead(DLT_EN10MB, 65535) in DPDK's net_pcap

# pcapng
BT_SHB = 0x0A0D0D0A
BT_IDB = 0x00000001
BT_PB = 0x00000002             # obsolete Packet Block (read only)
BT_SPB = 0x00000003
BT_EPB = 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D
SHB_LEN = 28                   # without options
IDB_LEN = 20                   # without options
EPB_LEN = 32                   # without data and options
SPB_LEN = 16                   # without data
OPT_ENDOFOPT = 0
OPT_IF_TSRESOL = 9
OPT_IF_TSOFFSET = 14
MAX_BLOCK = 1 << 20            # the longest block we accept: an EPB of MAX_SNAPLEN bytes plus
                               # 768 KiB of options (libpcap: 16 MiB; SHBs at most 1 MiB)
MAX_TSRESOL_DEC = 18           # 10**-18 s: the finest decimal resolution we convert
MAX_TSRESOL_BIN = 63           # 2**-63 s
MAX_TSOFFSET = 1 << 32         # if_tsoffset beyond +-2**32 s (136 years) is refused

NS = 1_000_000_000


# The readers index with an unsigned offset: Numba then emits no negative-index wraparound
# test per byte, and LLVM merges the byte loads (stores) into one 16/32-bit access (plus a
# bswap when swapped).  The callers have checked the offsets against the buffer.
# They are ordinary kernels, not ``inline="always"``: the parsers call them at dozens of
# sites, and Numba-level inlining re-typed the body at every one (a fifth of the pcap unit's
# compile time); LLVM inlines functions this small into the parsers all the same (the
# parsers' machine code calls none of them).

@kernel
def rd16(w, o, swap):
    """The 16-bit field at ``w[o:o+2]``; big-endian when ``swap`` (the file's order is not
    ours), little-endian otherwise."""
    u = np.uint64(o)
    a = np.int64(w[u])
    b = np.int64(w[u + np.uint64(1)])
    if swap:
        return (a << 8) | b
    return a | (b << 8)


@kernel
def rd32(w, o, swap):
    """The unsigned 32-bit field at ``w[o:o+4]`` (see :func:`rd16`)."""
    u = np.uint64(o)
    a = np.int64(w[u])
    b = np.int64(w[u + np.uint64(1)])
    c = np.int64(w[u + np.uint64(2)])
    d = np.int64(w[u + np.uint64(3)])
    if swap:
        return (a << 24) | (b << 16) | (c << 8) | d
    return a | (b << 8) | (c << 16) | (d << 24)


@kernel
def wr32(w, o, v):
    """Store ``v`` as a little-endian (our order) 32-bit field at ``w[o:o+4]``."""
    u = np.uint64(o)
    w[u] = v & 0xFF
    w[u + np.uint64(1)] = (v >> 8) & 0xFF
    w[u + np.uint64(2)] = (v >> 16) & 0xFF
    w[u + np.uint64(3)] = (v >> 24) & 0xFF


@kernel
def pad4(n):
    """``n`` rounded up to a multiple of 4 (pcapng pads block bodies to 32 bits)."""
    return (n + 3) & ~np.int64(3)
