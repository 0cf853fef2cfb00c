"""The file headers: what the first bytes of a capture file say (:func:`probe_header`), and
the headers pktbuf writes (:func:`pcap_file_header`, :func:`pcapng_file_header`).  Plain
Python, run once per file when it is opened; the records are the kernels' (:mod:`.parse`,
:mod:`.tx`)."""
from __future__ import annotations

import struct

from ...errors import PcapFormatError
from . import format as F
from .linktype import LT_CONVERTIBLE, accepts, refusal

__all__ = ["probe_header", "pcap_file_header", "pcapng_file_header"]


def probe_header(path: str, head: bytes, linkmode: int = LT_CONVERTIBLE):
    """What the first bytes of a capture file say: ``("pcap", swap, nano, snaplen, linktype)``
    or ``("pcapng", swap, True, 0, 1)`` (pcapng: per interface, later); PcapFormatError if
    they are not a capture we read -- a classic pcap file of a link type ``linkmode``
    (``LT_*`` of :mod:`.linktype`) refuses included."""
    if len(head) < 4:
        raise PcapFormatError("not a capture file (shorter than a file header)", path, 0)
    le = int.from_bytes(head[:4], "little")
    be = int.from_bytes(head[:4], "big")
    if le in (F.MAGIC_US, F.MAGIC_NS) or be in (F.MAGIC_US, F.MAGIC_NS):
        swap = le not in (F.MAGIC_US, F.MAGIC_NS)
        magic = be if swap else le
        if len(head) < F.PCAP_HDR_LEN:
            raise PcapFormatError("truncated pcap file header", path, 0)
        order = ">" if swap else "<"
        _, major, minor, _, _, snaplen, lt = struct.unpack(order + "IHHiiII", head[:24])
        if major != F.VERSION_MAJOR:
            raise PcapFormatError(f"unsupported pcap version {major}.{minor}", path, 4)
        if not accepts(lt & 0xFFFF, linkmode):
            raise PcapFormatError(refusal(lt & 0xFFFF, linkmode), path, 20)
        return "pcap", swap, magic == F.MAGIC_NS, snaplen, lt & 0xFFFF
    if le == F.BT_SHB:
        if len(head) < 12:
            raise PcapFormatError("truncated pcapng Section Header Block", path, 0)
        bom = int.from_bytes(head[8:12], "little")
        if bom == F.BYTE_ORDER_MAGIC:
            return "pcapng", False, True, 0, F.LINKTYPE_ETHERNET
        if bom == 0x4D3C2B1A:
            return "pcapng", True, True, 0, F.LINKTYPE_ETHERNET
        raise PcapFormatError(f"bad pcapng byte-order magic {head[8:12].hex()}", path, 8)
    raise PcapFormatError(f"not a pcap or pcapng file (magic {head[:4].hex()})", path, 0)


def pcap_file_header(nano: bool, snaplen: int) -> bytes:
    """The 24-byte header of a classic pcap file in our byte order, Ethernet."""
    return struct.pack("<IHHiiII", F.MAGIC_NS if nano else F.MAGIC_US, F.VERSION_MAJOR,
                       F.VERSION_MINOR, 0, 0, snaplen, F.LINKTYPE_ETHERNET)


def pcapng_file_header(snaplen: int, app: str = "pktbuf") -> bytes:
    """A Section Header Block (with ``shb_userappl``) and one Ethernet Interface Description
    Block with ``if_tsresol`` = 9 (ns), in our byte order."""
    a = app.encode()
    opt = struct.pack("<HH", 4, len(a)) + a + b"\0" * (-len(a) % 4) + struct.pack("<HH", 0, 0)
    shb_len = F.SHB_LEN + len(opt)
    shb = struct.pack("<IIIHHq", F.BT_SHB, shb_len, F.BYTE_ORDER_MAGIC, 1, 0, -1) + opt + \
        struct.pack("<I", shb_len)
    iopt = struct.pack("<HHB3x", F.OPT_IF_TSRESOL, 1, 9) + struct.pack("<HH", 0, 0)
    idb_len = F.IDB_LEN + len(iopt)
    idb = struct.pack("<IIHHI", F.BT_IDB, idb_len, F.LINKTYPE_ETHERNET, 0, snaplen) + iopt + \
        struct.pack("<I", idb_len)
    return shb + idb
