"""The back end's side of a front-end queue, in Python, for the kernel tests: a queue block
configured over ring memory of our own (no socket), and the means to read what the driver
made available and to write any used entry -- well formed or hostile."""
from __future__ import annotations

import struct

import numpy as np

from pktbuf.drivers.common.gate import queue_up
from pktbuf.drivers.virtio_user.queue import queue_alloc, queue_configure, queue_release
from pktbuf.drivers.virtio_user.rings import RingMemory


class Side:
    """Vring 0 (Rx) and 1 (Tx) of ``n`` entries, the pool's memory in the table."""

    def __init__(self, pool, n: int = 16, mrg: bool = True, in_order: bool = False,
                 kickfd: int = -1, event_idx: bool = False):
        self.pool, self.n = pool, n
        self.mem = RingMemory(2, n)
        self.regions = [(self.mem.region.address, self.mem.region.size),
                        (pool.region.address, pool.region.size)]
        self.q = []
        for i in range(2):
            q = queue_alloc()
            desc, avail, used, hdrs = self.mem.ring(i)
            queue_configure(q, desc=desc, avail=avail, used=used, num=n, hdrs=hdrs,
                            regions=self.regions, hdr=12, mrg=mrg, kickfd=kickfd, pool_id=pool.id,
                            port=3, vring=i, in_order=in_order, event_idx=event_idx)
            queue_up(q.st)
            self.q.append(q)
        self.last_avail = [0, 0]
        self.used_idx = [0, 0]

    # raw memory by host address (ring memory or the pool's)
    def view(self, addr: int, n: int) -> np.ndarray:
        for r in (self.mem.region, self.pool.region):
            if r.address <= addr and addr + n <= r.address + r.size:
                return r.array[addr - r.address:addr - r.address + n]
        raise AssertionError(f"address {addr:#x} outside the table")

    def _ring(self, v):
        return self.mem.ring(v)

    def desc(self, v: int, i: int):
        d = self._ring(v)[0]
        return struct.unpack("<QIHH", self.view(d + 16 * i, 16).tobytes())

    def avail(self, v: int) -> list[int]:
        """Heads made available since the last call."""
        a = self._ring(v)[1]
        idx = struct.unpack("<H", self.view(a + 2, 2).tobytes())[0]
        out = []
        while self.last_avail[v] != idx:
            s = self.last_avail[v] % self.n
            out.append(struct.unpack("<H", self.view(a + 4 + 2 * s, 2).tobytes())[0])
            self.last_avail[v] = (self.last_avail[v] + 1) & 0xFFFF
        return out

    def chain(self, v: int, head: int) -> list[tuple[int, int, int]]:
        out, i = [], head
        for _ in range(self.n):
            addr, ln, fl, nx = self.desc(v, i)
            out.append((addr, ln, fl))
            if not fl & 1:
                break
            i = nx
        return out

    def put_used(self, v: int, entries, advance=None) -> None:
        """Write used entries from the next slot; move ``used.idx`` by ``advance`` (default
        the number of entries)."""
        u = self._ring(v)[2]
        for k, (hd, ln) in enumerate(entries):
            s = (self.used_idx[v] + k) % self.n
            self.view(u + 4 + 8 * s, 8)[:] = np.frombuffer(struct.pack("<II", hd, ln), np.uint8)
        self.used_idx[v] = (self.used_idx[v] + (len(entries) if advance is None else advance)) \
            & 0xFFFF
        self.view(u + 2, 2)[:] = np.frombuffer(struct.pack("<H", self.used_idx[v]), np.uint8)

    def release(self) -> int:
        dom = self.pool.domain.state
        return sum(int(queue_release(dom, q)) for q in self.q)

    def close(self) -> None:
        self.release()
        self.mem.close()
