"""pktbuf's front end (``net_virtio_user``) against pktbuf's back end (``net_vhost``) over a
real socket: byte-exact both ways with chains of 1-3 mbufs, mergeable Rx buffers on and off,
two queue pairs, server mode with the back end restarting, the back end going away with
packets in flight (link down with a reason, every mbuf back), and a back end whose replies
break the protocol."""
from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import pytest

import pktbuf
from pktbuf.drivers.vhost import proto as P
from pktbuf.drivers.vhost.api.port import VhostPort
from pktbuf.drivers.virtio_user.api.port import VirtioUserPort
from pktbuf.errors import InvalidArgument, VhostError


def _frames(n, seed, top=6000):
    rng = random.Random(seed)
    return [bytes(rng.getrandbits(8) for _ in range(rng.choice([60, 61, 64, 128, 1000, 1514,
                                                                 2100, top])))
            for _ in range(n)]


def _pkt(pool, data: bytes, segs: int) -> int:
    """``data`` as a chain of ``segs`` mbufs (more when a segment would not fit one)."""
    segs = max(segs, -(-len(data) // 2000))
    cut = [len(data) * k // segs for k in range(segs + 1)]
    head = pool.alloc().append_bytes(data[cut[0]:cut[1]])
    for a, b in zip(cut[1:], cut[2:]):
        head.chain(pool.alloc().append_bytes(data[a:b]))
    return int(head)


def _bytes(pool, h) -> bytes:
    m = pool.mbuf(int(h))
    return bytes(m.read(0, len(m)))


def _move(tx, hs, rx, rx_pool, queue=0, timeout=20.0):
    """Send ``hs`` on ``tx`` while receiving on ``rx``: the received frames' bytes."""
    i, out, end = 0, [], time.monotonic() + timeout
    while (i < len(hs) or len(out) < len(hs)) and time.monotonic() < end:
        i += tx.tx_burst(hs[i:i + 32], queue)
        got = rx.rx_burst(32, queue)
        out += [_bytes(rx_pool, h) for h in got]
        rx_pool.free_bulk(got)
    assert i == len(hs), f"sent {i} of {len(hs)}"
    tx.tx_burst([], queue)            # reclaim (a front end frees what was used)
    return out


def _wait(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.01)
    return cond()


@pytest.fixture
def pools():
    a, b = pktbuf.PktmbufPool(2048), pktbuf.PktmbufPool(2048)
    yield a, b
    assert a.in_use_count == 0 and b.in_use_count == 0
    a.close()
    b.close()



@pytest.mark.parametrize("mrg,in_order", [(True, True), (False, True), (True, False)])
def test_byte_exact_both_ways_with_chains(tmp_path, pools, mrg, in_order):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, mrg_rxbuf=mrg, in_order=in_order)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20), (fe.disconnect_reason,
                                                             be.disconnect_reason)
        assert bool(fe.features >> P.VIRTIO_NET_F_MRG_RXBUF & 1) == mrg
        assert bool(fe.features >> P.VIRTIO_F_IN_ORDER & 1) == in_order
        # front end -> back end: 1..3 mbufs per packet, up to 6000 bytes
        fs = _frames(120, 1)
        assert _move(fe, [_pkt(pa, f, 1 + i % 3) for i, f in enumerate(fs)], be, pb) == fs
        fe.tx_burst([])
        # back end -> front end: mergeable buffers take anything; one buffer per packet
        # without them (frames up to the mbuf's room)
        fs = _frames(120, 2, top=6000 if mrg else 1514)
        if not mrg:
            fs = [f for f in fs if len(f) <= 1514]
        assert _move(be, [_pkt(pb, f, 1 + i % 3) for i, f in enumerate(fs)], fe, pa) == fs
        s = fe.stats()
        assert s["ipackets"] == len(fs) and s["ibytes"] == sum(map(len, fs))
        assert s["oerrors"] == 0 and s["ierrors"] == 0
    finally:
        fe.close()
        be.close()


def test_two_queue_pairs_and_the_port_table(tmp_path, pools):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb, queues=2)
    ports = pktbuf.Ports(pa)
    try:
        fe = ports.open(f"net_virtio_user0,path={path},queues=2")
        assert isinstance(fe, VirtioUserPort) and fe.nb_rx_queues == 2
        assert fe.wait_link_up(20) and be.wait_link_up(20), fe.disconnect_reason
        for q in (0, 1):
            fs = _frames(40, 10 + q, top=1514)
            assert _move(fe, [_pkt(pa, f, 1) for f in fs], be, pb, queue=q) == fs
            fs = _frames(40, 20 + q, top=1514)
            assert _move(be, [_pkt(pb, f, 2) for f in fs], fe, pa, queue=q) == fs
        x = fe.xstats()
        assert x["rx_q0_packets"] == 40 and x["rx_q1_packets"] == 40
        fe.tx_burst([])
        fe.tx_burst([], 1)
    finally:
        ports.close()
        be.close()


def test_server_mode_takes_a_restarted_back_end(tmp_path, pools):
    pa, pb = pools
    path = str(tmp_path / "s")
    fe = VirtioUserPort(path, pa, server=True)
    try:
        for round_ in range(2):
            be = VhostPort(path, pb, client=True)
            try:
                assert fe.wait_link_up(20) and be.wait_link_up(20), fe.disconnect_reason
                fs = _frames(30, round_, top=1514)
                assert _move(fe, [_pkt(pa, f, 2) for f in fs], be, pb) == fs
                assert _move(be, [_pkt(pb, f, 1) for f in fs], fe, pa) == fs
            finally:
                be.close()
            assert _wait(lambda: not fe.link_up)
            assert "closed" in fe.disconnect_reason
            assert _wait(lambda: pa.in_use_count == 0)    # the posted Rx mbufs came back
        assert fe.connects == 2
    finally:
        fe.close()
    assert not os.path.exists(path)


