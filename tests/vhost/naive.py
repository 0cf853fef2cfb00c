"""A deliberately plain model of the device side of a split virtqueue (virtio 1.1 §2.6, §5.1.6),
written from the specification, to test the kernels against.

It works on guest memory as one NumPy byte array and a region table ``[(gpa, size, offset into
the array)]``, and applies the same validation rules the kernels document (docs/vhost.md): on a
violation it raises :class:`Bad` with the ``V_*`` code.  Nothing here is fast or clever.
"""
from __future__ import annotations

import struct

from pktbuf.drivers.vhost import layout as L


class Bad(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


class NaiveRing:
    def __init__(self, mem, regions, n, desc, avail, used, *, hdr=12, mrg=True, indirect=True,
                 last=0, used_idx=0):
        self.mem, self.regions, self.n = mem, regions, n
        self.desc, self.avail, self.used = desc, avail, used
        self.hdr, self.mrg, self.indirect = hdr, mrg, indirect
        self.last, self.used_idx = last, used_idx
        self.failed = None

    # -- memory --------------------------------------------------------------------------------
    def u16(self, off):
        return struct.unpack_from("<H", self.mem, off)[0]

    def pieces(self, ga, ln):
        """Array offsets covering [ga, ga + ln), cut at region ends."""
        out = []
        while ln > 0:
            for gpa, size, off in self.regions:
                if gpa <= ga < gpa + size:
                    c = min(ln, gpa + size - ga)
                    out.append((off + ga - gpa, c))
                    ga += c
                    ln -= c
                    break
            else:
                raise Bad(L.V_ADDR)
        return out

    def one_piece(self, ga, ln):
        for gpa, size, off in self.regions:
            if gpa <= ga and ga + ln <= gpa + size:
                return off + ga - gpa
        raise Bad(L.V_ADDR)

    # -- chains --------------------------------------------------------------------------------
    def walk(self, head, want_write):
        """(pieces, total bytes) of the chain at ``head``."""
        if head >= self.n:
            raise Bad(L.V_HEAD)
        table, size, i, seen, inside = self.desc, self.n, head, 0, False
        pieces, total = [], 0
        while True:
            seen += 1
            if seen > size:
                raise Bad(L.V_LOOP)
            addr, ln, flags, nxt = struct.unpack_from("<QIHH", self.mem, table + 16 * i)
            if flags & L.DESC_F_INDIRECT:
                if inside:
                    raise Bad(L.V_NESTED)
                if not self.indirect or flags & L.DESC_F_NEXT:
                    raise Bad(L.V_INDIRECT)
                if ln == 0 or ln % 16 or ln // 16 > self.n:
                    raise Bad(L.V_INDIRECT_LEN)
                table, size, i, seen, inside = self.one_piece(addr, ln), ln // 16, 0, 0, True
                continue
            if bool(flags & L.DESC_F_WRITE) != want_write:
                raise Bad(L.V_WRITE)
            pieces += self.pieces(addr, ln)
            if len(pieces) > L.MAX_PIECES:
                raise Bad(L.V_PIECES)
            total += ln
            if not flags & L.DESC_F_NEXT:
                return pieces, total
            if nxt >= size:
                raise Bad(L.V_NEXT)
            i = nxt

    def _avail(self):
        cnt = (self.u16(self.avail + 2) - self.last) & 0xFFFF
        if cnt > self.n:
            raise Bad(L.V_AVAIL_IDX)
        return cnt

    def _head(self, k):
        return self.u16(self.avail + 4 + 2 * ((self.last + k) % self.n))

    def _put_used(self, head, ln):
        struct.pack_into("<II", self.mem, self.used + 4 + 8 * (self.used_idx % self.n), head, ln)
        self.used_idx = (self.used_idx + 1) & 0xFFFF

    def _publish(self):
        struct.pack_into("<H", self.mem, self.used + 2, self.used_idx)

    # -- guest Tx -> device ------------------------------------------------------------------
    def dequeue(self, n):
        """Frames (bytes) the guest sent, up to ``n``; chains without a frame or with one
        longer than MAX_FRAME are consumed and counted in ``self.errors``."""
        self.errors = 0
        frames = []
        took = 0
        try:
            cnt = self._avail()
            while took < cnt and len(frames) < n:
                head = self._head(took)
                pieces, total = self.walk(head, False)
                data = b"".join(bytes(self.mem[o:o + c]) for o, c in pieces)[self.hdr:]
                if 0 < len(data) <= L.MAX_FRAME:
                    frames.append(data)
                else:
                    self.errors += 1
                self._put_used(head, 0)
                took += 1
        except Bad as e:
            self.failed = e.code
        self.last = (self.last + took) & 0xFFFF
        self._publish()
        return frames

    # -- device -> guest Rx ------------------------------------------------------------------
    def enqueue(self, frames):
        """Write frames into the guest's buffers; how many were placed."""
        sent = 0
        took = 0
        try:
            cnt = self._avail()
            for f in frames:
                need = self.hdr + len(f)
                bufs, room = [], 0
                while room < need and took + len(bufs) < cnt and (self.mrg or not bufs):
                    if len(bufs) >= L.MAX_BUFS:
                        raise Bad(L.V_BUFS)
                    head = self._head(took + len(bufs))
                    pieces, total = self.walk(head, True)
                    bufs.append((head, pieces, total))
                    room += total
                if room < need:
                    break
                hdr = bytes(10) + struct.pack("<H", len(bufs)) if self.hdr == 12 else bytes(10)
                data = hdr + f
                pos = 0
                for head, pieces, total in bufs:
                    w = min(total, len(data) - pos)
                    chunk = data[pos:pos + w]
                    q = 0
                    for o, c in pieces:
                        part = chunk[q:q + c]
                        self.mem[o:o + len(part)] = list(part)
                        q += len(part)
                    pos += w
                    self._put_used(head, w)
                took += len(bufs)
                sent += 1
        except Bad as e:
            self.failed = e.code
        self.last = (self.last + took) & 0xFFFF
        self._publish()
        return sent


class NaivePacked(NaiveRing):
    """The same device over a packed ring (virtio 1.1 §2.7): chains in consecutive slots,
    availability by the wrap counter, one used descriptor per chain."""

    AVAIL, USED = 1 << 7, 1 << 15

    def __init__(self, mem, regions, n, desc, **kw):
        super().__init__(mem, regions, n, desc, 0, 0, **kw)
        self.wrap, self.used_wrap = 1, 1
        self.slot, self.used_slot = 0, 0

    def available(self, slot, wrap):
        fl = struct.unpack_from("<H", self.mem, self.desc + 16 * slot + 14)[0]
        return bool(fl & self.AVAIL) == bool(wrap) and bool(fl & self.USED) != bool(wrap)

    def walk_packed(self, slot, want_write):
        """(pieces, total, descriptors in the ring, buffer id)."""
        table, size, i, seen, inside, nd, bid = self.desc, self.n, slot, 0, False, 0, 0
        pieces, total = [], 0
        while True:
            seen += 1
            if seen > size:
                raise Bad(L.V_LOOP)
            addr, ln, idv, flags = struct.unpack_from("<QIHH", self.mem, table + 16 * i)
            if not inside:
                nd += 1
                bid = idv
            if flags & L.DESC_F_INDIRECT and not inside:
                if not self.indirect or flags & L.DESC_F_NEXT:
                    raise Bad(L.V_INDIRECT)
                if ln == 0 or ln % 16 or ln // 16 > self.n:
                    raise Bad(L.V_INDIRECT_LEN)
                table, size, i, seen, inside = self.one_piece(addr, ln), ln // 16, 0, 0, True
                continue
            if inside and flags & L.DESC_F_INDIRECT:
                raise Bad(L.V_NESTED)
            if bool(flags & L.DESC_F_WRITE) != want_write:
                raise Bad(L.V_WRITE)
            pieces += self.pieces(addr, ln)
            total += ln
            if inside:
                i += 1
                if i == size:
                    return pieces, total, nd, bid
                continue
            if not flags & L.DESC_F_NEXT:
                return pieces, total, nd, bid
            i = (i + 1) % self.n

    def _adv(self, slot, wrap, k):
        slot += k
        if slot >= self.n:
            slot, wrap = slot - self.n, wrap ^ 1
        return slot, wrap

    def _used(self, bid, ln):
        fl = (self.AVAIL | self.USED if self.used_wrap else 0) | (L.DESC_F_WRITE if ln else 0)
        struct.pack_into("<IHH", self.mem, self.desc + 16 * self.used_slot + 8, ln, bid, fl)

    def dequeue(self, n):
        self.errors = 0
        frames, took = [], 0
        try:
            while len(frames) < n and took < self.n and self.available(self.slot, self.wrap):
                pieces, total, nd, bid = self.walk_packed(self.slot, False)
                data = b"".join(bytes(self.mem[o:o + c]) for o, c in pieces)[self.hdr:]
                if 0 < len(data) <= L.MAX_FRAME:
                    frames.append(data)
                else:
                    self.errors += 1
                self._used(bid, 0)
                self.used_slot, self.used_wrap = self._adv(self.used_slot, self.used_wrap, nd)
                self.slot, self.wrap = self._adv(self.slot, self.wrap, nd)
                took += 1
        except Bad as e:
            self.failed = e.code
        return frames

    def enqueue(self, frames):
        sent = 0
        try:
            for f in frames:
                need = self.hdr + len(f)
                bufs, room = [], 0
                s, w = self.slot, self.wrap
                while room < need and (self.mrg or not bufs):
                    if len(bufs) >= L.MAX_BUFS:
                        raise Bad(L.V_BUFS)
                    if not self.available(s, w):
                        break
                    pieces, total, nd, bid = self.walk_packed(s, True)
                    bufs.append((bid, nd, pieces, total))
                    s, w = self._adv(s, w, nd)
                    room += total
                if room < need:
                    break
                hdr = bytes(10) + struct.pack("<H", len(bufs)) if self.hdr == 12 else bytes(10)
                data = hdr + f
                pos = 0
                for bid, nd, pieces, total in bufs:
                    wlen = min(total, len(data) - pos)
                    chunk = data[pos:pos + wlen]
                    q = 0
                    for o, c in pieces:
                        part = chunk[q:q + c]
                        self.mem[o:o + len(part)] = list(part)
                        q += len(part)
                    pos += wlen
                    self._used(bid, wlen)
                    self.used_slot, self.used_wrap = self._adv(self.used_slot, self.used_wrap, nd)
                self.slot, self.wrap = s, w
                sent += 1
        except Bad as e:
            self.failed = e.code
        return sent
