"""Random damage to valid files: truncation, flipped bytes, 32-bit fields overwritten with
random or extreme values.  The port (kernels) and PcapReader (plain Python, written
separately) must agree record for record -- the same packets, the same timestamps, and an
error at the same place or none -- and the pool must end exactly as it began."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf import PcapFormatError, PcapPort, PcapReader

from . import naive
from .helpers import frames


def _base(kind, sizes, seed):
    pk = [(1_000_000_000_000 + i * 1_000_003, f) for i, f in enumerate(frames(sizes, seed))]
    if kind == "pcap-us":
        return naive.write_pcap(pk)
    if kind == "pcap-ns-be":
        return naive.write_pcap(pk, nano=True, big=True)
    e = ">" if kind == "pcapng-be" else "<"
    res = [9, None, 0x80 | 40]                  # ns, µs (no option), 2**-40 s
    out = [naive.shb(e), naive.idb(e, tsresol=9), naive.idb(e, snaplen=3000),
           naive.idb(e, tsresol=res[2], tsoffset=-7)]
    for i, (t, f) in enumerate(pk):
        if i % 4 == 3:
            out.append(naive.block(0x0BAD, b"xyz", e))
        if i % 5 == 4:
            out.append(naive.spb(f, e=e))
        else:
            out.append(naive.epb(i % 3, naive.ticks(t + (7 * naive.NS if i % 3 == 2 else 0),
                                                    res[i % 3]), f, e=e))
    return b"".join(out)


def _damage(data, draw_ops):
    b = bytearray(data)
    for op, pos, val in draw_ops:
        if not b:
            break
        p = pos % len(b)
        if op == "flip":
            b[p] ^= 1 << (val % 8)
        elif op == "u32" and p + 4 <= len(b):
            b[p:p + 4] = struct.pack("<I", val)
        elif op == "cut":
            del b[p:]
    return bytes(b)


OPS = st.lists(st.tuples(st.sampled_from(["flip", "u32", "cut"]), st.integers(0, 1 << 20),
                         st.sampled_from([0, 1, 3, 12, 0x7FFFFFFF, 0xFFFFFFFF, 0x0A0D0D0A,
                                          0x1A2B3C4D, 262144, 262145, 1 << 20])
                         | st.integers(0, 0xFFFFFFFF)), min_size=1, max_size=4)


def _by_reader(path):
    got = []
    try:
        with PcapReader(str(path)) as r:
            for ts, f, _ in r.records():
                got.append((f, ts))
    except PcapFormatError as e:
        return got, e.offset
    return got, None


def _by_port(pool, path, burst):
    got = []
    try:
        port = PcapPort(pool, rx_pcap=str(path))
    except PcapFormatError as e:
        return got, e.offset
    with port:
        try:
            while not port.rx_eof():
                hs = port.rx_burst(burst)
                got += [(pool.mbuf(int(h)).tobytes(), port.rx_timestamp(h)) for h in hs]
                pool.free_bulk(hs)
        except PcapFormatError as e:
            return got, e.offset
    return got, None


@settings(max_examples=150)
@given(kind=st.sampled_from(["pcap-us", "pcap-ns-be", "pcapng-le", "pcapng-be"]),
       sizes=st.lists(st.integers(0, 2000), min_size=1, max_size=12), seed=st.integers(0, 99),
       ops=OPS, burst=st.integers(1, 8))
def test_damaged_files_agree(pool, tmp_path_factory, kind, sizes, seed, ops, burst):
    data = _damage(_base(kind, sizes, seed), ops)
    path = tmp_path_factory.mktemp("fz") / "f.cap"
    path.write_bytes(data)
    avail = pool.avail_count
    assert _by_port(pool, path, burst) == _by_reader(path)
    assert pool.avail_count == avail
