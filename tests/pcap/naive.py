"""A deliberately plain model of the two capture formats, written from their specifications
(IETF draft-ietf-opsawg-pcap and draft-ietf-opsawg-pcapng), for the tests to check pktbuf
against.  Whole files as bytes, struct everywhere, no speed, no cleverness.

A packet is ``(ts_ns, frame, orig_len)``; ``ts_ns`` is None for a Simple Packet Block.
"""
from __future__ import annotations

import struct

NS = 10 ** 9
MAX_SNAPLEN = 262144


class Malformed(ValueError):
    pass


# -- classic pcap ---------------------------------------------------------------------------------
def write_pcap(pkts, *, nano=False, snaplen=65535, big=False, linktype=1, version=(2, 4)):
    """``pkts``: (ts_ns, frame) or (ts_ns, frame, orig_len); frames are cut to snaplen."""
    e = ">" if big else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(e + "IHHiiII", magic, version[0], version[1], 0, 0, snaplen, linktype)]
    for p in pkts:
        ts, frame = p[0], p[1]
        orig = p[2] if len(p) > 2 else len(frame)
        frame = frame[:snaplen]
        sec, frac = divmod(ts, NS)
        out.append(struct.pack(e + "IIII", sec, frac if nano else frac // 1000, len(frame), orig))
        out.append(frame)
    return b"".join(out)


def read_pcap(data):
    if len(data) < 24:
        raise Malformed("short header")
    for e in "<>":
        magic = struct.unpack(e + "I", data[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            break
    else:
        raise Malformed("magic")
    nano = magic == 0xA1B23C4D
    snaplen, linktype = struct.unpack(e + "II", data[16:24])
    if linktype & 0xFFFF != 1:
        raise Malformed("linktype")
    pkts = []
    off = 24
    while off < len(data):
        if off + 16 > len(data):
            raise Malformed("truncated header")
        sec, frac, cap, orig = struct.unpack(e + "IIII", data[off:off + 16])
        if cap > snaplen or cap > MAX_SNAPLEN:
            raise Malformed("caplen")
        if off + 16 + cap > len(data):
            raise Malformed("truncated data")
        pkts.append((sec * NS + (frac if nano else frac * 1000), data[off + 16:off + 16 + cap],
                     orig))
        off += 16 + cap
    return pkts


# -- pcapng ---------------------------------------------------------------------------------------
def _pad(b):
    return b + b"\0" * (-len(b) % 4)


def block(btype, body, e="<"):
    n = 12 + len(_pad(body))
    return struct.pack(e + "II", btype, n) + _pad(body) + struct.pack(e + "I", n)


def option(code, value, e="<"):
    return struct.pack(e + "HH", code, len(value)) + _pad(value)


def shb(e="<", options=b""):
    return block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1) + options, e)


def idb(e="<", snaplen=0, tsresol=None, tsoffset=None, linktype=1, endofopt=True):
    opts = b""
    if tsresol is not None:
        opts += option(9, bytes([tsresol]), e)
    if tsoffset is not None:
        opts += option(14, struct.pack(e + "q", tsoffset), e)
    if opts and endofopt:
        opts += option(0, b"", e)
    return block(1, struct.pack(e + "HHI", linktype, 0, snaplen) + opts, e)


def ticks(ts_ns, tsresol):
    """ns -> units of if_tsresol (None: µs)."""
    if tsresol is None:
        return ts_ns // 1000
    if tsresol & 0x80:
        return (ts_ns << (tsresol & 0x7F)) // NS
    v = tsresol
    return ts_ns * 10 ** v // NS


def epb(ifid, t, frame, orig=None, e="<", options=b""):
    orig = len(frame) if orig is None else orig
    return block(6, struct.pack(e + "IIIII", ifid, t >> 32, t & 0xFFFFFFFF, len(frame), orig)
                 + _pad(frame) + options, e)


def spb(frame, orig=None, e="<"):
    orig = len(frame) if orig is None else orig
    return block(3, struct.pack(e + "I", orig) + frame, e)


def read_pcapng(data):
    pkts = []
    off = 0
    e = None
    ifs = []
    while off < len(data):
        if off + 12 > len(data):
            raise Malformed("truncated block")
        btype = struct.unpack("<I", data[off:off + 4])[0]
        if btype == 0x0A0D0D0A:
            bom = data[off + 8:off + 12]
            if bom == struct.pack("<I", 0x1A2B3C4D):
                e = "<"
            elif bom == struct.pack(">I", 0x1A2B3C4D):
                e = ">"
            else:
                raise Malformed("byte-order magic")
            ifs = []
        elif e is None:
            raise Malformed("no SHB")
        btype, blen = struct.unpack(e + "II", data[off:off + 8])
        if blen < 12 or blen % 4 or blen > (1 << 20):
            raise Malformed("block length")
        if off + blen > len(data):
            raise Malformed("truncated block")
        if struct.unpack(e + "I", data[off + blen - 4:off + blen])[0] != blen:
            raise Malformed("trailing length")
        body = data[off + 8:off + blen - 4]
        if btype == 0x0A0D0D0A:
            if struct.unpack(e + "HH", body[4:8]) not in ((1, 0), (1, 2)):
                raise Malformed("version")
        elif btype == 1:
            linktype, _, snaplen = struct.unpack(e + "HHI", body[:8])
            if linktype != 1:
                raise Malformed("linktype")
            res, tsoff = None, 0
            p = 8
            while p + 4 <= len(body):
                code, ln = struct.unpack(e + "HH", body[p:p + 4])
                if code == 0:
                    break
                if p + 4 + ln > len(body):
                    raise Malformed("option")
                val = body[p + 4:p + 4 + ln]
                if code == 9:
                    # pktbuf's limit: resolutions finer than 10**-18 s (2**-63 s) are refused
                    if ln != 1 or (val[0] < 0x80 and val[0] > 18):
                        raise Malformed("if_tsresol")
                    res = val[0]
                elif code == 14:
                    tsoff = struct.unpack(e + "q", val)[0]
                p += 4 + ln + (-ln % 4)
            ifs.append((snaplen, res, tsoff))
        elif btype in (6, 2):
            if btype == 6:
                ifid, hi, lo, cap, orig = struct.unpack(e + "IIIII", body[:20])
            else:
                ifid, _, hi, lo, cap, orig = struct.unpack(e + "HHIIII", body[:20])
            if ifid >= len(ifs):
                raise Malformed("interface")
            snaplen, res, tsoff = ifs[ifid]
            if cap > len(body) - 20 or cap > MAX_SNAPLEN or (snaplen and cap > snaplen):
                raise Malformed("caplen")
            t = (hi << 32) | lo
            if res is None:
                ns = t * 1000
            elif res & 0x80:
                ns = (t * NS) >> (res & 0x7F)
            else:
                ns = t * NS // 10 ** res
            pkts.append((ns + tsoff * NS, body[20:20 + cap], orig))
        elif btype == 3:
            if not ifs:
                raise Malformed("interface")
            orig = struct.unpack(e + "I", body[:4])[0]
            cap = min(orig, len(body) - 4)
            if ifs[0][0]:
                cap = min(cap, ifs[0][0])
            pkts.append((None, body[4:4 + cap], orig))
        off += blen
    return pkts


def read_any(data):
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        return read_pcapng(data)
    return read_pcap(data)
