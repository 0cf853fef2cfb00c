"""A test guest: its memory (a memfd region, as a front end's), split rings laid out in it, and
the driver's side of them (post buffers, make chains available, read used entries).

Guest-physical addresses are ``gpa + offset`` with ``gpa`` deliberately unlike any host address,
so a kernel that used a descriptor address without translating it would fault or miss.
"""
from __future__ import annotations

import struct

import numpy as np

from pktbuf.shm import Region
from pktbuf.drivers.vhost.layout import DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE  # noqa: F401

GPA = 0x4000_0000
UVA = 0x7F00_0000_0000


class GuestMem:
    def __init__(self, size: int = 1 << 20, gpa: int = GPA, uva: int = UVA):
        self.region = Region(size, "test_guest")
        self.a = self.region.array
        self.size, self.gpa, self.uva = size, gpa, uva
        self._top = 0

    def alloc(self, n: int, align: int = 16) -> int:
        off = -(-self._top // align) * align
        assert off + n <= self.size, "guest memory full"
        self._top = off + n
        return off

    def host(self, off: int) -> int:
        return self.region.address + off

    def table(self):
        """The one-region (gpa, size, host) table the kernels take."""
        return [(self.gpa, self.size, self.region.address)]

    def write(self, off: int, b: bytes) -> None:
        self.a[off:off + len(b)] = np.frombuffer(b, np.uint8)

    def read(self, off: int, n: int) -> bytes:
        return self.a[off:off + n].tobytes()


class SplitRing:
    """A split ring of ``n`` entries in guest memory (virtio 1.1 §2.6), the driver side."""

    def __init__(self, mem: GuestMem, n: int):
        self.mem, self.n = mem, n
        self.desc = mem.alloc(16 * n, 16)
        self.avail = mem.alloc(6 + 2 * n, 2)
        self.used = mem.alloc(6 + 8 * n, 4)
        self.avail_idx = 0
        self.used_seen = 0

    def set_desc(self, i: int, addr: int, ln: int, flags: int = 0, nxt: int = 0, table=None):
        off = (table if table is not None else self.desc) + 16 * i
        self.mem.write(off, struct.pack("<QIHH", addr, ln, flags, nxt))

    def make_avail(self, head: int) -> None:
        self.mem.write(self.avail + 4 + 2 * (self.avail_idx % self.n), struct.pack("<H", head))
        self.avail_idx = (self.avail_idx + 1) & 0xFFFF
        self.mem.write(self.avail + 2, struct.pack("<H", self.avail_idx))

    def set_avail_idx(self, v: int) -> None:
        self.avail_idx = v & 0xFFFF
        self.mem.write(self.avail + 2, struct.pack("<H", self.avail_idx))

    def set_avail_flags(self, v: int) -> None:
        self.mem.write(self.avail, struct.pack("<H", v))

    def used_idx(self) -> int:
        return struct.unpack("<H", self.mem.read(self.used + 2, 2))[0]

    def used_entry(self, k: int) -> tuple[int, int]:
        return struct.unpack("<II", self.mem.read(self.used + 4 + 8 * (k % self.n), 8))

    def take_used(self) -> list[tuple[int, int]]:
        out = []
        while self.used_seen != self.used_idx():
            out.append(self.used_entry(self.used_seen))
            self.used_seen = (self.used_seen + 1) & 0xFFFF
        return out

    def configure(self, q, *, pool, hdr=12, mrg=True, event_idx=False, indirect=True,
                  callfd=-1, last_avail=0, used_idx=0, regions=None, kickfd=-1):
        """Point queue block ``q`` at this ring (what the control thread does at KICK)."""
        from pktbuf.drivers.vhost.queue import queue_configure, queue_up
        queue_configure(q, desc=self.mem.host(self.desc), avail=self.mem.host(self.avail),
                        used=self.mem.host(self.used), num=self.n,
                        regions=regions if regions is not None else self.mem.table(), hdr=hdr,
                        mrg=mrg, event_idx=event_idx, indirect=indirect, callfd=callfd,
                        pool_id=pool.id, mbuf_cap=int(pool.data_room) - int(pool.headroom),
                        port=0, vring=0, last_avail=last_avail, used_idx=used_idx,
                        kickfd=kickfd)
        queue_up(q.st)


class PackedRing:
    """A packed ring of ``n`` entries in guest memory (virtio 1.1 §2.7), the driver side."""

    AVAIL, USED = 1 << 7, 1 << 15

    def __init__(self, mem: GuestMem, n: int):
        self.mem, self.n = mem, n
        self.desc = mem.alloc(16 * n, 16)
        self.driver = mem.alloc(4, 4)          # driver event suppression (SET_VRING_ADDR avail)
        self.device = mem.alloc(4, 4)          # device event suppression (used)
        self.slot, self.wrap = 0, 1
        self.used_slot, self.used_wrap = 0, 1
        self.lengths = {}                      # buffer id -> descriptors it took in the ring
        self.next_id = 0

    def avail_flags(self, wrap):
        return self.AVAIL if wrap else self.USED

    def set_desc(self, slot, addr, ln, bid, flags, table=None):
        off = (table if table is not None else self.desc) + 16 * slot
        self.mem.write(off, struct.pack("<QIHH", addr, ln, bid, flags))

    def post(self, descs, *, stale=False):
        """Make a chain of ``(addr, len, flags)`` available at the driver's slot (flags: NEXT /
        WRITE / INDIRECT; the first descriptor's flags written last).  ``stale``: write it
        with the wrong wrap bits (not available).  Returns the buffer id."""
        bid = self.next_id
        self.next_id = (self.next_id + 1) % self.n
        slots = []
        s, w = self.slot, self.wrap
        for _ in descs:
            slots.append((s, w))
            s += 1
            if s == self.n:
                s, w = 0, w ^ 1
        for j in range(len(descs) - 1, -1, -1):
            addr, ln, fl = descs[j]
            sj, wj = slots[j]
            if stale and j == 0:
                wj ^= 1
            self.set_desc(sj, addr, ln, bid, fl | self.avail_flags(wj))
        self.slot, self.wrap = s, w
        self.lengths[bid] = len(descs)
        return bid

    def take_used(self):
        out = []
        while True:
            addr, ln, bid, fl = struct.unpack("<QIHH", self.mem.read(self.desc + 16 * self.used_slot, 16))
            a, u = bool(fl & self.AVAIL), bool(fl & self.USED)
            if not (a == u == bool(self.used_wrap)):
                return out
            out.append((bid, ln))
            k = self.lengths.get(bid, 1)
            self.used_slot += k
            if self.used_slot >= self.n:
                self.used_slot -= self.n
                self.used_wrap ^= 1

    def configure(self, q, *, pool, hdr=12, mrg=True, indirect=True, callfd=-1, regions=None,
                  kickfd=-1):
        from pktbuf.drivers.vhost.queue import queue_configure, queue_up
        queue_configure(q, desc=self.mem.host(self.desc), avail=self.mem.host(self.driver),
                        used=self.mem.host(self.device), num=self.n,
                        regions=regions if regions is not None else self.mem.table(), hdr=hdr,
                        mrg=mrg, event_idx=False, indirect=indirect, callfd=callfd,
                        pool_id=pool.id, mbuf_cap=int(pool.data_room) - int(pool.headroom),
                        port=0, vring=0, last_avail=1 << 15, used_idx=1 << 15, packed=True,
                        kickfd=kickfd)
        queue_up(q.st)
