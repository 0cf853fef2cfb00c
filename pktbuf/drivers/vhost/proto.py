"""vhost-user messages: request numbers, feature bits, payload sizes, framing and parsing.

QEMU's ``docs/interop/vhost-user.rst`` ("Message specification", "Protocol features") and
DPDK 22.11 ``lib/vhost/vhost_user.h``; docs/vhost.md states the facts in our words.  Every
message is a 12-byte header (``u32 request, u32 flags, u32 size``) and ``size`` payload bytes,
fds in ``SCM_RIGHTS`` on the header.  :data:`RULES` says, for each request pktbuf's back end
accepts, the payload size and the fds it must carry; :func:`check_message` enforces it before a
handler sees the message.
"""
from __future__ import annotations

import struct

__all__ = ["HDR", "HDR_SIZE", "MAX_PAYLOAD", "MAX_FDS", "RULES", "NAMES", "check_message",
           "VhostViolation", "reply", "FEATURES_OFFERED", "PROTOCOL_OFFERED"]

HDR = struct.Struct("<III")
HDR_SIZE = HDR.size
MAX_PAYLOAD = 632            # DPDK's back end's largest payload; a bigger size is a violation
MAX_FDS = 8                  # fds a back end accepts per message (VHOST_MEMORY_MAX_NREGIONS)

# header flags
F_VERSION = 0x1
F_VERSION_MASK = 0x3
F_REPLY = 0x4
F_NEED_REPLY = 0x8
REPLY_FLAGS = F_VERSION | F_REPLY      # exactly 0x5: DPDK's front end rejects anything else

# requests (front end -> back end)
GET_FEATURES = 1
SET_FEATURES = 2
SET_OWNER = 3
RESET_OWNER = 4
SET_MEM_TABLE = 5
SET_LOG_BASE = 6
SET_LOG_FD = 7
SET_VRING_NUM = 8
SET_VRING_ADDR = 9
SET_VRING_BASE = 10
GET_VRING_BASE = 11
SET_VRING_KICK = 12
SET_VRING_CALL = 13
SET_VRING_ERR = 14
GET_PROTOCOL_FEATURES = 15
SET_PROTOCOL_FEATURES = 16
GET_QUEUE_NUM = 17
SET_VRING_ENABLE = 18
SET_STATUS = 39
GET_STATUS = 40

NAMES = {v: k for k, v in list(globals().items())
         if k.isupper() and isinstance(v, int) and k.startswith(("GET_", "SET_", "RESET_"))}

# virtio feature bits (virtio 1.1 §5.1.3, ch. 6) and the vhost-user bit 30
VIRTIO_NET_F_MRG_RXBUF = 15
VIRTIO_NET_F_CTRL_VQ = 17
VIRTIO_NET_F_MQ = 22
VIRTIO_RING_F_INDIRECT_DESC = 28
VIRTIO_RING_F_EVENT_IDX = 29
VHOST_USER_F_PROTOCOL_FEATURES = 30
VIRTIO_F_VERSION_1 = 32
VIRTIO_F_RING_PACKED = 34
VIRTIO_F_IN_ORDER = 35

FEATURES_OFFERED = sum(1 << b for b in (
    VIRTIO_NET_F_MRG_RXBUF, VIRTIO_NET_F_CTRL_VQ, VIRTIO_NET_F_MQ, VIRTIO_RING_F_INDIRECT_DESC,
    VIRTIO_RING_F_EVENT_IDX, VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_F_VERSION_1,
    VIRTIO_F_RING_PACKED, VIRTIO_F_IN_ORDER))

# protocol feature bits
PROTO_MQ = 0
PROTO_REPLY_ACK = 3
PROTO_STATUS = 16
PROTOCOL_OFFERED = (1 << PROTO_MQ) | (1 << PROTO_REPLY_ACK) | (1 << PROTO_STATUS)

# device status bits (virtio 1.1 §2.1)
S_DRIVER_OK = 0x4

# vring file payload (KICK / CALL / ERR)
VRING_IDX_MASK = 0xFF
VRING_NOFD = 0x100

