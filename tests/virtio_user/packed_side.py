"""The back end's side of a packed front-end queue, in Python, for the kernel tests: queue
blocks configured over ring memory of our own (no socket), and the means to read the chains
the driver made available and to write any descriptor -- well formed used ones or hostile."""
from __future__ import annotations

import struct

import numpy as np

from pktbuf.drivers.common.gate import queue_up
from pktbuf.drivers.virtio_user.queue import queue_alloc, queue_configure, queue_release
from pktbuf.drivers.virtio_user.rings import RingMemory

F_NEXT, F_WRITE, F_AVAIL, F_USED = 1, 2, 1 << 7, 1 << 15


class PackedSide:
    """Vring 0 (Rx) and 1 (Tx), packed, of ``n`` entries, the pool's memory in the table."""

    def __init__(self, pool, n: int = 16, mrg: bool = True, in_order: bool = False,
                 kickfd: int = -1, event_idx: bool = False):
        self.pool, self.n = pool, n
        self.mem = RingMemory(2, n)
        regions = [(self.mem.region.address, self.mem.region.size),
                   (pool.region.address, pool.region.size)]
        self.q = []
        for i in range(2):
            q = queue_alloc()
            desc, avail, used, hdrs = self.mem.ring(i)
            queue_configure(q, desc=desc, avail=avail, used=used, num=n, hdrs=hdrs,
                            regions=regions, hdr=12, mrg=mrg, kickfd=kickfd, pool_id=pool.id,
                            port=3, vring=i, in_order=in_order, packed=True,
                            event_idx=event_idx)
            queue_up(q.st)
            self.q.append(q)
        self.avail_pos = [[0, 1], [0, 1]]     # the device's avail slot and wrap counter
        self.used_pos = [[0, 1], [0, 1]]      # its used slot and wrap counter

    def view(self, addr: int, n: int) -> np.ndarray:
        for r in (self.mem.region, self.pool.region):
            if r.address <= addr and addr + n <= r.address + r.size:
                return r.array[addr - r.address:addr - r.address + n]
        raise AssertionError(f"address {addr:#x} outside the table")

    def desc(self, v: int, i: int):
        """``(addr, len, id, flags)`` of slot ``i``."""
        return struct.unpack("<QIHH", self.view(self.mem.ring(v)[0] + 16 * i, 16).tobytes())

    def ring(self, v: int) -> list:
        """Every slot's ``(id, len, flags)``."""
        return [(d[2], d[1], d[3]) for d in (self.desc(v, i) for i in range(self.n))]

    def write(self, v: int, i: int, bid: int, ln: int, flags: int) -> None:
        a = self.mem.ring(v)[0] + 16 * i + 8
        self.view(a, 8)[:] = np.frombuffer(struct.pack("<IHH", ln, bid, flags), np.uint8)

    def avail(self, v: int) -> list:
        """The chains made available since the last call: ``(id, [(addr, len, flags)])``."""
        out = []
        slot, wrap = self.avail_pos[v]
        for _ in range(self.n):
            _a, _l, _id, fl = self.desc(v, slot)
            if bool(fl & F_AVAIL) != bool(wrap) or bool(fl & F_USED) == bool(wrap):
                break
            descs = []
            while True:
                a, ln, bid, fl = self.desc(v, slot)
                descs.append((a, ln, fl))
                slot += 1
                if slot == self.n:
                    slot, wrap = 0, wrap ^ 1
                if not fl & F_NEXT:
                    break
            out.append((bid, descs))
        self.avail_pos[v] = [slot, wrap]
        return out

    def used_flags(self, wrap: int, ln: int) -> int:
        return (F_AVAIL | F_USED if wrap else 0) | (F_WRITE if ln else 0)

    def put_used(self, v: int, entries) -> None:
        """Hand chains back as a device does: ``(id, len, descriptors)`` at the used slot."""
        for bid, ln, nd in entries:
            slot, wrap = self.used_pos[v]
            self.write(v, slot, bid, ln, self.used_flags(wrap, ln))
            slot += nd
            if slot >= self.n:
                slot, wrap = slot - self.n, wrap ^ 1
            self.used_pos[v] = [slot, wrap]

    def release(self) -> int:
        dom = self.pool.domain.state
        return sum(int(queue_release(dom, q)) for q in self.q)

    def close(self) -> None:
        self.release()
        self.mem.close()
