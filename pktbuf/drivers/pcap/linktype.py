"""Link types other than Ethernet: which a pcap port reads, and how their frames become
Ethernet frames (docs/pcap.md, "Link types").

An mbuf a port delivers holds an Ethernet frame, so a capture of another link type is either
converted or not read.  The rule, one function per side -- :func:`link_convert` for the
kernels (:mod:`.parse`), :func:`convert_frame` for :class:`~pktbuf.PcapReader` -- written from
the tcpdump group's link-type registry (``LINKTYPE_LINUX_SLL``, ``LINKTYPE_LINUX_SLL2``,
``LINKTYPE_RAW``, ``LINKTYPE_IPV4``, ``LINKTYPE_IPV6``; libpcap's ``pcap/sll.h``):

* ``LINUX_SLL`` (113, ``tcpdump -i any`` before 4.99, dumpcap ``-i any``): a 16-byte header --
  packet type, ARPHRD type, link-layer address length, 8 address bytes, protocol, all
  big-endian -- in place of the Ethernet header;
* ``LINUX_SLL2`` (276, ``tcpdump -i any`` since 4.99): 20 bytes -- protocol, reserved,
  interface index, ARPHRD type, packet type (1 byte), address length (1 byte), 8 address bytes;
* raw IP (101: the version nibble says IPv4 or IPv6; 228: IPv4; 229: IPv6): no header at all.

Each becomes ``dst(6) src(6) EtherType(2)`` + the network-layer bytes: the EtherType is the
SLL protocol field (raw IP: 0x0800 or 0x86DD); the source is the link-layer address when it is
6 bytes long, else 00:00:00:00:00:00; the destination ff:ff:ff:ff:ff:ff for a frame the
capture marks broadcast (packet type 1), else 00:00:00:00:00:00 (the capture does not say who
received it).  A frame that cannot be expressed so -- an SLL protocol below 0x0600 (802.2 LLC,
CAN, ... not an EtherType), a record shorter than its SLL header, a raw-IP (101) frame whose
version is neither 4 nor 6 -- is skipped and counted, as is every frame of any other link
type.  Which of these a queue accepts at all is the port's ``linktypes`` setting (``MODES``).
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
CONVERTIBLE = (LINKTYPE_RAW, LINKTYPE_LINUX_SLL, LINKTYPE_IPV4, LINKTYPE_IPV6,
               LINKTYPE_LINUX_SLL2)
NAMES = {LINKTYPE_ETHERNET: "ETHERNET", LINKTYPE_RAW: "RAW", LINKTYPE_LINUX_SLL: "LINUX_SLL",
         LINKTYPE_IPV4: "IPV4", LINKTYPE_IPV6: "IPV6", LINKTYPE_LINUX_SLL2: "LINUX_SLL2"}

# what a queue accepts (cfg[C_LINKMODE]); the names are the device argument's values
LT_ANY = 0           # convert the convertible; skip (and count) frames of any other link type
LT_CONVERTIBLE = 1   # convert the convertible; any other link type is a format error
LT_ETHERNET = 2      # Ethernet only: any other link type is a format error
MODES = {"any": LT_ANY, "convertible": LT_CONVERTIBLE, "ethernet": LT_ETHERNET}

ETHER_LEN = 14
SLL_LEN = 16
SLL2_LEN = 20
PACKET_BROADCAST = 1
MIN_ETHERTYPE = 0x0600
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD

# what link_convert says
CV_AS_IS = 0         # an Ethernet frame: deliver the record's bytes
CV_CONVERT = 1       # deliver the 14-byte header (eh0, eh1) + the record's bytes after `drop`
CV_SKIP = -1         # not expressible as Ethernet: skip it (counted)


def accepts(linktype: int, mode: int) -> bool:
    """Whether a file or interface of ``linktype`` is read at all under ``mode`` (False: a
    format error)."""
    if linktype == LINKTYPE_ETHERNET or mode == LT_ANY:
        return True
    return mode == LT_CONVERTIBLE and linktype in CONVERTIBLE


def describe(linktype: int) -> str:
    n = NAMES.get(linktype)
    return f"{linktype} ({n})" if n else str(linktype)


def refusal(linktype: int, mode: int) -> str:
    """Why ``linktype`` is refused under ``mode``, in words."""
    if mode == LT_ETHERNET:
        return (f"link type {describe(linktype)} is not Ethernet (1), and linktypes=ethernet "
                "refuses the others")
    return (f"link type {describe(linktype)} is neither Ethernet (1) nor one pktbuf converts "
            "to it (LINUX_SLL 113, LINUX_SLL2 276, raw IP 101/228/229); linktypes=any skips "
            "such frames instead")


@kernel
def _be16(w, o):
    u = np.uint64(o)
    return (np.int64(w[u]) << 8) | np.int64(w[u + np.uint64(1)])


@kernel
def _pack(w, o, n):
    """Bytes ``w[o:o+n]`` (n <= 8) as an int64, the first byte lowest; 0 when ``o`` < 0."""
    v = np.int64(0)
    if o < 0:
        return v
    for i in range(n):
        v |= np.int64(w[np.uint64(o + i)]) << (8 * i)
    return v


@kernel(inline="always")
def link_convert(w, o, caplen, lt):
    """How the record of link type ``lt`` at ``w[o:o+caplen]`` becomes an Ethernet frame:
    ``(CV_*, drop, eh0, eh1)`` -- drop ``drop`` leading bytes and put the header whose bytes
    0..7 are ``eh0`` and 8..13 ``eh1`` (first byte lowest) in front."""
    zero = np.int64(0)
    if lt == LINKTYPE_ETHERNET:
        return CV_AS_IS, zero, zero, zero
    bcast = False
    src = np.int64(-1)              # window offset of a 6-byte source address (-1: none)
    if lt == LINKTYPE_LINUX_SLL:
        if caplen < SLL_LEN:
            return CV_SKIP, zero, zero, zero
        proto = _be16(w, o + 14)
        bcast = _be16(w, o) == PACKET_BROADCAST
        if _be16(w, o + 4) == 6:
            src = o + 6
        drop = np.int64(SLL_LEN)
    elif lt == LINKTYPE_LINUX_SLL2:
        if caplen < SLL2_LEN:
            return CV_SKIP, zero, zero, zero
        proto = _be16(w, o)
        bcast = w[np.uint64(o + 10)] == PACKET_BROADCAST
        if w[np.uint64(o + 11)] == 6:
            src = o + 12
        drop = np.int64(SLL2_LEN)
    elif lt == LINKTYPE_RAW:
        if caplen < 1:
            return CV_SKIP, zero, zero, zero
        v = w[np.uint64(o)] >> 4
        if v == 4:
            proto = np.int64(ETH_P_IP)
        elif v == 6:
            proto = np.int64(ETH_P_IPV6)
        else:
            return CV_SKIP, zero, zero, zero
        drop = zero
    elif lt == LINKTYPE_IPV4:
        proto = np.int64(ETH_P_IP)
        drop = zero
    elif lt == LINKTYPE_IPV6:
        proto = np.int64(ETH_P_IPV6)
        drop = zero
    else:
        return CV_SKIP, zero, zero, zero
    if proto < MIN_ETHERTYPE:
        return CV_SKIP, zero, zero, zero
    # dst: bytes 0..5; src: 6..11 (6, 7 in eh0; 8..11 in eh1); EtherType: 12, 13 big-endian
    eh0 = np.int64(0xFFFFFFFFFFFF) if bcast else zero
    s = _pack(w, src, 6)
    eh0 |= (s & 0xFFFF) << 48
    eh1 = (s >> 16) & 0xFFFFFFFF
    eh1 |= ((proto >> 8) & 0xFF) << 32
    eh1 |= (proto & 0xFF) << 40
    return CV_CONVERT, drop, eh0, eh1


def convert_frame(lt: int, data: bytes):
    """:func:`link_convert` in plain Python: the Ethernet frame ``data`` (a record of link
    type ``lt``) becomes, ``(frame, drop)``, or None when it is skipped."""
    if lt == LINKTYPE_ETHERNET:
        return data, 0
    src = b"\0" * 6
    bcast = False
    if lt == LINKTYPE_LINUX_SLL:
        if len(data) < SLL_LEN:
            return None
        proto = int.from_bytes(data[14:16], "big")
        bcast = int.from_bytes(data[0:2], "big") == PACKET_BROADCAST
        if int.from_bytes(data[4:6], "big") == 6:
            src = data[6:12]
        drop = SLL_LEN
    elif lt == LINKTYPE_LINUX_SLL2:
        if len(data) < SLL2_LEN:
            return None
        proto = int.from_bytes(data[0:2], "big")
        bcast = data[10] == PACKET_BROADCAST
        if data[11] == 6:
            src = data[12:18]
        drop = SLL2_LEN
    elif lt == LINKTYPE_RAW:
        if not data or data[0] >> 4 not in (4, 6):
            return None
        proto = ETH_P_IP if data[0] >> 4 == 4 else ETH_P_IPV6
        drop = 0
    elif lt in (LINKTYPE_IPV4, LINKTYPE_IPV6):
        proto = ETH_P_IP if lt == LINKTYPE_IPV4 else ETH_P_IPV6
        drop = 0
    else:
        return None
    if proto < MIN_ETHERTYPE:
        return None
    dst = b"\xff" * 6 if bcast else b"\0" * 6
    return dst + src + proto.to_bytes(2, "big") + data[drop:], drop
