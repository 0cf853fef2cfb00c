"""Capture files for scripts: :class:`PcapReader` and :class:`PcapWriter`, dpkt's shapes.

::

    for ts, frame in PcapReader("in.pcapng"):        # pcap or pcapng, either byte order
        ...                                          # ts: float seconds, frame: bytes
    with PcapWriter("out.pcap", nano=True) as w:
        w.writepkt(frame, ts)                        # ts: float seconds (None: now)

Plain Python, one record at a time from a buffered file (memory stays bounded whatever the file
size): for scripts and tests.  The data path -- bursts of mbufs -- is :class:`~pktbuf.PcapPort`.
Both apply the same checks and raise :class:`~pktbuf.errors.PcapFormatError` with the offset
of a record that breaks its format, after yielding every record before it.
"""
from __future__ import annotations

import os
import struct
import time

from ....errors import InvalidArgument, PcapFormatError, check_count, check_flag
from .. import format as F
from ..header import pcap_file_header, pcapng_file_header, probe_header
from ..linktype import ETHER_LEN, MODES as LINK_MODES, accepts, convert_frame, refusal

__all__ = ["PcapReader", "PcapWriter", "pcap_reader"]

_BAD_BOM = 0x4D3C2B1A


class PcapReader:
    """Iterate a capture file as ``(ts, frame)``: ``ts`` float seconds (as dpkt), ``frame``
    bytes.  :meth:`records` gives ``(ts_ns, frame, orig_len)`` with exact ns timestamps
    (``ts_ns`` None for a pcapng Simple Packet Block).

    ``f``: a path or a binary file object; ``strict``: refuse records longer than the
    (interface's) snaplen (False: accept up to 262144 bytes); ``linktypes``: as
    :class:`~pktbuf.PcapPort`'s (``"convertible"``: LINUX_SLL, LINUX_SLL2 and raw-IP frames
    are converted to Ethernet, other link types refused; ``"any"``: their frames skipped,
    counted in ``skipped``; ``"ethernet"``).  ``converted`` counts the frames converted.  Attributes: ``format`` ("pcap" or
    "pcapng"), ``nano`` (classic pcap: ns timestamps), ``snaplen`` (classic pcap: the header's;
    pcapng: the first interface's once read), ``datalink()`` (1, Ethernet).
    """

    def __init__(self, f, *, strict: bool = True, linktypes: str = "convertible"):
        if linktypes not in LINK_MODES:
            raise InvalidArgument(f"linktypes must be one of {', '.join(LINK_MODES)}, got "
                                  f"{linktypes!r}")
        self._linkmode = LINK_MODES[linktypes]
        self.skipped = 0
        self.converted = 0
        self._own = isinstance(f, (str, os.PathLike))
        self._f = open(f, "rb") if self._own else f
        self.name = os.fspath(f) if self._own else getattr(f, "name", None)
        self.strict = check_flag(strict, "strict")
        try:
            head = self._f.read(F.PCAP_HDR_LEN)
            self.format, self._swap, self.nano, self.snaplen, self._lt = probe_header(
                self.name, head, self._linkmode)
        except BaseException:
            self.close()
            raise
        self._head = head
        self._o = "<>"[self._swap]

    def datalink(self) -> int:
        return F.LINKTYPE_ETHERNET

    def __iter__(self):
        for ts, frame, _ in self.records():
            if ts is None:
                yield 0.0, frame
            else:
                sec, frac = divmod(ts, F.NS)        # as dpkt: seconds + fraction
                yield sec + frac / 1e9, frame

    def readpkts(self) -> list:
        return list(self)

    def _read(self, n: int, off: int, what: str) -> bytes:
        b = self._f.read(n)
        if len(b) != n:
            raise PcapFormatError(f"the file ends inside a {what} (truncated)", self.name, off)
        return b

    def records(self):
        if self.format == "pcap":
            recs = self._pcap()
        else:
            recs = self._pcapng()
        for ts, data, orig, lt in recs:
            if lt == F.LINKTYPE_ETHERNET:
                yield ts, data, orig
                continue
            got = convert_frame(lt, data)
            if got is None:
                self.skipped += 1
                continue
            frame, drop = got
            self.converted += 1
            yield ts, frame, max(orig - drop, 0) + ETHER_LEN

    def _pcap(self):
        o = self._o
        fmul = 1 if self.nano else 1000
        limit = self.snaplen if self.strict and 0 < self.snaplen < F.MAX_SNAPLEN \
            else F.MAX_SNAPLEN
        off = F.PCAP_HDR_LEN
        while True:
            h = self._f.read(F.PCAP_REC_LEN)
            if not h:
                return
            if len(h) != F.PCAP_REC_LEN:
                raise PcapFormatError("the file ends inside a record header (truncated)",
                                      self.name, off)
            sec, frac, caplen, orig = struct.unpack(o + "IIII", h)
            if caplen > limit:
                raise PcapFormatError(f"caplen {caplen} exceeds the snaplen {limit}",
                                      self.name, off)
            data = self._read(caplen, off, "record")
            yield sec * F.NS + frac * fmul, data, orig, self._lt
            off += F.PCAP_REC_LEN + caplen

    def _pcapng(self):
        # the 24 bytes the header probe read are the start of the first block
        pending = self._head
        off = 0
        swap = False
        ifs = []
        section = False
        while True:
            b = pending + self._f.read(max(0, 12 - len(pending)))
            pending = b""
            if not b:
                return
            if len(b) < 12:
                raise PcapFormatError("the file ends inside a block (truncated)", self.name, off)
            btype = int.from_bytes(b[:4], "big" if swap else "little")
            if btype == F.BT_SHB:
                bom = int.from_bytes(b[8:12], "little")
                if bom not in (F.BYTE_ORDER_MAGIC, _BAD_BOM):
                    raise PcapFormatError("bad pcapng byte-order magic", self.name, off)
                swap = bom == _BAD_BOM
                btype = F.BT_SHB
            elif not section:
                raise PcapFormatError("a pcapng file must start with a Section Header Block",
                                      self.name, off)
            o = ">" if swap else "<"
            blen = struct.unpack(o + "I", b[4:8])[0]
            if blen < 12 or blen % 4 or blen > F.MAX_BLOCK or \
                    (btype == F.BT_SHB and blen < F.SHB_LEN):
                raise PcapFormatError(f"bad pcapng block length {blen}", self.name, off)
            blk = b + self._read(blen - len(b), off, "block") if blen > len(b) else b[:blen]
            if len(b) > blen:
                pending = b[blen:]
            if struct.unpack(o + "I", blk[-4:])[0] != blen:
                raise PcapFormatError("pcapng block length differs from its trailing copy",
                                      self.name, off)
            if btype == F.BT_SHB:
                major, minor = struct.unpack(o + "HH", blk[12:16])
                if major != 1 or minor not in (0, 2):
                    raise PcapFormatError(f"unsupported pcapng version {major}.{minor}",
                                          self.name, off)
                section = True
                ifs = []
            elif btype == F.BT_IDB:
                ifs.append(self._idb(blk, o, off, len(ifs)))
                if len(ifs) == 1:
                    self.snaplen = ifs[0][1]
            elif btype in (F.BT_EPB, F.BT_PB):
                if blen < F.EPB_LEN:
                    raise PcapFormatError(f"bad pcapng block length {blen}", self.name, off)
                if btype == F.BT_EPB:
                    ifid = struct.unpack(o + "I", blk[8:12])[0]
                else:
                    ifid = struct.unpack(o + "H", blk[8:10])[0]
                hi, lo, caplen, orig = struct.unpack(o + "IIII", blk[12:28])
                if ifid >= len(ifs):
                    raise PcapFormatError(f"packet of undescribed interface {ifid}",
                                          self.name, off)
                snap = ifs[ifid][1]
                limit = snap if self.strict and 0 < snap < F.MAX_SNAPLEN else F.MAX_SNAPLEN
                if caplen > limit or caplen > blen - F.EPB_LEN:
                    raise PcapFormatError(f"caplen {caplen} exceeds the snaplen or its block",
                                          self.name, off)
                yield (self._ns(ifs[ifid], (hi << 32) | lo), blk[28:28 + caplen], orig,
                       ifs[ifid][3])
            elif btype == F.BT_SPB:
                if blen < F.SPB_LEN:
                    raise PcapFormatError(f"bad pcapng block length {blen}", self.name, off)
                if not ifs:
                    raise PcapFormatError("packet before any interface", self.name, off)
                orig = struct.unpack(o + "I", blk[8:12])[0]
                caplen = min(orig, blen - F.SPB_LEN)
                if ifs[0][1]:
                    caplen = min(caplen, ifs[0][1])
                if caplen > F.MAX_SNAPLEN:
                    raise PcapFormatError(f"caplen {caplen} exceeds 262144", self.name, off)
                yield None, blk[12:12 + caplen], orig, ifs[0][3]
            off += blen

    def _idb(self, blk, o, off, nif):
        linktype, _, snaplen = struct.unpack(o + "HHI", blk[8:16])
        if not accepts(linktype, self._linkmode):
            raise PcapFormatError("a pcapng interface of " + refusal(linktype, self._linkmode),
                                  self.name, off)
        if len(blk) < F.IDB_LEN:
            raise PcapFormatError("bad pcapng block length", self.name, off)
        res = ("dec", 6)
        tsoff = 0
        p = 16
        end = len(blk) - 4
        while p + 4 <= end:
            code, ln = struct.unpack(o + "HH", blk[p:p + 4])
            if code == F.OPT_ENDOFOPT:
                break
            if p + 4 + ln > end:
                raise PcapFormatError("a pcapng option runs past its block", self.name, off)
            val = blk[p + 4:p + 4 + ln]
            if code == F.OPT_IF_TSRESOL:
                if ln != 1:
                    raise PcapFormatError("bad if_tsresol", self.name, off)
                v = val[0]
                if v & 0x80:
                    if v & 0x7F > F.MAX_TSRESOL_BIN:
                        raise PcapFormatError("bad if_tsresol", self.name, off)
                    res = ("bin", v & 0x7F)
                else:
                    if v > F.MAX_TSRESOL_DEC:
                        raise PcapFormatError("bad if_tsresol", self.name, off)
                    res = ("dec", v)
            elif code == F.OPT_IF_TSOFFSET:
                if ln != 8:
                    raise PcapFormatError("bad if_tsoffset", self.name, off)
                tsoff = struct.unpack(o + "q", val)[0]
                if abs(tsoff) > F.MAX_TSOFFSET:
                    raise PcapFormatError("bad if_tsoffset", self.name, off)
            p += 4 + ln + (-ln % 4)
        return res, snaplen, tsoff, linktype

    @staticmethod
    def _ns(iface, t):
        (kind, e), _, tsoff, _ = iface
        if kind == "dec":
            ns = t * 10 ** (9 - e) if e <= 9 else t // 10 ** (e - 9)
        else:
            ns = (t >> e) * F.NS + (((t & ((1 << e) - 1)) * F.NS) >> e)
        ns += tsoff * F.NS
        return ns if 0 <= ns < 1 << 63 else None       # as the kernels: no timestamp

    def close(self) -> None:
        if self._own and not self._f.closed:
            self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pcap_reader(path, **kw) -> PcapReader:
    """``for ts, frame in pktbuf.pcap_reader(path)``: a :class:`PcapReader`."""
    return PcapReader(path, **kw)


