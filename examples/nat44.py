"""Source NAT44 between an inside and an outside port, checksums updated incrementally.

    python examples/nat44.py
    pktbuf fwd --stage examples/nat44.py:stage ...      # port 0 inside, port 1 outside

A packet received on the inside port leaves with its source address and port (TCP, UDP) or
ICMP echo identifier replaced by a public address and port from the pool; one received on
the outside port is translated back if its destination matches a mapping, and dropped as
``no_mapping`` otherwise.  Mappings are endpoint-independent (RFC 4787: one public
address/port per inside address/port and protocol, whatever the destination) and kept in two
``pktbuf.Hash`` tables, one each way, keyed by ``protocol, 0, port (2 bytes), address (4)``
with the other side's ``address << 16 | port`` as data.  Public endpoints are handed out in
order -- address by address, port by port in ``ports`` -- and never expire in this example;
when they are used up new flows are dropped as ``pool_exhausted``.  Both tables are written
by the inside direction only: run both streams on one lcore.

The IPv4 header checksum and the TCP, UDP and ICMP checksums are updated with RFC 1624's
eqn. 3 for each 16-bit word that changed (the address also changes the TCP/UDP
pseudo-header); a UDP checksum of 0 (none, RFC 768) stays 0, and an update that gives 0
is sent as 0xFFFF.  An update keeps an error: a packet that arrived with a bad checksum
leaves with a bad one.  ICMP: echo requests go out, echo replies come back (RFC 5508's
query mapping by identifier); other ICMP messages, other protocols, fragments (which need
reassembly to find their ports) and frames that are not IPv4 are dropped with a reason.
"""
import ipaddress
import os
import sys

import numpy as np
from numba import njit

import pktbuf
from pktbuf.apps.stage.abi import stage_drop
from pktbuf.apps.stage.api import Stage, StageRunner
from pktbuf.kernels import (cksum_update16, cksum_update32, hash_add_key_data, hash_del_key,
                            hash_lookup_data, hdr_read, pktmbuf_write)
from pktbuf.ethdev.layout import MAX_PORTS
from pktbuf.net.hdr.ether import ETHER_TYPE_IPV4, ether_l3_off
from pktbuf.net.hdr.icmp import ICMP_CKSUM, ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST, ICMP_IDENT
from pktbuf.net.hdr.ipv4 import (IPV4_CKSUM, IPV4_DST, IPV4_SRC, ipv4_hdr_len, ipv4_hdr_ptr,
                                 ipv4_is_fragment, ipv4_proto)
from pktbuf.net.hdr.l4 import TCP_CKSUM, TCP_DST_PORT, TCP_SRC_PORT, UDP_CKSUM
from pktbuf.net.hdr.mem import load_be16, load_be32, stack_u8, store_be16, store_be32

COUNTERS = ("out", "in", "new_mappings")
K_OUT, K_IN, K_NEW = range(3)
DROP_REASONS = ("no_mapping", "pool_exhausted", "table_full", "unsupported", "fragment",
                "malformed", "not_ipv4")
D_NOMAP, D_EXHAUSTED, D_FULL, D_UNSUPPORTED, D_FRAG, D_BAD, D_NOT4 = range(7)
# cfg words
C_INSIDE, C_BASE, C_NPORTS, C_PORT_LO, C_CAPACITY, C_NEXT = range(6)
TCP, UDP, ICMP = 6, 17, 1


@njit(cache=True, nogil=True)
def _key(key, proto, port, addr):
    key[0] = proto
    key[1] = 0
    store_be16(key.ctypes.data + 2, port)
    store_be32(key.ctypes.data + 4, addr)


