"""A deliberately plain model of DPDK 22.11 l3fwd's per-packet behaviour on x86, for the tests.

Written from DPDK's sources (``examples/l3fwd``: ``l3fwd_lpm.c`` / ``l3fwd_em.c`` parsers and
lookups, ``l3fwd_common.h`` ``rfc1812_process``, ``l3fwd_sse.h`` rewrite), one packet at a time,
with Python integers, dicts and lists -- no pktbuf table, no kernel::

    m = Model("lpm", portmask=0x3, v4=routes.default_lpm(False), v6=routes.default_lpm(True),
              src_macs={0: b"...", 1: b"..."})
    port, reason, out = m.forward(room, length, rx_port)

``room`` is the packet's bytes *and what follows them in the buffer* (at least :data:`SPAN`
bytes): l3fwd reads past a short frame, so the model must be told what is there.  ``port`` is
the Tx port or None for a drop (``reason``: ``"bad_ipv4_header"`` or ``"ttl_exceeded"``);
``out`` the frame as it leaves (``length`` bytes).
"""
from __future__ import annotations

SPAN = 66
MAX_ETHPORTS = 32


def _enabled_for_routes(mask: int, port: int) -> bool:
    return bool((1 << (port & 31)) & mask)


class Model:
    def __init__(self, lookup: str, portmask: int, v4=(), v6=(), *, ipv6_em: bool = False,
                 eth_dest: dict | None = None, src_macs: dict | None = None,
                 strict: bool = False):
        self.lookup, self.mask, self.strict = lookup, portmask, strict
        self.lpm4: dict = {}              # (prefix, depth) -> port, the last one added wins
        self.lpm6: dict = {}
        self.em4: dict = {}
        self.em6: dict = {}
        if lookup in ("lpm", "fib"):
            for r in v4:
                if _enabled_for_routes(portmask, r.port):
                    self.lpm4[self._masked(r.addr, r.depth)] = r.port
            for r in v6:
                if _enabled_for_routes(portmask, r.port):
                    self.lpm6[self._masked(r.addr, r.depth)] = r.port
        elif not ipv6_em:
            for r in v4:
                if _enabled_for_routes(portmask, r.port):
                    self.em4[bytes((0, r.proto, 0, 0)) + r.src + r.dst +
                             r.src_port.to_bytes(2, "big") + r.dst_port.to_bytes(2, "big")] = r.port
        else:
            for r in v6:
                if _enabled_for_routes(portmask, r.port):
                    self.em6[bytes((0, 0, r.proto, 0)) + r.src + r.dst +
                             r.src_port.to_bytes(2, "big") + r.dst_port.to_bytes(2, "big") +
                             bytes(8)] = r.port
        eth_dest = eth_dest or {}
        self.dst_mac = {p: eth_dest.get(p, bytes((2, 0, 0, 0, 0, p))) for p in range(MAX_ETHPORTS)}
        self.src_mac = dict(src_macs or {})

    @staticmethod
    def _masked(addr: bytes, depth: int):
        bits = len(addr) * 8
        v = int.from_bytes(addr, "big")
        return (v >> (bits - depth) << (bits - depth) if depth else 0, depth)

    # -- the steps ---------------------------------------------------------------------------
    def ptype(self, p) -> int:
        et = p[12] << 8 | p[13]
        if self.lookup != "em":
            return {0x0800: 0x90, 0x86DD: 0xE0}.get(et, 0)
        if et == 0x0800:
            if (p[14] & 0xF) * 4 != 20:
                return 0x30
            return 0x10 | {6: 0x100, 17: 0x200}.get(p[23], 0)
        if et == 0x86DD:
            return {6: 0x140, 17: 0x240}.get(p[20], 0xE0)
        return 0

    @staticmethod
    def _longest(table: dict, addr: bytes):
        bits = len(addr) * 8
        v = int.from_bytes(addr, "big")
        best = None
        for (pre, d), port in table.items():
            if d == 0 or (v >> (bits - d) << (bits - d)) == pre:
                if best is None or d > best[0]:
                    best = (d, port)
        return None if best is None else best[1]

    def destination(self, p, pt: int, rx: int) -> int:
        if self.lookup == "em":
            l4, l3 = pt & 0x300, pt & 0xF0
            if l4 and l3 == 0x10:
                key = bytes((0, p[23], 0, 0)) + bytes(p[26:38])
                hit = self.em4.get(key)
            elif l4 and l3 == 0x40:
                key = bytes((0, 0, p[20], 0)) + bytes(p[22:58]) + bytes(8)
                hit = self.em6.get(key)
            else:
                return rx
            if hit is None or hit >= MAX_ETHPORTS or not (self.mask >> hit) & 1:
                return rx
            return hit
        if pt & 0x10:
            hit = self._longest(self.lpm4, bytes(p[30:34]))
        elif pt & 0x40 or self.lookup == "fib":
            hit = self._longest(self.lpm6, bytes(p[38:54]))
        else:
            hit = None
        return rx if hit is None else hit

    def forward(self, room, length: int, rx: int):
        p = bytearray(room)
        assert len(p) >= SPAN, "give the model the bytes after the frame too"
        pt = self.ptype(p)
        d = self.destination(p, pt, rx)
        reason = None
        p[0:6] = self.dst_mac[d]
        p[6:12] = self.src_mac.get(d, bytes(6))
        if pt & 0x10:
            ttl = p[22]
            if self.strict:
                # RFC 1624: HC' = ~(~HC + ~m + m') over the TTL/protocol word
                m_old = ttl << 8 | p[23]
                m_new = ((ttl - 1) % 256) << 8 | p[23]
                hc = p[24] << 8 | p[25]
                s = (~hc & 0xFFFF) + (~m_old & 0xFFFF) + m_new
                while s >> 16:
                    s = (s & 0xFFFF) + (s >> 16)
                c = ~s & 0xFFFF
                p[24], p[25] = c >> 8, c & 0xFF
            else:
                c = ((p[24] | p[25] << 8) + 1) % 65536      # the raw field, as the CPU sees it
                p[24], p[25] = c & 0xFF, c >> 8
            p[22] = (ttl - 1) % 256
            if not 0x45 <= p[14] <= 0x4F or (p[16] << 8 | p[17]) < 20:
                reason = "bad_ipv4_header"
            elif self.strict and ttl <= 1:
                reason = "ttl_exceeded"
        elif self.strict and pt & 0x40:
            if p[21] <= 1:
                reason = "ttl_exceeded"
            else:
                p[21] -= 1
        if reason is not None:
            return None, reason, None
        return d, None, bytes(p[:length])