class PcapWriter:
    """Write a capture file record by record (dpkt's ``Writer`` shape).

    ``f``: a path (created or truncated) or a binary file object; ``nano``: ns timestamps
    (classic pcap; pcapng is always written in ns); ``snaplen``: 1..262144 (default 262144:
    every frame whole), longer frames are written cut to it with their original length
    (``truncated`` counts them); ``pcapng``: write
    SHB + IDB + Enhanced Packet Blocks instead of classic pcap.
    """

    def __init__(self, f, nano: bool = False, snaplen: int = F.DEFAULT_SNAPLEN, *,
                 pcapng: bool = False):
        self.nano = check_flag(nano, "nano")
        self.snaplen = check_count(snaplen, "snaplen", lo=1, hi=F.MAX_SNAPLEN)
        self.pcapng = check_flag(pcapng, "pcapng")
        self._own = isinstance(f, (str, os.PathLike))
        self._f = open(f, "wb") if self._own else f
        self.truncated = 0
        self.count = 0
        self._f.write(pcapng_file_header(self.snaplen) if self.pcapng
                      else pcap_file_header(self.nano, self.snaplen))

    def writepkt_ns(self, frame, ts_ns: int) -> None:
        """One record; ``ts_ns`` in ns since the epoch (exact)."""
        frame = bytes(frame)
        ts_ns = int(ts_ns)
        if ts_ns < 0:
            raise InvalidArgument(f"timestamps before 1970 cannot be written ({ts_ns})")
        orig = len(frame)
        cap = min(orig, self.snaplen)
        if cap < orig:
            self.truncated += 1
            frame = frame[:cap]
        if self.pcapng:
            blen = F.EPB_LEN + cap + (-cap % 4)
            self._f.write(struct.pack("<IIIIIII", F.BT_EPB, blen, 0, ts_ns >> 32,
                                      ts_ns & 0xFFFFFFFF, cap, orig) + frame
                          + b"\0" * (-cap % 4) + struct.pack("<I", blen))
        else:
            sec, frac = divmod(ts_ns, F.NS)
            if sec > 0xFFFFFFFF:
                raise InvalidArgument("timestamps after 2106 do not fit a pcap record")
            self._f.write(struct.pack("<IIII", sec, frac if self.nano else frac // 1000, cap,
                                      orig) + frame)
        self.count += 1

    def writepkt(self, frame, ts: float | None = None) -> None:
        """One record; ``ts`` in float seconds (None: now)."""
        if ts is None:
            ns = time.time_ns()
        else:
            sec = int(ts)
            ns = sec * F.NS + round((ts - sec) * 1e9)
        self.writepkt_ns(frame, ns)

    def writepkts(self, pkts) -> None:
        """Records from an iterable of ``(ts, frame)`` (dpkt's order)."""
        for ts, frame in pkts:
            self.writepkt(frame, ts)

    def close(self) -> None:
        if self._own:
            if not self._f.closed:
                self._f.close()
        else:
            self._f.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
