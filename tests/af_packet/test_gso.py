"""GSO frames: locally sent TCP crosses a veth unsegmented (up to 64 KiB, checksum left to
offload).  pktbuf delivers such a frame whole, as a chain flagged RX_LRO and
RX_L4_CKSUM_NONE, when the Rx block can hold it; when it cannot, the kernel clamps it and the
port drops it, counted (rx_truncated_errors, ierrors) -- it never hands over a cut frame."""
import socket
import threading

import pytest

from pktbuf.drivers.af_packet.layout import RX_L4_CKSUM_NONE, RX_LRO
from pktbuf.drivers.af_packet.api import AfPacketPort

from ..netns import Netns
from .conftest import _need_root
from .helpers import receive

PAYLOAD = bytes(range(256)) * 4096          # 1 MiB


def _tcp_transfer(ns1, ns2):
    """Send PAYLOAD over TCP from ns1 (10.9.0.1) to ns2 (10.9.0.2); returns what arrived."""
    with ns2.entered():
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("10.9.0.2", 5001))
    srv.listen(1)
    got = bytearray()

    def serve():
        c, _ = srv.accept()
        while True:
            d = c.recv(1 << 16)
            if not d:
                break
            got.extend(d)
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    with ns1.entered():
        cli = socket.create_connection(("10.9.0.2", 5001), timeout=10)
    cli.sendall(PAYLOAD)
    cli.close()
    t.join(20)
    srv.close()
    return bytes(got)


@pytest.fixture
def two_ns():
    _need_root()
    with Netns() as n1, Netns() as n2:
        n1.veth("veth0", "veth1", peer=n2)
        n1.run("ip", "addr", "add", "10.9.0.1/24", "dev", "veth0")
        n2.run("ip", "addr", "add", "10.9.0.2/24", "dev", "veth1")
        yield n1, n2


def test_gso_frames_whole_as_chains(two_ns, pool):
    n1, n2 = two_ns
    with n2.entered():
        p = AfPacketPort(pool, "veth1", blocksz=1 << 17, framesz=2048, framecnt=512)
    try:
        assert _tcp_transfer(n1, n2) == PAYLOAD
        got = receive(p, pool, 1 << 30, timeout=1.0, info=True)
        big = [g for g in got if len(g[0]) > 1514]
        assert big, "no GSO frame crossed (were offloads off?)"
        for data, segs, flags, _ in big:
            assert segs == -(-len(data) // 2048)
            assert flags & RX_LRO and flags & RX_L4_CKSUM_NONE == RX_L4_CKSUM_NONE
            assert data[12:14] == b"\x08\x00"                       # IPv4, whole:
            assert len(data) == 14 + int.from_bytes(data[16:18], "big")   # its total length
        x = p.xstats()
        assert x["rx_truncated_errors"] == 0 and x["rx_errors"] == 0
    finally:
        p.close()
    assert pool.avail_count == pool.n


def test_gso_frames_too_big_for_block_dropped_counted(two_ns, pool):
    n1, n2 = two_ns
    with n2.entered():
        p = AfPacketPort(pool, "veth1")                     # 4 KiB blocks
    try:
        assert _tcp_transfer(n1, n2) == PAYLOAD
        got = receive(p, pool, 1 << 30, timeout=1.0)
        assert all(len(g) <= 4096 for g in got)
        x = p.xstats()
        assert x["rx_truncated_errors"] > 0
        assert p.stats()["ierrors"] == x["rx_truncated_errors"]
    finally:
        p.close()
    assert pool.avail_count == pool.n


def test_no_gso_with_offloads_off(pool):
    """The control: with TSO/GSO off the same transfer crosses in MTU-sized frames only."""
    _need_root()
    with Netns() as n1, Netns() as n2:
        n1.veth("veth0", "veth1", peer=n2, offloads=False)
        n1.run("ip", "addr", "add", "10.9.0.1/24", "dev", "veth0")
        n2.run("ip", "addr", "add", "10.9.0.2/24", "dev", "veth1")
        with n2.entered():
            p = AfPacketPort(pool, "veth1")
        try:
            assert _tcp_transfer(n1, n2) == PAYLOAD
            got = receive(p, pool, 1 << 30, timeout=1.0)
            assert len(got) + p.stats()["imissed"] > 700       # 1 MiB in 1448-byte segments
            assert max(map(len, got)) <= 1514
            assert p.xstats()["rx_truncated_errors"] == 0
        finally:
            p.close()
