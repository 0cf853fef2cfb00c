"""``rte_net_get_ptype`` as plain Python over bytes: slow, obvious, and the tests' reference.

:func:`get_ptype` reads the frame with bounds checks at every step (``need(off, n)``: the
bytes exist in the frame) and returns ``(ptype, lens)`` where ``lens`` holds only the header
lengths DPDK writes for that frame (keys of :data:`~.values.HL_NAMES`).  The rules are the
ones docs/net.md lists for lib/net/rte_net.c, written out again independently of
:mod:`.parse`; ethertypes and protocol numbers are plain wire-order numbers here, and the one
place where DPDK's little-endian view of an ethertype matters -- the tunnel test after a
non-IP header -- is spelled out.
"""
from __future__ import annotations

from . import values as V

IPV6_EXT = {0, 43, 44, 50, 51, 60}
L4 = {17: (V.PTYPE_L4_UDP, V.PTYPE_INNER_L4_UDP), 6: (V.PTYPE_L4_TCP, V.PTYPE_INNER_L4_TCP),
      132: (V.PTYPE_L4_SCTP, V.PTYPE_INNER_L4_SCTP)}


class _Stop(Exception):
    pass


def _swap16(x):
    return ((x & 0xFF) << 8) | (x >> 8)


def get_ptype(frame: bytes, layers: int = V.PTYPE_ALL_MASK):
    """``(ptype, {length name: value})`` of an Ethernet frame, as rte_net_get_ptype."""
    f = bytes(frame)
    lens = {}
    st = {"pt": 0}

    def need(off, n):
        if off + n > len(f):
            raise _Stop

    def be16(off):
        return (f[off] << 8) | f[off + 1]

    def walk():
        need(0, 14)
        lens["l2_len"] = 14
        if not layers & V.PTYPE_L2_MASK:
            return 0
        st["pt"] = V.PTYPE_L2_ETHER
        et = be16(12)
        off = 14
        if et in (0x8847, 0x8848):
            return st["pt"]
        if et == 0x8100:
            st["pt"] = V.PTYPE_L2_ETHER_VLAN
            need(off, 4)
            et = be16(off + 2)
            off += 4
            lens["l2_len"] = 18
        elif et == 0x88A8:
            st["pt"] = V.PTYPE_L2_ETHER_QINQ
            need(off + 4, 4)
            et = be16(off + 6)
            off += 8
            lens["l2_len"] = 22
        r = ip_and_l4(et, off, False)
        if r is None:
            return st["pt"]
        kind, proto, off, is_ethertype = r
        if kind != "none":
            return st["pt"]
        # no UDP/TCP/SCTP: a tunnel, maybe
        lens["l4_len"] = 0
        if not layers & V.PTYPE_TUNNEL_MASK:
            return st["pt"]
        # DPDK compares the ethertype's little-endian view with IP protocol numbers
        ipproto = _swap16(proto) if is_ethertype else proto
        start = off
        inner_et = None
        if ipproto == 47:
            try:
                need(off, 4)
            except _Stop:
                ipproto = None
            if ipproto is not None:
                top = f[off] >> 4
                glen = 0 if top & 4 else 4 + 4 * bin(top & 0xB).count("1")
                if glen:
                    inner_et = be16(off + 2)
                    st["pt"] |= V.PTYPE_TUNNEL_NVGRE if inner_et == 0x6558 else V.PTYPE_TUNNEL_GRE
                    off += glen
        elif ipproto == 4:
            st["pt"] |= V.PTYPE_TUNNEL_IP
            inner_et = 0x0800
        elif ipproto == 41:
            st["pt"] |= V.PTYPE_TUNNEL_IP
            inner_et = 0x86DD
        lens["tunnel_len"] = off - start
        lens["inner_l2_len"] = off - start
        if not layers & V.PTYPE_INNER_L2_MASK:
            return st["pt"]
        lens["inner_l2_len"] = 0
        # without a tunnel, DPDK goes on with the protocol it had, as an ethertype
        et = inner_et if inner_et is not None else (proto if is_ethertype else _swap16(proto))
        if et == 0x6558:
            need(off, 14)
            st["pt"] |= V.PTYPE_INNER_L2_ETHER
            et = be16(off + 12)
            off += 14
            lens["inner_l2_len"] = 14
        if et == 0x8100:
            st["pt"] = (st["pt"] & ~V.PTYPE_INNER_L2_MASK) | V.PTYPE_INNER_L2_ETHER_VLAN
            need(off, 4)
            et = be16(off + 2)
            off += 4
            lens["inner_l2_len"] += 4
        elif et == 0x88A8:
            st["pt"] = (st["pt"] & ~V.PTYPE_INNER_L2_MASK) | V.PTYPE_INNER_L2_ETHER_QINQ
            need(off + 4, 4)
            et = be16(off + 6)
            off += 8
            lens["inner_l2_len"] += 8
        r = ip_and_l4(et, off, True)
        if r is not None and r[0] == "none":
            lens["inner_l4_len"] = 0
        return st["pt"]

    def ip_and_l4(et, off, inner):
        """None: stop with the bits so far; else (kind, proto, off, proto_is_ethertype) with
        kind 'l4' (UDP/TCP/SCTP, lengths written) or 'none'."""
        sl3, sl4 = ("inner_l3_len", "inner_l4_len") if inner else ("l3_len", "l4_len")
        l3m = V.PTYPE_INNER_L3_MASK if inner else V.PTYPE_L3_MASK
        l4m = V.PTYPE_INNER_L4_MASK if inner else V.PTYPE_L4_MASK
        if not layers & l3m:
            return None
        if et == 0x0800:
            need(off, 20)
            vihl = f[off]
            if vihl == 0x45:
                st["pt"] |= V.PTYPE_INNER_L3_IPV4 if inner else V.PTYPE_L3_IPV4
            elif 0x46 <= vihl <= 0x4F:
                st["pt"] |= V.PTYPE_INNER_L3_IPV4_EXT if inner else V.PTYPE_L3_IPV4_EXT
            lens[sl3] = (vihl & 15) * 4
            hdr = off
            off += (vihl & 15) * 4
            if not layers & l4m:
                return None
            if be16(hdr + 6) & 0x3FFF:
                st["pt"] |= V.PTYPE_INNER_L4_FRAG if inner else V.PTYPE_L4_FRAG
                lens[sl4] = 0
                return None
            proto = f[hdr + 9]
        elif et == 0x86DD:
            need(off, 40)
            proto = f[off + 6]
            lens[sl3] = 40
            off += 40
            frag = False
            if proto in IPV6_EXT:
                st["pt"] |= V.PTYPE_INNER_L3_IPV6_EXT if inner else V.PTYPE_L3_IPV6_EXT
                start = off
                for _ in range(5):
                    if proto in (0, 43, 60):
                        try:
                            need(off, 2)
                        except _Stop:
                            return None
                        proto, off = f[off], off + (f[off + 1] + 1) * 8
                    elif proto == 44:
                        try:
                            need(off, 2)
                        except _Stop:
                            return None
                        proto, off, frag = f[off], off + 8, True
                        break
                    elif proto == 59:
                        proto = 0
                        break
                    else:
                        break
                else:
                    return None           # more than 5 extension headers: DPDK gives up
                lens[sl3] += off - start
            else:
                st["pt"] |= V.PTYPE_INNER_L3_IPV6 if inner else V.PTYPE_L3_IPV6
            if proto == 0 or not layers & l4m:
                return None
            if frag:
                st["pt"] |= V.PTYPE_INNER_L4_FRAG if inner else V.PTYPE_L4_FRAG
                lens[sl4] = 0
                return None
        else:
            return ("none", et, off, True)
        if proto not in L4:
            return ("none", proto, off, False)
        st["pt"] |= L4[proto][1 if inner else 0]
        if proto == 17:
            lens[sl4] = 8
        elif proto == 132:
            lens[sl4] = 12
        else:
            if off + 20 > len(f):
                keep = ((V.PTYPE_INNER_L2_MASK | V.PTYPE_INNER_L3_MASK) if inner
                        else (V.PTYPE_L2_MASK | V.PTYPE_L3_MASK))
                st["pt"] &= keep
                return None
            lens[sl4] = (f[off + 12] & 0xF0) >> 2
        return ("l4", proto, off, False)

    try:
        pt = walk()
    except _Stop:
        pt = st["pt"]
    return pt, lens
