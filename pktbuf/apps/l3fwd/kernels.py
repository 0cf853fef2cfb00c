"""l3fwd's per-packet work as a stage: classify, look up, the RFC 1812 step, the Ethernet
rewrite -- what DPDK 22.11's l3fwd does on x86 (``examples/l3fwd``; docs/l3fwd.md has the
facts with their source lines).

:func:`l3fwd_stage` follows the stage convention (:mod:`pktbuf.apps.stage.abi`) and its
``state`` is the tuple :func:`pktbuf.apps.l3fwd.app.make_state` builds, one per lcore::

    (cfg, lpm4, lpm6, em4, em6, eth, key, ips, hop, dat)

``cfg`` int64[CFG_WORDS]; ``lpm4``/``lpm6``: the LPM tables' blocks (also FIB's: ``rte_fib``
gives the longest-prefix answer of the same routes); ``em4``/``em6``: the EM hash tables'
blocks (keys of 16 / 48 bytes, data = out port); ``eth`` uint8[ports, 12]: per port the
destination MAC then the port's own MAC (l3fwd's ``val_eth``); ``key`` uint8[EM_GROUP, 64]
(EM keys: row 0 for a single lookup, all rows for a group's), ``ips`` / ``hop`` int64[4] (LPM's
groups of four), ``dat`` uint64[EM_GROUP + 1] (a group's data and hit mask): this lcore's
scratch.

The burst is worked through in DPDK's phases: the software packet type of every packet
(``lpm_parse_ptype`` / ``em_parse_ptype``, written to ``mbuf.packet_type`` as l3fwd's Rx
callback does), then every destination (LPM: groups of four through ``lpm_lookupx4`` when all
four are IPv4, as ``l3fwd_lpm_sse.h``; EM: groups of eight of one type through one bulk lookup,
as ``l3fwd_em_hlm.h``), then per packet the RFC 1812 step and the rewrite.
A packet's fate depends on that packet only, so the phases change no result; they are there
to keep the lookups of a group independent.

Nothing looks at the frame's length, as in DPDK: the bytes read beyond a short frame are the
data room's (see docs/l3fwd.md, "Short frames").
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...net.hash.crc import load_u64_at, store_u64_at
from ...net.hash.lookup import hash_lookup_bulk_data, hash_lookup_data
from ...net.lpm.lpm4 import lpm_lookup, lpm_lookupx4
from ...net.lpm.lpm6 import lpm6_lookup
from ...rawmem import addr_u8
from ..stage.abi import stage_drop

# cfg words
C_LOOKUP = 0        # LOOKUP_*
C_STRICT = 1        # 1: --ttl-expiry (drop TTL/hop limit <= 1, RFC 1624 checksum update)
C_PORTMASK = 2      # -p
CFG_WORDS = 8

LOOKUP_LPM, LOOKUP_EM, LOOKUP_FIB = 0, 1, 2
LOOKUPS = ("lpm", "em", "fib")

# RTE_PTYPE_* values l3fwd's parsers produce (lib/mbuf/rte_mbuf_ptype.h)
PT_L3_IPV4 = 0x10
PT_L3_IPV4_EXT = 0x30
PT_L3_IPV6 = 0x40
PT_L3_IPV4_EXT_UNKNOWN = 0x90
PT_L3_IPV6_EXT_UNKNOWN = 0xE0
PT_L3_MASK = 0xF0
PT_L4_TCP = 0x100
PT_L4_UDP = 0x200

MAX_ETHPORTS = 32   # RTE_MAX_ETHPORTS
EM_GROUP = 8        # EM_HASH_LOOKUP_COUNT (l3fwd_em_hlm.h)

COUNTERS = ("ipv4", "ipv6", "other")
K_IPV4, K_IPV6, K_OTHER = range(3)
DROP_REASONS = ("bad_ipv4_header", "ttl_exceeded")
D_BAD_HEADER, D_TTL = range(2)

# how far into the frame l3fwd reads or writes: EM's IPv6 key ends at byte 65
SPAN = 66


@kernel(inline="always")
def lpm_parse_ptype(p):
    """``lpm_parse_ptype``: the EtherType alone decides."""
    et = (np.int64(p[12]) << 8) | np.int64(p[13])
    if et == 0x0800:
        return PT_L3_IPV4_EXT_UNKNOWN
    if et == 0x86DD:
        return PT_L3_IPV6_EXT_UNKNOWN
    return 0


@kernel(inline="always")
def em_parse_ptype(p):
    """``em_parse_ptype``: IPv4 by IHL (the version nibble is not read), IPv6 by the first
    next header (extension headers are not walked)."""
    et = (np.int64(p[12]) << 8) | np.int64(p[13])
    if et == 0x0800:
        if (np.int64(p[14]) & 0xF) * 4 == 20:
            proto = p[23]
            if proto == 6:
                return PT_L3_IPV4 | PT_L4_TCP
            if proto == 17:
                return PT_L3_IPV4 | PT_L4_UDP
            return PT_L3_IPV4
        return PT_L3_IPV4_EXT
    if et == 0x86DD:
        nh = p[20]
        if nh == 6:
            return PT_L3_IPV6 | PT_L4_TCP
        if nh == 17:
            return PT_L3_IPV6 | PT_L4_UDP
        return PT_L3_IPV6_EXT_UNKNOWN
    return 0


@kernel(inline="always")
def _be32(p, o):
    return (np.int64(p[o]) << 24) | (np.int64(p[o + 1]) << 16) | \
        (np.int64(p[o + 2]) << 8) | np.int64(p[o + 3])


@kernel(inline="always")
def _lpm4_dst(lpm4, p, rxp):
    r = lpm_lookup(lpm4, _be32(p, 30))
    return (r & 0xFFFF) if r >= 0 else rxp


@kernel(inline="always")
def _lpm6_dst(lpm6, base, rxp):
    r = lpm6_lookup(lpm6, addr_u8(base + 38, 16))
    return (r & 0xFFFF) if r >= 0 else rxp


@kernel(inline="always")
def _enabled(mask, port):
    return port < MAX_ETHPORTS and (mask >> port) & 1 == 1


# the key words' masks, as l3fwd's mask0 / mask1 (little-endian: byte 0 is the low byte)
_KEY4_MASK0 = np.uint64(0xFFFFFFFF0000FF00)     # TTL, checksum out; protocol, source kept
_KEY6_MASK0 = np.uint64(0xFFFFFFFF00FF0000)     # payload length, hop limit out; next header


@kernel(inline="always")
def _key4(key, p):
    """l3fwd's ``ipv4_5tuple_host`` key: bytes 22..37 from the TTL on, masked to the protocol,
    addresses and ports -- two 8-byte loads and an AND, as l3fwd's 16-byte load and mask."""
    store_u64_at(key, 0, load_u64_at(p, 22) & _KEY4_MASK0)
    store_u64_at(key, 8, load_u64_at(p, 30))


