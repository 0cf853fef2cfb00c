"""Per-flow packet and byte counters: a stage that keys every IPv4/IPv6 packet by its 5-tuple
in a ``pktbuf.Hash`` and counts packets and bytes per flow.

    python examples/flow_counter.py            # 3 flows through two net_ring ports
    pktbuf fwd --stage examples/flow_counter.py:stage ...

The key (40 bytes) is ``version, protocol, source port, destination port, 0, 0, source
address (16 bytes), destination address (16)``; IPv4 addresses take the first 4 bytes of
their field, the rest is zero.  Ports are read for TCP, UDP and SCTP (the first four bytes of
all three headers); fragments -- IPv4 with MF or an offset, IPv6 whose first next header is
the fragment header (44) -- and other protocols count with ports 0, so all the fragments of
a datagram land in one flow.  IPv6 extension headers are not walked: the protocol is the
first next header.  A frame's bytes are its ``pkt_len`` (Ethernet header included, no FCS).

The counters live in two int64 arrays indexed by the flow's *position* in the table (what
``hash_add_key`` / ``hash_lookup`` return, 0 .. entries - 1: DPDK's way of indexing user
arrays by ``rte_hash`` positions), so the table's data word is not needed.  New flows are
added from inside the stage; the table has one writer, so run the stage on one lcore (give
each worker its own table otherwise).  A new flow that finds the table full is counted under
``table_full`` and the packet is not counted in any flow.  Every packet is forwarded.
"""
import ipaddress
import os
import sys

import numpy as np
from numba import njit

import pktbuf
from pktbuf.apps.stage.api import Stage, StageRunner
from pktbuf.kernels import (addr_u8, hash_add_key_with_hash, hash_hash, hash_iterate,
                            hash_lookup_with_hash, hdr_read)
from pktbuf.net.hdr.ether import ETHER_TYPE_IPV4, ETHER_TYPE_IPV6, ether_l3_off
from pktbuf.net.hdr.ipv4 import ipv4_hdr_len, ipv4_hdr_ptr, ipv4_is_fragment
from pktbuf.net.hdr.ipv6 import ipv6_hdr_ptr
from pktbuf.net.hdr.mem import stack_u8

KEY_LEN = 40
COUNTERS = ("packets", "ipv4", "ipv6", "other", "malformed", "new_flows", "table_full")
K_PKTS, K_V4, K_V6, K_OTHER, K_BAD, K_NEW, K_FULL = range(len(COUNTERS))


@njit(cache=True, nogil=True)
def _copy(key, at, addr, n):
    """key[at:at + n] = the n bytes at address ``addr``."""
    src = addr_u8(addr, n)
    for j in range(n):
        key[at + j] = src[j]


@njit(cache=True, nogil=True)
def _ports(dom, h, off, proto, key, buf):
    """Copy the 4 port bytes of a TCP/UDP/SCTP header at ``off`` into the key: 0, or a
    negative code when the header is cut off."""
    if proto != 6 and proto != 17 and proto != 132:
        return 0
    q = hdr_read(dom, h, off, 4, buf)
    if q < 0:
        return q
    _copy(key, 2, q, 4)
    return 0


@njit(cache=True, nogil=True)
def flow_key(dom, h, key, buf):
    """Fill ``key`` with packet ``h``'s flow key: 4 or 6 (the IP version), 0 (not IP) or a
    negative code (a header is cut off)."""
    key[:] = 0
    et, l3 = ether_l3_off(dom, h, 0, buf)
    if et == ETHER_TYPE_IPV4:
        p = ipv4_hdr_ptr(dom, h, l3, buf)
        if p < 0:
            return p
        key[0] = 4
        key[1] = addr_u8(p, 20)[9]
        _copy(key, 8, p + 12, 4)
        _copy(key, 24, p + 16, 4)
        if ipv4_is_fragment(p):
            return 4
        rc = _ports(dom, h, l3 + ipv4_hdr_len(p), key[1], key, buf)
        return rc if rc < 0 else 4
    if et == ETHER_TYPE_IPV6:
        p = ipv6_hdr_ptr(dom, h, l3, buf)
        if p < 0:
            return p
        key[0] = 6
        key[1] = addr_u8(p, 40)[6]
        _copy(key, 8, p + 8, 32)
        rc = _ports(dom, h, l3 + 40, key[1], key, buf)
        return rc if rc < 0 else 6
    return min(et, 0)                       # not IP, or a negative code


