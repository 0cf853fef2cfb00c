"""Plain-Python models of the example stages (examples/flow_counter.py, acl_firewall.py,
nat44.py), written from their docstrings over frame bytes: what each packet becomes (its
bytes out, or a drop reason) and what the counters say."""
from __future__ import annotations

import ipaddress
import struct

VLAN_TPIDS = (0x8100, 0x88A8, 0x9100, 0x9200)


def be16(b, o):
    return struct.unpack_from("!H", b, o)[0]


def l3_of(f):
    """``(ethertype, l3 offset)`` after up to two VLAN tags, or None when cut off."""
    if len(f) < 14:
        return None
    et, o = be16(f, 12), 14
    for _ in range(2):
        if et not in VLAN_TPIDS:
            break
        if len(f) < o + 4:
            return None
        et, o = be16(f, o + 2), o + 4
    return et, o


def ipv4_hdr(f, o):
    """The IPv4 header's length at ``o``, or None (cut off, version not 4, IHL < 5)."""
    if len(f) < o + 20 or f[o] >> 4 != 4 or f[o] & 15 < 5 or len(f) < o + (f[o] & 15) * 4:
        return None
    return (f[o] & 15) * 4


def is_fragment(f, o):
    return be16(f, o + 6) & 0x3FFF != 0


# -- flow counter ----------------------------------------------------------------------------
def flow_model(frames, entries):
    """``(counters, {key: [packets, bytes]})``; ``entries`` the table's exact capacity."""
    c = dict.fromkeys(("packets", "ipv4", "ipv6", "other", "malformed", "new_flows",
                       "table_full"), 0)
    flows = {}
    for f in frames:
        c["packets"] += 1
        r = l3_of(f)
        if r is None:
            c["malformed"] += 1
            continue
        et, o = r
        if et == 0x0800:
            hl = ipv4_hdr(f, o)
            if hl is None:
                c["malformed"] += 1
                continue
            ver, proto, src, dst = 4, f[o + 9], f[o + 12:o + 16] + bytes(12), \
                f[o + 16:o + 20] + bytes(12)
            l4 = None if is_fragment(f, o) else o + hl
        elif et == 0x86DD:
            if len(f) < o + 40:
                c["malformed"] += 1
                continue
            ver, proto, src, dst, l4 = 6, f[o + 6], f[o + 8:o + 24], f[o + 24:o + 40], o + 40
        else:
            c["other"] += 1
            continue
        ports = bytes(4)
        if l4 is not None and proto in (6, 17, 132):
            if len(f) < l4 + 4:
                c["malformed"] += 1
                continue
            ports = f[l4:l4 + 4]
        c["ipv4" if ver == 4 else "ipv6"] += 1
        key = bytes([ver, proto]) + ports + bytes(2) + src + dst
        if key not in flows:
            if len(flows) >= entries:
                c["table_full"] += 1
                continue
            c["new_flows"] += 1
            flows[key] = [0, 0]
        flows[key][0] += 1
        flows[key][1] += len(f)
    return c, flows


# -- ACL -------------------------------------------------------------------------------------
def _in_range(spec, port):
    if spec is None:
        return True
    lo, hi = (spec, spec) if isinstance(spec, int) else spec
    return port is not None and lo <= port <= hi


def acl_match(rules, src, dst, proto, sport, dport):
    names = {"any": None, "icmp": 1, "tcp": 6, "udp": 17}
    for i, r in enumerate(rules):
        p = r.get("proto", "any")
        p = names.get(p, p) if isinstance(p, str) else p
        if (ipaddress.IPv4Address(src) in ipaddress.IPv4Network(r.get("src", "0.0.0.0/0"))
                and ipaddress.IPv4Address(dst) in ipaddress.IPv4Network(r.get("dst", "0.0.0.0/0"))
                and (p is None or p == proto)
                and _in_range(r.get("sport"), sport) and _in_range(r.get("dport"), dport)):
            return i
    return len(rules)


def acl_model(frames, rules, default, non_ipv4):
    """``(verdicts, counters, drops, hits)``: a verdict per frame, "permit" or a reason."""
    c = dict.fromkeys(("permitted", "denied", "not_ipv4", "malformed"), 0)
    drops = dict.fromkeys(("denied", "malformed", "not_ipv4", "invalid"), 0)
    hits = [0] * (len(rules) + 1)
    out = []

    def drop(reason):
        drops[reason] += 1
        out.append(reason)

    for f in frames:
        r = l3_of(f)
        if r is not None and r[0] != 0x0800:
            c["not_ipv4"] += 1
            out.append("permit") if non_ipv4 == "permit" else drop("not_ipv4")
            continue
        hl = None if r is None else ipv4_hdr(f, r[1])
        if hl is None:
            c["malformed"] += 1
            drop("malformed")
            continue
        o = r[1]
        proto = f[o + 9]
        sport = dport = None
        if proto in (6, 17) and be16(f, o + 6) & 0x1FFF == 0:
            if len(f) < o + hl + 4:
                c["malformed"] += 1
                drop("malformed")
                continue
            sport, dport = be16(f, o + hl), be16(f, o + hl + 2)
        i = acl_match(rules, f[o + 12:o + 16], f[o + 16:o + 20], proto, sport, dport)
        hits[i] += 1
        act = rules[i]["action"] if i < len(rules) else default
        if act == "deny":
            c["denied"] += 1
            drop("denied")
        else:
            c["permitted"] += 1
            out.append("permit")
    return out, c, drops, hits


