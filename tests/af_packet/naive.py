"""A plain-Python model of the TPACKET_V3 rings, to test the kernels against.

* :func:`build_block` lays out one Rx block as the Linux kernel does (``tpacket_rcv``:
  descriptor, then packets at ``tp_mac`` = 82 after their header, each aligned to 8, the last
  one's ``tp_next_offset`` 0);
* :func:`parse_ring` reads blocks back the way the port promises to (docs/af_packet.md): the
  frames it delivers, with the VLAN tag put back or kept aside, what it drops and counts;
* :func:`tx_expect` says which frames a Tx burst writes into the ring and which it drops.

Every check the kernel makes on a block is restated here in its plainest form, so a hostile
block (random offsets, counts, lengths) must give the same result through both.
"""
from __future__ import annotations

import struct

BLK_HDR = 48
PKT_HDR = 48
MAC_OFF = 82
USER = 0x1
CSUMNOTREADY = 0x8
VLAN_VALID = 0x10
TPID_VALID = 0x40
CSUM_VALID = 0x80
GSO_TCP = 0x100
MIN_SPACE = 8


def align8(n: int) -> int:
    return (n + 7) & ~7


def build_block(bsz: int, pkts, *, status: int = USER | 0x20) -> bytearray:
    """One block holding ``pkts``: dicts with ``data`` and optionally ``tp_len`` (> len(data):
    a frame the kernel clamped), ``status``, ``tci``, ``tpid``."""
    blk = bytearray(bsz)
    off = BLK_HDR
    offs = []
    for p in pkts:
        d = p["data"]
        offs.append(off)
        struct.pack_into("<IIIIIIHHIIHH", blk, off, 0, 0, 0, len(d), p.get("tp_len", len(d)),
                         USER | p.get("status", 0), MAC_OFF, MAC_OFF + 14, 0,
                         p.get("tci", 0), p.get("tpid", 0), 0)
        blk[off + MAC_OFF:off + MAC_OFF + len(d)] = d
        off += align8(MAC_OFF + len(d))
    for a, b in zip(offs, offs[1:]):
        struct.pack_into("<I", blk, a, b - a)
    struct.pack_into("<IIIIII", blk, 0, 2, BLK_HDR, status, len(pkts), BLK_HDR, off)
    return blk


def fits(bsz: int, sizes) -> bool:
    return BLK_HDR + sum(align8(MAC_OFF + s) for s in sizes) <= bsz


def parse_ring(blocks, bsz: int, strip: bool):
    """What the port delivers from ``blocks`` (bytearrays, in ring order from the cursor):
    ``(frames, truncated, bad)``, each frame ``(bytes, vlan_tci or None, status)``."""
    out, trunc, bad = [], 0, 0
    for blk in blocks:
        st, npk, first = struct.unpack_from("<III", blk, 8)
        if not st & USER:
            break
        off = first
        if off < BLK_HDR or off > bsz or off % 4 or npk > (bsz - off) // MIN_SPACE:
            bad += 1
            continue
        for i in range(npk):
            if off + PKT_HDR > bsz or off % 4:
                bad += 1
                break
            nxt, _s, _n, snap, tlen, status, mac = struct.unpack_from("<IIIIIIH", blk, off)
            tci, tpid = struct.unpack_from("<IH", blk, off + 32)
            tci &= 0xFFFF
            if off + mac + snap > bsz or (i + 1 < npk and nxt < MIN_SPACE):
                bad += 1
                break
            if snap < tlen:
                trunc += 1
            else:
                d = bytes(blk[off + mac:off + mac + snap])
                vlan = None
                if status & VLAN_VALID and (strip or snap >= 12):
                    vlan = tci
                    if not strip:
                        t = tpid if status & TPID_VALID else 0x8100
                        d = d[:12] + struct.pack(">HH", t, tci) + d[12:]
                elif status & VLAN_VALID:
                    status &= ~VLAN_VALID
                out.append((d, vlan, status))
            off += nxt
    return out, trunc, bad


def tx_expect(pkts, mtu: int, framesz: int):
    """``pkts``: ``(data, first segment length, tx_vlan_tci or None)``.  Returns the frames
    put on the wire in order and the numbers dropped as (runt, too long)."""
    sent, runt, long_ = [], 0, 0
    room = framesz - 48
    for data, first, tci in pkts:
        tagged = tci is not None or (first >= 14 and data[12:14] == b"\x81\x00")
        if len(data) < 14 or first < (14 if tci is not None else 1):
            runt += 1
            continue
        wire = data if tci is None else data[:12] + struct.pack(">HH", 0x8100, tci) + data[12:]
        if len(wire) > mtu + 14 + (4 if tagged else 0) or len(wire) > room:
            long_ += 1
            continue
        sent.append(wire)
    return sent, runt, long_
