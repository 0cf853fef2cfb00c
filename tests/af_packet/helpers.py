"""Shared helpers of the AF_PACKET tests: frames with known bytes, a plain-socket peer, waits."""
from __future__ import annotations

import socket
import struct
import time

import numpy as np

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_AUXDATA = 8
BCAST = b"\xff" * 6
SRC = b"\x02\x00\x00\x00\x00\x01"
ETYPE = 0x88B5          # IEEE local experimental: nothing in the kernel reacts to it


def frames(sizes, seed=1, *, dst=BCAST, src=SRC, etype=ETYPE):
    """Ethernet frames of the given total sizes: header, then a sequence number, random bytes."""
    rng = np.random.default_rng(seed)
    out = []
    for i, n in enumerate(sizes):
        body = struct.pack(">I", i) + rng.integers(0, 256, max(0, n - 18), dtype=np.uint8).tobytes()
        out.append((dst + src + struct.pack(">H", etype) + body)[:n])
    return out


def udp_frame(i: int, size: int = 60, *, dst=BCAST, src=SRC) -> bytes:
    """An IPv4/UDP frame of flow ``i`` (source address and port vary with it), ``size`` bytes."""
    body = bytes(max(0, size - 42))
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 28 + len(body), i & 0xFFFF, 0, 64, 17, 0,
                     bytes([10, 1, (i >> 8) & 0xFF, i & 0xFF]), bytes([10, 2, 0, 1]))
    udp = struct.pack(">HHHH", 1024 + i % 50000, 4789, 8 + len(body), 0)
    return dst + src + b"\x08\x00" + ip + udp + body


def vlan_tag(frame: bytes, tci: int, tpid: int = 0x8100) -> bytes:
    return frame[:12] + struct.pack(">HH", tpid, tci) + frame[12:]


def make_packet(pool, data: bytes, seg: int | None = None) -> int:
    """An mbuf (a chain when ``seg`` is smaller than the frame) holding ``data``."""
    seg = seg or min(max(1, len(data)), pool.data_room - pool.headroom)
    head = pool.alloc()
    head.append_bytes(data[:seg])
    for off in range(seg, len(data), seg):
        m = pool.alloc()
        m.append_bytes(data[off:off + seg])
        head.chain(m)
    return head.handle


def send_all(port, pool, data, *, seg=None, queue=0, timeout=10.0) -> int:
    """Send every frame of ``data`` through ``port``; returns how many were taken.  What was
    not taken is freed."""
    hs = np.array([make_packet(pool, d, seg) for d in data], np.int32)
    port.tx_burst(hs[:0], queue)          # compiled (on a cold cache) before the clock starts
    sent = 0
    end = time.monotonic() + timeout
    while sent < hs.size and time.monotonic() < end:
        k = port.tx_burst(hs[sent:], queue)
        sent += k
        if k == 0:
            time.sleep(0.001)
    if sent < hs.size:
        pool.free_bulk(hs[sent:])
    return sent


def receive(port, pool, count, *, queue=0, timeout=10.0, until=None, info=False):
    """Receive frames from ``port`` until ``count`` arrived (or ``until(bytes)`` is true for
    one), or ``timeout``; returns their bytes (with ``info``: (bytes, nb_segs, ol_flags,
    vlan_tci) tuples).  Every mbuf is freed."""
    got = []
    port.rx_burst(0, queue)               # compiled (on a cold cache) before the clock starts
    port.rx_wait(queue, 0)
    end = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < end:
        hs = port.rx_burst(32, queue)
        if hs.size == 0:
            port.rx_wait(queue, 20)
            continue
        stop = False
        for h in hs:
            m = pool.mbuf(int(h))
            b = m.tobytes()
            got.append((b, m.nb_segs, m.ol_flags, m.vlan_tci) if info else b)
            stop = stop or (until is not None and until(b))
            m.free()
        if stop:
            break
    return got