@kernel(inline="always")
def _key6(key, p):
    """``ipv6_5tuple_host``: bytes 18..65 from the payload length on, masked to the next
    header, addresses and ports (the last 8 bytes zero)."""
    store_u64_at(key, 0, load_u64_at(p, 18) & _KEY6_MASK0)
    for w in range(1, 5):
        store_u64_at(key, 8 * w, load_u64_at(p, 18 + 8 * w))
    store_u64_at(key, 40, np.uint64(0))


@kernel
def em_dst(em4, em6, key, p, pt, rxp, mask):
    """``em_get_dst_port``: exact match of the masked 5-tuple for IPv4 (IHL 5) / IPv6 with TCP
    or UDP; a miss, another type, or a hit on a disabled port gives ``rxp``."""
    l4 = pt & (PT_L4_TCP | PT_L4_UDP)
    l3 = pt & PT_L3_MASK
    if l4 == 0 or (l3 != PT_L3_IPV4 and l3 != PT_L3_IPV6):
        return rxp
    if l3 == PT_L3_IPV4:
        _key4(key, p)
        pos, data = hash_lookup_data(em4, key)
    else:
        _key6(key, p)
        pos, data = hash_lookup_data(em6, key)
    if pos < 0:
        return rxp
    nh = np.int64(data) & 0xFFFF
    return nh if _enabled(mask, nh) else rxp