# -- NAT44 -----------------------------------------------------------------------------------
def ones_sum(b):
    """RFC 1071's folded 16-bit one's-complement sum (not inverted)."""
    b = bytes(b) + bytes(len(b) & 1)
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _fix_cksum(old_region, new_region, at):
    """The checksum for ``new_region`` (its checksum field at ``at``, still the old value)
    that keeps the region's one's-complement sum what it was in ``old_region`` -- for a
    correct input (sum 0xFFFF) the full recomputation; for a wrong one, the same error
    carried over.  0 and 0xFFFF are the same number; an update never gives 0xFFFF."""
    z = bytearray(new_region)
    z[at:at + 2] = b"\0\0"
    s = ones_sum(old_region) + (~ones_sum(z) & 0xFFFF)
    s = (s & 0xFFFF) + (s >> 16)
    return 0 if s == 0xFFFF else s


class NatModel:
    """Endpoint-independent NAPT as nat44.py's docstring states it."""

    def __init__(self, pool, ports, entries):
        net = ipaddress.IPv4Network(pool)
        self.base, self.lo, self.nports = int(net.network_address), ports[0], \
            ports[1] - ports[0] + 1
        self.capacity = min(net.num_addresses * self.nports, entries)
        self.in2out, self.out2in, self.next = {}, {}, 0
        self.drops = dict.fromkeys(("no_mapping", "pool_exhausted", "table_full",
                                    "unsupported", "fragment", "malformed", "not_ipv4",
                                    "invalid"), 0)
        self.c = dict.fromkeys(("out", "in", "new_mappings"), 0)

    def translate(self, f, inside):
        """The frame's bytes after translation, or a drop reason (a str)."""
        r = l3_of(f)
        if r is None:
            return "malformed"
        et, l3 = r
        if et != 0x0800:
            return "not_ipv4"
        hl = ipv4_hdr(f, l3)
        if hl is None:
            return "malformed"
        if is_fragment(f, l3):
            return "fragment"
        proto, l4 = f[l3 + 9], l3 + hl
        if proto not in (1, 6, 17):
            return "unsupported"
        size, ck_off = {6: (20, 16), 17: (8, 6), 1: (8, 2)}[proto]
        port_off = 4 if proto == 1 else (0 if inside else 2)
        if len(f) < l4 + size:
            return "malformed"
        if proto == 1 and f[l4] != (8 if inside else 0):
            return "unsupported"
        a_off = 12 if inside else 16
        addr, port = f[l3 + a_off:l3 + a_off + 4], be16(f, l4 + port_off)
        k = (proto, addr, port)
        if inside:
            if k not in self.in2out:
                if self.next >= self.capacity:
                    return "pool_exhausted"
                n = self.next
                pub = ((self.base + n // self.nports).to_bytes(4, "big"),
                       self.lo + n % self.nports)
                self.in2out[k], self.out2in[(proto, *pub)] = pub, (addr, port)
                self.next += 1
                self.c["new_mappings"] += 1
            to = self.in2out[k]
        else:
            if k not in self.out2in:
                return "no_mapping"
            to = self.out2in[k]
        g = bytearray(f)
        g[l3 + a_off:l3 + a_off + 4] = to[0]
        struct.pack_into("!H", g, l4 + port_off, to[1])
        end = l3 + be16(f, l3 + 2)            # the L4 checksum covers up to total_length
        struct.pack_into("!H", g, l3 + 10, _fix_cksum(f[l3:l4], g[l3:l4], 10))
        if not (proto == 17 and be16(f, l4 + 6) == 0):
            ph = (lambda b: b[l3 + 12:l3 + 20] + struct.pack("!HH", proto, end - l4)) \
                if proto != 1 else (lambda b: b"")
            pre = len(ph(f))
            ck = _fix_cksum(ph(f) + f[l4:end], ph(g) + g[l4:end], pre + ck_off)
            struct.pack_into("!H", g, l4 + ck_off, 0xFFFF if proto == 17 and ck == 0 else ck)
        self.c["in" if not inside else "out"] += 1
        return bytes(g)

    def run(self, frames, inside):
        out = []
        for f in frames:
            r = self.translate(f, inside)
            if isinstance(r, str):
                self.drops[r] += 1
            else:
                out.append(r)
        return out