MAX_VRING_NUM = 32768
MAX_REGIONS = 8
REGION = struct.Struct("<QQQQ")          # gpa, size, uva, mmap_offset
MEMTABLE_HDR = struct.Struct("<II")      # nregions, padding
STATE = struct.Struct("<II")             # index, num
ADDR = struct.Struct("<IIQQQQ")          # index, flags, desc, used, avail, log
U64 = struct.Struct("<Q")

# request -> (payload size or None for "memory table", fds: "none" | "one" | "file" | "regions")
RULES = {
    GET_FEATURES: (0, "none"),
    SET_FEATURES: (8, "none"),
    SET_OWNER: (0, "none"),
    RESET_OWNER: (0, "none"),
    SET_MEM_TABLE: (None, "regions"),
    SET_VRING_NUM: (8, "none"),
    SET_VRING_ADDR: (40, "none"),
    SET_VRING_BASE: (8, "none"),
    GET_VRING_BASE: (8, "none"),
    SET_VRING_KICK: (8, "file"),
    SET_VRING_CALL: (8, "file"),
    SET_VRING_ERR: (8, "file"),
    GET_PROTOCOL_FEATURES: (0, "none"),
    SET_PROTOCOL_FEATURES: (8, "none"),
    GET_QUEUE_NUM: (0, "none"),
    SET_VRING_ENABLE: (8, "none"),
    SET_STATUS: (8, "none"),
    GET_STATUS: (0, "none"),
}


class VhostViolation(Exception):
    """A message breaks the protocol (internal to the control plane: the device turns it into a
    NACK or a link-down with ``reason``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def request_name(req: int) -> str:
    return NAMES.get(req, f"request {req}")


def check_message(req: int, payload: bytes, nfds: int) -> None:
    """Raise :class:`VhostViolation` unless ``payload`` and the fd count are what request
    ``req`` must carry.  Unknown requests are refused here too."""
    rule = RULES.get(req)
    name = request_name(req)
    if rule is None:
        raise VhostViolation(f"{name} is not supported")
    size, fds = rule
    if size is None:                       # SET_MEM_TABLE: 8 + 32 * n, n = 1..8, n fds
        if len(payload) < MEMTABLE_HDR.size:
            raise VhostViolation(f"{name}: payload of {len(payload)} bytes")
        n, _ = MEMTABLE_HDR.unpack_from(payload)
        if not 1 <= n <= MAX_REGIONS:
            raise VhostViolation(f"{name}: {n} regions (1..{MAX_REGIONS})")
        if len(payload) != MEMTABLE_HDR.size + REGION.size * n:
            raise VhostViolation(f"{name}: payload of {len(payload)} bytes for {n} regions")
        if nfds != n:
            raise VhostViolation(f"{name}: {nfds} fds for {n} regions")
        return
    if len(payload) != size:
        raise VhostViolation(f"{name}: payload of {len(payload)} bytes, expected {size}")
    if fds == "none" and nfds:
        raise VhostViolation(f"{name}: carries {nfds} fds, expected none")
    if fds == "file":
        (v,) = U64.unpack(payload)
        want = 0 if v & VRING_NOFD else 1
        if v >> 9:
            raise VhostViolation(f"{name}: reserved bits set in {v:#x}")
        if nfds != want:
            raise VhostViolation(f"{name}: carries {nfds} fds, expected {want}"
                                 f"{' (NOFD set)' if want == 0 else ''}")


def reply(req: int, body: bytes) -> bytes:
    """A reply: the request's number, flags 0x5, the body."""
    return HDR.pack(req, REPLY_FLAGS, len(body)) + body


def memory_regions(payload: bytes) -> list[tuple[int, int, int, int]]:
    """``[(gpa, size, uva, mmap_offset)]`` of a checked SET_MEM_TABLE payload."""
    n, _ = MEMTABLE_HDR.unpack_from(payload)
    return [REGION.unpack_from(payload, MEMTABLE_HDR.size + REGION.size * i) for i in range(n)]