@kernel
def em_dst_group(em4, em6, keys, dat, mb, pkts, j, dest, rxp, mask):
    """``l3fwd_em_hlm.h``'s group of ``EM_GROUP`` packets from ``pkts[j]``: when the AND of
    their types is IPv4 (or IPv6) with TCP (or UDP), one ``hash_lookup_bulk_data`` for all of
    them (``em_get_dst_port_ipv4xN`` / ``ipv6xN``); False (nothing written) otherwise, and the
    caller looks each up on its own.  ``keys``: uint8[EM_GROUP, >= 48]; ``dat``: uint64[>=
    EM_GROUP + 1] (the data, then the hit mask).  The answers are single lookups' answers."""
    t = np.int64(PT_L3_MASK | PT_L4_TCP | PT_L4_UDP)
    for k in range(EM_GROUP):
        t &= np.int64(mb[pkts[j + k]].packet_type)
    if t & (PT_L4_TCP | PT_L4_UDP) == 0:
        return False
    l3 = t & PT_L3_MASK
    if l3 != PT_L3_IPV4 and l3 != PT_L3_IPV6:
        return False
    for k in range(EM_GROUP):
        m = mb[pkts[j + k]]
        p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), SPAN)
        if l3 == PT_L3_IPV4:
            _key4(keys[k], p)
        else:
            _key6(keys[k], p)
    tbl = em4 if l3 == PT_L3_IPV4 else em6
    if hash_lookup_bulk_data(tbl, keys, EM_GROUP, dat[EM_GROUP:EM_GROUP + 1], dat) < 0:
        return False
    hm = dat[EM_GROUP]
    for k in range(EM_GROUP):
        d = rxp
        if (hm >> np.uint64(k)) & np.uint64(1):
            nh = np.int64(dat[k]) & 0xFFFF
            if _enabled(mask, nh):
                d = nh
        dest[j + k] = d
    return True


@kernel(inline="always")
def rfc1812(p, pt, d, strict):
    """``rfc1812_process`` on an IPv4-typed packet going to ``d``: TTL - 1 (mod 256), the raw
    little-endian checksum field + 1, and ``stage_drop`` for version_ihl outside 0x45..0x4F
    or total_length < 20.  ``strict`` (``--ttl-expiry``): a TTL <= 1 drops, and the checksum
    gets RFC 1624's update instead.  Other types: IPv6's hop limit is untouched (strict:
    hop limit <= 1 drops, else it is decremented)."""
    if pt & PT_L3_IPV4:
        ttl = np.int64(p[22])
        if strict:
            old = (ttl << 8) | np.int64(p[23])
            new = (((ttl - 1) & 0xFF) << 8) | np.int64(p[23])
            hc = (np.int64(p[24]) << 8) | np.int64(p[25])
            s = ((~hc) & 0xFFFF) + ((~old) & 0xFFFF) + new
            s = (s & 0xFFFF) + (s >> 16)
            s = (s & 0xFFFF) + (s >> 16)
            c = (~s) & 0xFFFF
            p[24] = (c >> 8) & 0xFF
            p[25] = c & 0xFF
        else:
            c = ((np.int64(p[24]) | (np.int64(p[25]) << 8)) + 1) & 0xFFFF
            p[24] = c & 0xFF
            p[25] = c >> 8
        p[22] = (ttl - 1) & 0xFF
        vihl = (np.int64(p[14]) - 0x45) & 0xFF
        if vihl > 10 or (p[16] == 0 and p[17] < 20):
            return stage_drop(D_BAD_HEADER)
        if strict and ttl <= 1:
            return stage_drop(D_TTL)
    elif strict and pt & PT_L3_IPV6:
        hl = np.int64(p[21])
        if hl <= 1:
            return stage_drop(D_TTL)
        p[21] = hl - 1
    return d