@njit(cache=True, nogil=True)
def flow_counter(state, dom, rx_port, pkts, n, dest, cnt):
    """Count every packet of the burst in its flow's counters; leave ``dest`` as it is."""
    table, npkts, nbytes = state
    key = stack_u8(40)
    buf = stack_u8(64)
    for i in range(n):
        h = pkts[i]
        cnt[K_PKTS] += 1
        v = flow_key(dom, h, key, buf)
        if v <= 0:
            cnt[K_BAD if v < 0 else K_OTHER] += 1
            continue
        cnt[K_V4 if v == 4 else K_V6] += 1
        hh = hash_hash(table, key)
        pos = hash_lookup_with_hash(table, key, hh)
        if pos < 0:
            pos = hash_add_key_with_hash(table, key, hh)
            if pos < 0:                     # E_NOSPC: no room for a new flow
                cnt[K_FULL] += 1
                continue
            cnt[K_NEW] += 1
            npkts[pos] = 0
            nbytes[pos] = 0
        npkts[pos] += 1
        nbytes[pos] += dom.mb[h].pkt_len


def stage(entries: int = 1 << 16) -> Stage:
    """A flow counter for up to ``entries`` flows."""
    table = pktbuf.Hash(entries, KEY_LEN)
    state = (table.block, np.zeros(entries, np.int64), np.zeros(entries, np.int64))
    return Stage(flow_counter, state, counters=COUNTERS)


def decode_key(key: bytes) -> tuple:
    """``(proto, src, sport, dst, dport)`` of a flow key, addresses as ipaddress objects."""
    ver, proto = key[0], key[1]
    sport, dport = int.from_bytes(key[2:4], "big"), int.from_bytes(key[4:6], "big")
    if ver == 4:
        src, dst = ipaddress.IPv4Address(key[8:12]), ipaddress.IPv4Address(key[24:28])
    else:
        src, dst = ipaddress.IPv6Address(key[8:24]), ipaddress.IPv6Address(key[24:40])
    return proto, src, sport, dst, dport


def flows(st: Stage) -> dict:
    """Every flow of the stage's table: ``{key bytes: (packets, bytes)}`` (read from Python
    while no loop runs the stage: iterating is a writer-side operation)."""
    table, npkts, nbytes = st.state
    it, key, out = np.zeros(1, np.int64), np.zeros(KEY_LEN, np.uint8), {}
    while True:
        pos, _ = hash_iterate(table, it, key)
        if pos < 0:
            return out
        out[key.tobytes()] = (int(npkts[pos]), int(nbytes[pos]))


def top_flows(st: Stage, k: int = 10, by: str = "bytes") -> list:
    """The ``k`` largest flows by ``bytes`` or ``packets``: ``[(decoded key, packets,
    bytes)]``."""
    col = {"packets": 0, "bytes": 1}[by]
    rows = sorted(flows(st).items(), key=lambda kv: -kv[1][col])[:k]
    return [(decode_key(key), p, b) for key, (p, b) in rows]


def forward(st: Stage, frames, pool, ports, rx: int = 0, tx: int = 1) -> list:
    """Send ``frames`` (bytes) into loopback port ``rx``, run the stage's loop on the stream
    ``rx -> tx`` until it has received them all, and return what came out of ``tx`` (the
    mbufs freed) and the runner (its counters)."""
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
    pool = pktbuf.PktmbufPool(1024, cache_size=32)
    ports = pktbuf.Ports(pool)
    try:
        for i in range(2):
            ports.open(f"net_ring{i}")
        eth = b"\x02" * 6 + b"\x04" * 6
        def udp4(src, sport, size):      # an Ethernet/IPv4/UDP frame (checksums left 0)
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + size, 0, 0, 64, 17, 0,
                             bytes([10, 0, 0, src]), bytes([192, 0, 2, 1]))
            return eth + b"\x08\x00" + ip + struct.pack("!HHHH", sport, 53, 8 + size, 0) \
                + bytes(size)
        frames = [udp4(1, 1000, 100)] * 5 + [udp4(2, 2000, 1000)] * 3 + [udp4(3, 3000, 10)]
        st = stage()
        out, run = forward(st, frames, pool, ports)
        print(f"forwarded {len(out)} of {len(frames)} frames; counters {run.counters()}")
        for (proto, src, sport, dst, dport), p, b in top_flows(st, 3):
            print(f"  proto {proto} {src}:{sport} -> {dst}:{dport}  {p} packets {b} bytes")
    finally:
        ports.close()
    pool.cache_flush()
    print(f"pool back to {pool.avail_count}/{pool.n}")


if __name__ == "__main__":
    # the compiled loop imports the stage by its module's name, which __main__ is not
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import flow_counter
    flow_counter.main()
