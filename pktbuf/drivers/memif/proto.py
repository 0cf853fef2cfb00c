"""memif control messages: constants, builders and a strict parser.

Pure Python, no I/O: every function maps bytes to a parsed message or raises
:class:`~pktbuf.errors.ProtocolError`, whose ``reason`` is the string a DPDK 22.11 peer would
put in its DISCONNECT message for the same fault (docs/memif.md, "Control messages" and
"Disconnect").  That makes the parser easy to fuzz: any 128-byte (or other) input
either parses or raises ``ProtocolError``, nothing else.

Wire facts (memif protocol 2.0 as implemented by DPDK ``net_memif``): every message is exactly
128 bytes, host byte order (little-endian on x86_64), packed; bytes 0-1 hold the type and the
payload follows at offset 2; unused bytes are zero.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ...errors import ProtocolError  # noqa: F401  (raised here, defined with the others)

# -- protocol constants ------------------------------------------------------------------------
MSG_SIZE = 128
COOKIE = 0x3E31F20
VERSION_MAJOR = 2
VERSION_MINOR = 0
VERSION = (VERSION_MAJOR << 8) | VERSION_MINOR
NAME_SIZE = 32
SECRET_SIZE = 24
REASON_SIZE = 96
MAX_LOG2_RING_SIZE = 14
MAX_REGIONS = 256
MAX_QUEUES = 255            # queue pairs; ring index 0..254

MSG_ACK = 1
MSG_HELLO = 2
MSG_INIT = 3
MSG_ADD_REGION = 4
MSG_ADD_RING = 5
MSG_CONNECT = 6
MSG_CONNECTED = 7
MSG_DISCONNECT = 8

ADD_RING_FLAG_C2S = 0x1
MODE_ETHERNET = 0

# DISCONNECT reason strings (DPDK's wording where DPDK has one)
R_VERSION = "Incompatible memif version"
R_UNEXPECTED = "Unexpected message"
R_ID = "ID not found"
R_ALREADY = "Already connected"
R_MODE = "Only ethernet mode supported"
R_SECRET_REQUIRED = "Secret required"
R_SECRET = "Incorrect secret"
R_REGION_FD = "Missing region fd"
R_REGION_INDEX = "Invalid region index"
R_RING_FD = "Missing interrupt fd"
R_RING_INDEX = "Invalid ring index"
R_SIZE = "Invalid message size"
R_TYPE = "Unknown message type"
# ours (DPDK does not check these)
R_REGION_SIZE = "Invalid region size"
R_REGION_MAP = "Region cannot be mapped"
R_UNSEALED = "Region not sealed against shrinking"
R_RING_REGION = "Ring outside its region"
R_RING_SIZE = "Invalid ring size"
R_COOKIE = "Wrong ring cookie"
R_NO_RINGS = "No rings"
R_CLOSED = "Device closed"
R_EOF = "Peer closed the connection"


# -- parsed messages ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Ack:
    type = MSG_ACK


@dataclass(frozen=True)
class Hello:
    name: bytes
    min_version: int
    max_version: int
    max_region: int
    max_s2c_ring: int
    max_c2s_ring: int
    max_log2_ring_size: int
    type = MSG_HELLO


@dataclass(frozen=True)
class Init:
    version: int
    id: int
    mode: int
    secret: bytes
    name: bytes
    type = MSG_INIT


@dataclass(frozen=True)
class AddRegion:
    index: int
    size: int
    type = MSG_ADD_REGION


@dataclass(frozen=True)
class AddRing:
    flags: int
    index: int
    region: int
    offset: int
    log2_ring_size: int
    private_hdr_size: int
    type = MSG_ADD_RING

    @property
    def c2s(self) -> bool:
        return bool(self.flags & ADD_RING_FLAG_C2S)


@dataclass(frozen=True)
class Connect:
    if_name: bytes
    type = MSG_CONNECT


@dataclass(frozen=True)
class Connected:
    if_name: bytes
    type = MSG_CONNECTED


@dataclass(frozen=True)
class Disconnect:
    code: int
    reason: str
    type = MSG_DISCONNECT


# struct layouts after the 2-byte type (little-endian, packed)
_HELLO = struct.Struct("<32sHHHHHB")                # name, min, max, max_region, s2c, c2s, log2
_INIT = struct.Struct("<HIB24s32s")                 # version, id, mode, secret, name
_ADD_REGION = struct.Struct("<HQ")                  # index, size
_ADD_RING = struct.Struct("<HHHIBH")                # flags, index, region, offset, log2, priv
_NAME = struct.Struct("<32s")
_DISCONNECT = struct.Struct("<I96s")
_TYPE = struct.Struct("<H")


def _cstr(b: bytes) -> bytes:
    """Bytes up to the first NUL (a field that fills its whole width has no NUL)."""
    i = b.find(b"\0")
    return b if i < 0 else b[:i]


def _field(s, size: int, what: str) -> bytes:
    b = s.encode() if isinstance(s, str) else bytes(s)
    if len(b) > size:
        raise ValueError(f"{what} is longer than {size} bytes")
    return b


def _msg(mtype: int, st: struct.Struct | None = None, *vals) -> bytes:
    body = _TYPE.pack(mtype) + (st.pack(*vals) if st is not None else b"")
    return body + bytes(MSG_SIZE - len(body))


# -- builders ----------------------------------------------------------------------------------
def build_ack() -> bytes:
    return _msg(MSG_ACK)


def build_hello(name="pktbuf", max_region: int = MAX_REGIONS - 1, max_s2c_ring: int = MAX_QUEUES - 1,
                max_c2s_ring: int = MAX_QUEUES - 1,
                max_log2_ring_size: int = MAX_LOG2_RING_SIZE,
                min_version: int = VERSION, max_version: int = VERSION) -> bytes:
    return _msg(MSG_HELLO, _HELLO, _field(name, NAME_SIZE - 1, "name"), min_version, max_version,
                max_region, max_s2c_ring, max_c2s_ring, max_log2_ring_size)


def build_init(id: int, secret=b"", name="pktbuf", mode: int = MODE_ETHERNET,
               version: int = VERSION) -> bytes:
    return _msg(MSG_INIT, _INIT, version, id, mode, _field(secret, SECRET_SIZE, "secret"),
                _field(name, NAME_SIZE - 1, "name"))


def build_add_region(index: int, size: int) -> bytes:
    return _msg(MSG_ADD_REGION, _ADD_REGION, index, size)


def build_add_ring(c2s: bool, index: int, region: int, offset: int, log2_ring_size: int,
                   private_hdr_size: int = 0) -> bytes:
    return _msg(MSG_ADD_RING, _ADD_RING, ADD_RING_FLAG_C2S if c2s else 0, index, region, offset,
                log2_ring_size, private_hdr_size)


def build_connect(if_name="pktbuf") -> bytes:
    return _msg(MSG_CONNECT, _NAME, _field(if_name, NAME_SIZE - 1, "if_name"))


def build_connected(if_name="pktbuf") -> bytes:
    return _msg(MSG_CONNECTED, _NAME, _field(if_name, NAME_SIZE - 1, "if_name"))


def build_disconnect(reason: str, code: int = 0) -> bytes:
    r = reason.encode("utf-8", "replace")[:REASON_SIZE - 1]
    return _msg(MSG_DISCONNECT, _DISCONNECT, code, r)


# -- parser ------------------------------------------------------------------------------------
def parse(buf) -> object:
    """Parse one received message.

    Returns one of :class:`Ack`, :class:`Hello`, :class:`Init`, :class:`AddRegion`,
    :class:`AddRing`, :class:`Connect`, :class:`Connected`, :class:`Disconnect`.  Raises
    :class:`ProtocolError` with ``R_SIZE`` for a length other than 128 and ``R_TYPE`` for an
    unknown type (0, or above 8).  Field values are returned as sent; whether they are acceptable depends on the
    connection state and is checked by :mod:`pktbuf.drivers.memif.control`.
    """
    b = bytes(buf)
    if len(b) != MSG_SIZE:
        raise ProtocolError(R_SIZE, f"{len(b)} bytes")
    (mtype,) = _TYPE.unpack_from(b, 0)
    if mtype == MSG_ACK:
        return Ack()
    if mtype == MSG_HELLO:
        name, mn, mx, mreg, ms2c, mc2s, mlog2 = _HELLO.unpack_from(b, 2)
        return Hello(_cstr(name), mn, mx, mreg, ms2c, mc2s, mlog2)
    if mtype == MSG_INIT:
        ver, iid, mode, secret, name = _INIT.unpack_from(b, 2)
        return Init(ver, iid, mode, _cstr(secret), _cstr(name))
    if mtype == MSG_ADD_REGION:
        return AddRegion(*_ADD_REGION.unpack_from(b, 2))
    if mtype == MSG_ADD_RING:
        return AddRing(*_ADD_RING.unpack_from(b, 2))
    if mtype == MSG_CONNECT:
        return Connect(_cstr(_NAME.unpack_from(b, 2)[0]))
    if mtype == MSG_CONNECTED:
        return Connected(_cstr(_NAME.unpack_from(b, 2)[0]))
    if mtype == MSG_DISCONNECT:
        code, reason = _DISCONNECT.unpack_from(b, 2)
        return Disconnect(code, _cstr(reason).decode("utf-8", "replace"))
    raise ProtocolError(R_TYPE, f"type {mtype}")


def secret_matches(configured: bytes, offered: bytes) -> str | None:
    """The DISCONNECT reason if ``offered`` does not satisfy the server's secret, else None.

    As DPDK: no configured secret accepts anything; a configured one needs a non-empty, equal
    secret (compared over the 24-byte field).
    """
    if not configured:
        return None
    if not offered:
        return R_SECRET_REQUIRED
    if configured[:SECRET_SIZE] != offered[:SECRET_SIZE]:
        return R_SECRET
    return None