@njit(cache=True, nogil=True)
def _map_out(in2out, out2in, cfg, key, proto, addr, port):
    """``(public address << 16 | port, new)`` for an inside endpoint, the mapping made if
    there was none; or ``(a stage_drop value, False)``."""
    _key(key, proto, port, addr)
    pos, data = hash_lookup_data(in2out, key)
    if pos >= 0:
        return np.int64(data), False
    k = cfg[C_NEXT]
    if k >= cfg[C_CAPACITY]:
        return stage_drop(D_EXHAUSTED), False
    pub = ((cfg[C_BASE] + k // cfg[C_NPORTS]) << 16) | (cfg[C_PORT_LO] + k % cfg[C_NPORTS])
    rkey = stack_u8(8)
    _key(rkey, proto, pub & 0xFFFF, pub >> 16)
    if hash_add_key_data(out2in, rkey, (addr << 16) | port) < 0:
        return stage_drop(D_FULL), False
    if hash_add_key_data(in2out, key, pub) < 0:
        hash_del_key(out2in, rkey)
        return stage_drop(D_FULL), False
    cfg[C_NEXT] = k + 1
    return pub, True


@njit(cache=True, nogil=True)
def _commit(dom, h, off, n, p, buf):
    """Write back bytes that were gathered into ``buf`` (a header straddling segments)."""
    if p == buf.ctypes.data:
        pktmbuf_write(dom, h, off, n, p, n)


@njit(cache=True, nogil=True)
def translate(dom, h, inside, in2out, out2in, cfg, key, ipbuf, l4buf):
    """Translate packet ``h`` in place: 1 (translated), 2 (translated, new mapping) or a
    ``stage_drop`` value."""
    et, l3 = ether_l3_off(dom, h, 0, l4buf)
    if et != ETHER_TYPE_IPV4:
        return stage_drop(D_BAD if et < 0 else D_NOT4)
    ip = ipv4_hdr_ptr(dom, h, l3, ipbuf)
    if ip < 0:
        return stage_drop(D_BAD)
    if ipv4_is_fragment(ip):
        return stage_drop(D_FRAG)
    proto = ipv4_proto(ip)
    l4 = l3 + ipv4_hdr_len(ip)
    # the header bytes needed, where the port (source out, destination in) and checksum are
    port_off = TCP_SRC_PORT if inside else TCP_DST_PORT     # the same offsets in UDP
    if proto == TCP:
        size, ck_off = 20, TCP_CKSUM
    elif proto == UDP:
        size, ck_off = 8, UDP_CKSUM
    elif proto == ICMP:
        size, port_off, ck_off = 8, ICMP_IDENT, ICMP_CKSUM  # the identifier is the port
    else:
        return stage_drop(D_UNSUPPORTED)
    q = hdr_read(dom, h, l4, size, l4buf)
    if q < 0:
        return stage_drop(D_BAD)
    echo = ICMP_ECHO_REQUEST if inside else ICMP_ECHO_REPLY     # requests out, replies in
    if proto == ICMP and load_be16(q) >> 8 != echo:
        return stage_drop(D_UNSUPPORTED)
    addr_off = IPV4_SRC if inside else IPV4_DST
    addr, port = load_be32(ip + addr_off), load_be16(q + port_off)
    new = False
    if inside:
        to, new = _map_out(in2out, out2in, cfg, key, proto, addr, port)
        if to < 0:
            return to
    else:
        _key(key, proto, port, addr)
        pos, data = hash_lookup_data(out2in, key)
        if pos < 0:
            return stage_drop(D_NOMAP)
        to = np.int64(data)
    naddr, nport = to >> 16, to & 0xFFFF
    store_be16(ip + IPV4_CKSUM, cksum_update32(load_be16(ip + IPV4_CKSUM), addr, naddr))
    store_be32(ip + addr_off, naddr)
    ck = load_be16(q + ck_off)
    if not (proto == UDP and ck == 0):
        if proto != ICMP:                   # the pseudo-header holds the addresses
            ck = cksum_update32(ck, addr, naddr)
        ck = cksum_update16(ck, port, nport)
        store_be16(q + ck_off, 0xFFFF if proto == UDP and ck == 0 else ck)
    store_be16(q + port_off, nport)
    _commit(dom, h, l3, ipv4_hdr_len(ip), ip, ipbuf)
    _commit(dom, h, l4, size, q, l4buf)
    return 2 if new else 1


@njit(cache=True, nogil=True)
def nat44(state, dom, rx_port, pkts, n, dest, cnt):
    """Translate every packet of the burst: inside -> outside from the inside port, back
    from any other."""
    in2out, out2in, cfg = state
    key, ipbuf, l4buf = stack_u8(8), stack_u8(64), stack_u8(64)
    inside = rx_port == cfg[C_INSIDE]
    for i in range(n):
        r = translate(dom, pkts[i], inside, in2out, out2in, cfg, key, ipbuf, l4buf)
        if r < 0:
            dest[i] = r
            continue
        cnt[K_OUT if inside else K_IN] += 1
        if r == 2:
            cnt[K_NEW] += 1


def stage(inside_port: int = 0, pool: str = "203.0.113.4/30", ports=(1024, 65535),
          entries: int = 1 << 16) -> Stage:
    """A NAT44 whose inside is port ``inside_port`` (every other port is outside), handing
    out the addresses of the prefix ``pool`` with ``ports`` (a range, inclusive), at most
    ``entries`` mappings."""
    net = ipaddress.IPv4Network(pool)
    lo, hi = ports
    if not 0 <= inside_port < MAX_PORTS or not 0 <= lo <= hi <= 0xFFFF:
        raise pktbuf.InvalidArgument(f"inside_port in 0..{MAX_PORTS - 1}, ports a range in "
                                     "0..65535")
    cfg = np.zeros(8, np.int64)
    cfg[[C_INSIDE, C_BASE, C_NPORTS, C_PORT_LO]] = (inside_port, int(net.network_address),
                                                    hi - lo + 1, lo)
    cfg[C_CAPACITY] = min(net.num_addresses * (hi - lo + 1), entries)
    in2out, out2in = pktbuf.Hash(entries, 8), pktbuf.Hash(entries, 8)
    st = Stage(nat44, (in2out.block, out2in.block, cfg), counters=COUNTERS,
               drop_reasons=DROP_REASONS)
    st.tables = (in2out, out2in)
    return st


def mappings(st: Stage) -> list:
    """``[(proto, inside address, port, public address, port)]`` (read while no loop runs)."""
    out = []
    for key, pub in st.tables[0].items():
        a = ipaddress.IPv4Address
        out.append((key[0], a(key[4:8]), int.from_bytes(key[2:4], "big"), a(pub >> 16),
                    pub & 0xFFFF))
    return sorted(out)


def forward(st: Stage, frames, pool, ports, rx: int = 0, tx: int = 1):
    """Send ``frames`` (bytes) into loopback port ``rx``, run the stage's loop on the stream
    ``rx -> tx`` until it has received them all; what came out of ``tx`` (the mbufs freed)
    and the runner (its counters)."""
    ports[rx].tx_burst([pool.alloc().append_bytes(f) for f in frames])
    run = StageRunner(ports, st, [(rx, 0, tx)], idle_backoff=False)
    while run.port_counts(rx)["rx"] < len(frames):
        run.run(0.01)
    out = []
    while len(hs := ports[tx].rx_burst(32)):
        out += [pool.mbuf(int(h)).tobytes() for h in hs]
        pool.free_bulk(hs)
    return out, run


def main():
    import struct

    from pktbuf.net.cksum import api as ck     # whole-packet checksums, for checking

    def udp(src, sport, dst, dport, payload):   # an Ethernet/IPv4/UDP frame, checksums right
        a, b = ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 1, 0, 64, 17, 0, a, b)
        ip = ip[:10] + struct.pack("<H", ck.ipv4_cksum(ip)) + ip[12:]   # DPDK's byte order
        u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
        u = u[:6] + struct.pack("<H", ck.ipv4_udptcp_cksum(ip + u)) + u[8:]
        return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + u

    def fields(f):                              # (src, sport, dst, dport) of such a frame
        sport, dport = struct.unpack_from("!HH", f, 34)
        a = ipaddress.IPv4Address
        return str(a(f[26:30])), sport, str(a(f[30:34])), dport

    def show(f):
        ok = ck.ipv4_cksum_verify(f[14:]) and ck.ipv4_udptcp_cksum_verify(f[14:])
        src, sport, dst, dport = fields(f)
        return f"{src}:{sport} -> {dst}:{dport} (checksums {'good' if ok else 'BAD'})"

    pool = pktbuf.PktmbufPool(1024, cache_size=32)
    pp = pktbuf.Ports(pool)
    try:
        for i in range(2):
            pp.open(f"net_ring{i}")         # port 0 inside, port 1 outside
        st = stage()
        req = [udp(f"10.0.0.{h}", 5000 + h, "198.51.100.1", 53, b"query") for h in (1, 2, 1)]
        out, run = forward(st, req, pool, pp, 0, 1)
        print(f"inside -> outside: {len(out)} of {len(req)}; {run.counters()}")
        for a, b in zip(req, out):
            print(f"  {show(a)}  =>  {show(b)}")
        rep = [udp(*fields(f)[2:], *fields(f)[:2], b"answer") for f in out]   # the replies
        rep.append(udp("198.51.100.1", 53, "203.0.113.4", 9999, b"unsolicited"))   # no mapping
        back, run = forward(st, rep, pool, pp, 1, 0)
        print(f"outside -> inside: {len(back)} of {len(rep)}; {run.counters()}; "
              f"drops { {k: v for k, v in run.drop_counts().items() if v} }")
        for a, b in zip(rep, back):
            print(f"  {show(a)}  =>  {show(b)}")
        for proto, a, ap, b, bp in mappings(st):
            print(f"  mapping proto {proto} {a}:{ap} <-> {b}:{bp}")
    finally:
        pp.close()
    pool.cache_flush()
    print(f"pool back to {pool.avail_count}/{pool.n}")


if __name__ == "__main__":
    # the compiled loop imports the stage by its module's name, which __main__ is not
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import nat44
    nat44.main()