@kernel
def l3fwd_stage(state, dom, rx_port, pkts, n, dest, cnt):
    """l3fwd on one burst from ``rx_port``: ``dest[i]`` = the Tx port, or a drop."""
    cfg, lpm4, lpm6, em4, em6, eth, key, ips, hop, dat = state
    mode = cfg[C_LOOKUP]
    strict = cfg[C_STRICT] != 0
    mask = cfg[C_PORTMASK]
    mb = dom.mb
    rxp = np.int64(rx_port)
    # 1. packet types (l3fwd's --parse-ptype callback)
    for i in range(n):
        m = mb[pkts[i]]
        p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), SPAN)
        if mode == LOOKUP_EM:
            pt = em_parse_ptype(p)
        else:
            pt = lpm_parse_ptype(p)
        m.packet_type = pt
        if pt & PT_L3_IPV4:
            cnt[K_IPV4] += 1
        elif pt & PT_L3_IPV6:
            cnt[K_IPV6] += 1
        else:
            cnt[K_OTHER] += 1
    # 2. destinations
    if mode == LOOKUP_EM:
        # groups of EM_GROUP of one type through one bulk lookup, as l3fwd_em_hlm.h; any other
        # group and the last n % EM_GROUP packets one at a time
        n8 = n - n % EM_GROUP
        k1 = key[0]
        for j in range(0, n, EM_GROUP):
            if j < n8 and em_dst_group(em4, em6, key, dat, mb, pkts, j, dest, rxp, mask):
                continue
            for i in range(j, min(j + EM_GROUP, n)):
                m = mb[pkts[i]]
                p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), SPAN)
                dest[i] = em_dst(em4, em6, k1, p, np.int64(m.packet_type), rxp, mask)
    else:
        fib = mode == LOOKUP_FIB
        n4 = n - (n & 3)
        # aligned groups of four, as l3fwd_lpm_sse.h: a group that is all IPv4 goes through
        # lpm_lookupx4, any other group (and the last n % 4 packets) one packet at a time
        for j in range(0, n, 4):
            if j < n4 and (mb[pkts[j]].packet_type & mb[pkts[j + 1]].packet_type &
                           mb[pkts[j + 2]].packet_type & mb[pkts[j + 3]].packet_type &
                           PT_L3_IPV4):
                for k in range(4):
                    m = mb[pkts[j + k]]
                    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), SPAN)
                    ips[k] = _be32(p, 30)
                lpm_lookupx4(lpm4, ips, hop, rxp)
                for k in range(4):
                    dest[j + k] = hop[k] & 0xFFFF
                continue
            for i in range(j, min(j + 4, n)):
                m = mb[pkts[i]]
                base = np.int64(m.buf_addr) + np.int64(m.data_off)
                p = addr_u8(base, SPAN)
                pt = m.packet_type
                if pt & PT_L3_IPV4:
                    dest[i] = _lpm4_dst(lpm4, p, rxp)
                elif fib or pt & PT_L3_IPV6:
                    # FIB looks every non-IPv4 frame up in the IPv6 table (l3fwd_fib.c)
                    dest[i] = _lpm6_dst(lpm6, base, rxp)
                else:
                    dest[i] = rxp
    # 3. the RFC 1812 step and the Ethernet rewrite
    for i in range(n):
        m = mb[pkts[i]]
        p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), SPAN)
        d = np.int64(dest[i])
        if d >= eth.shape[0]:
            continue          # a route to a port past the table (l3fwd's 1 << port wraps): invalid
        for b in range(12):
            p[b] = eth[d, b]
        dest[i] = rfc1812(p, np.int64(m.packet_type), d, strict)