def test_back_end_gone_with_packets_in_flight(tmp_path, pools):
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20)
        hs = [_pkt(pa, b"\x11" * 200, 1 + i % 3) for i in range(60)]
        sent = fe.tx_burst(hs)                  # the back end never reads them
        assert sent > 0
        pa.free_bulk(hs[sent:])
        assert pa.in_use_count > 0
        be.close()
        assert _wait(lambda: not fe.link_up)
        assert "closed" in fe.disconnect_reason
        assert _wait(lambda: pa.in_use_count == 0), pa.in_use_count
        assert fe.rx_burst(32).size == 0 and fe.tx_burst([]) == 0
    finally:
        fe.close()


class FakeBackEnd:
    """A back end that answers the first GET_FEATURES with ``answer(req, payload)``."""

    def __init__(self, path, answer):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(1)
        self.answer = answer
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        c, _ = self.s.accept()
        c.settimeout(5)
        try:
            while True:
                h = c.recv(12, socket.MSG_WAITALL)
                if len(h) < 12:
                    return
                req, flags, size = P.HDR.unpack(h)
                payload = c.recv(size, socket.MSG_WAITALL) if size else b""
                out = self.answer(req, payload)
                if out is not None:
                    c.sendall(out)
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.s.close()


@pytest.mark.parametrize("answer,why", [
    (lambda r, p: P.HDR.pack(r, 0x1, 8) + P.U64.pack(1 << 32) if r == P.GET_FEATURES else None,
     "reply flags 0x1"),
    (lambda r, p: P.HDR.pack(r + 1, 0x5, 8) + P.U64.pack(1 << 32) if r == P.GET_FEATURES
     else None, "reply to request 2"),
    (lambda r, p: P.HDR.pack(r, 0x5, 4) + b"\0" * 4 if r == P.GET_FEATURES else None,
     "reply of 4 bytes"),
    (lambda r, p: P.reply(r, P.U64.pack(1 << 15)) if r == P.GET_FEATURES else None,
     "without VERSION_1"),
    (lambda r, p: (P.reply(r, P.U64.pack(P.FEATURES_OFFERED)) if r == P.GET_FEATURES else
                   P.reply(r, P.U64.pack(P.PROTOCOL_OFFERED)) if r == P.GET_PROTOCOL_FEATURES
                   else P.reply(r, P.U64.pack(1)) if r == P.SET_STATUS else None),
     "SET_STATUS: the back end refused it"),
    (lambda r, p: None, "no reply"),
])
def test_a_back_end_breaking_the_protocol_takes_the_link_down(tmp_path, pools, answer, why,
                                                              monkeypatch):
    from pktbuf.drivers.virtio_user import device
    monkeypatch.setattr(device, "_REPLY_TIMEOUT_S", 0.5)
    pa, _ = pools
    path = str(tmp_path / "s")
    fake = FakeBackEnd(path, answer)
    fe = VirtioUserPort(path, pa)
    try:
        assert _wait(lambda: fe.disconnect_reason is not None, 10)
        assert why in fe.disconnect_reason, fe.disconnect_reason
        assert not fe.link_up
    finally:
        fe.close()
        fake.close()


def test_bad_arguments_leave_nothing_behind(tmp_path, pools):
    pa, _ = pools
    path = str(tmp_path / "missing")
    with pytest.raises(VhostError, match="cannot connect"):
        VirtioUserPort(path, pa)
    ports = pktbuf.Ports(pa)
    try:
        for dev in (f"net_virtio_user0,path={path},queues=9",
                    f"net_virtio_user0,path={path},queue_size=100",
                    f"net_virtio_user0,path={path},bogus=1", "net_virtio_user0"):
            with pytest.raises(InvalidArgument):
                ports.open(dev)
        open(path, "w").close()
        with pytest.raises(InvalidArgument, match="exists"):
            ports.open(f"net_virtio_user0,path={path},server=1")
    finally:
        ports.close()
    assert struct.calcsize("<Q") == 8


def test_a_bad_used_entry_takes_the_link_down_with_the_reason(tmp_path, pools):
    """The back end writes a used entry naming a descriptor it was never given: the next Tx
    burst fails the ring, the control thread takes the link down saying why, and every mbuf
    the rings held comes back."""
    import numpy as np
    pa, pb = pools
    path = str(tmp_path / "s")
    be = VhostPort(path, pb)
    fe = VirtioUserPort(path, pa, in_order=False)
    try:
        assert fe.wait_link_up(20) and be.wait_link_up(20)
        hs = [_pkt(pa, b"\x44" * 100, 1) for _ in range(4)]
        assert fe.tx_burst(hs) == 4                      # the back end does not read them
        mem = fe.device._mem
        _, _, used, _ = mem.ring(1)
        u = mem.region.array[used - mem.region.address:][:4 + 8 * 256]
        u[4:12] = np.frombuffer(struct.pack("<II", 999, 0), np.uint8)   # slot 0: id 999
        u[2:4] = np.frombuffer(struct.pack("<H", 1), np.uint8)          # used.idx = 1
        assert fe.tx_burst([]) == 0
        assert _wait(lambda: not fe.link_up)
        assert "vring 1: used id" in fe.disconnect_reason and "(999)" in fe.disconnect_reason
        assert _wait(lambda: pa.in_use_count == 0), pa.in_use_count
    finally:
        fe.close()
        be.close()