class RawPeer:
    """A plain AF_PACKET socket on an interface: the reference peer (no rings, no pktbuf)."""

    def __init__(self, iface: str):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        self.sock.bind((iface, ETH_P_ALL))
        self.sock.settimeout(0.05)

    def send(self, frames_) -> None:
        for f in frames_:
            self.sock.send(f)

    def recv(self, count, timeout=10.0, until=None, tagged=True):
        """Frames received (outgoing ones skipped), with the stripped VLAN tag put back (from
        the auxdata, as libpcap does) unless ``tagged`` is False."""
        got = []
        end = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < end:
            try:
                data, anc, _fl, addr = self.sock.recvmsg(70000, 256)
            except socket.timeout:
                continue
            if addr[2] == PACKET_OUTGOING:
                continue
            for lvl, typ, val in anc:
                if tagged and lvl == SOL_PACKET and typ == PACKET_AUXDATA:
                    st, _l, _s, _m, _n, tci, tpid = struct.unpack("IIIHHHH", val[:20])
                    if st & 0x10:
                        data = vlan_tag(data, tci, tpid if st & 0x40 else 0x8100)
            got.append(data)
            if until is not None and until(data):
                break
        return got

    def close(self):
        self.sock.close()


def start_testpmd(ns, fwd, vdev, **kw):
    """dpdk-testpmd with ``vdev`` in namespace ``ns``, forwarding in mode ``fwd`` (the test
    fails if it does not start)."""
    import pytest
    from pktbuf.apps import testpmd as T
    tp = T.Testpmd(vdevs=[vdev], fwd=fwd, netns=ns.name, **kw).start()
    if not tp.wait_log(r"testpmd> ", 60):
        log = tp.log()
        tp.cleanup()
        pytest.fail(f"testpmd did not start:\n{log[-3000:]}")
    mark = len(tp.log())
    tp.cmd("start")
    assert tp.wait_log(r"packet forwarding - ports=", 10, since=mark), tp.log()[-2000:]
    return tp


def check_rxonly(port, pool, tp, want) -> None:
    """Frames sent through ``port`` all reach testpmd (rxonly on the peer), bytes counted."""
    assert send_all(port, pool, want) == len(want)
    st = wait_testpmd_rx(tp, len(want))
    assert st["rx_packets"] == len(want)
    assert st["rx_bytes"] == sum(map(len, want))


def wait_testpmd_rx(tp, count, timeout=20.0) -> dict:
    """testpmd's port stats once it has received ``count`` frames (or at the timeout)."""
    end = time.monotonic() + timeout
    st = {}
    while time.monotonic() < end:
        st = tp.port_stats()
        if st.get("rx_packets", 0) >= count:
            break
        time.sleep(0.2)
    return st


def check_io_echo(port, pool, tp, want) -> None:
    """Frames sent through ``port`` to testpmd forwarding io on the peer come back byte for
    byte, and testpmd counted each once each way."""
    assert send_all(port, pool, want) == len(want)
    got = receive(port, pool, len(want), timeout=20)
    assert len(got) == len(want), tp.port_stats()
    assert got == want
    # testpmd's forwarding thread adds to its Tx counter after the send call returns, and the
    # frames can be back here before that: wait (bounded) for the counters to settle
    end = time.monotonic() + 5.0
    st = tp.port_stats()
    while st["tx_packets"] < len(want) and time.monotonic() < end:
        time.sleep(0.05)
        st = tp.port_stats()
    assert st["rx_packets"] == st["tx_packets"] == len(want), (st, len(want))


def check_txonly(port, pool, tp, ns, peer="veth1") -> None:
    """testpmd's txonly flood (64-byte UDP frames from its port's MAC, one frame over and
    over) reaches ``port`` whole; what it could not take is counted in imissed, never more
    than testpmd sent."""
    got = receive(port, pool, 3000, timeout=20)
    tp.stop_forwarding()
    sent = tp.port_stats()["tx_packets"]
    got += receive(port, pool, 1 << 30, timeout=1.0)
    mac = ns.link(peer)["address"]
    src = bytes(int(x, 16) for x in mac.split(":"))
    assert len(got) >= 3000
    assert all(len(g) == 64 and g[6:12] == src and g[12:14] == b"\x08\x00" for g in got)
    assert len(set(got)) == 1
    s = port.stats()
    assert s["ipackets"] == len(got)
    assert s["ipackets"] + s["imissed"] <= sent
