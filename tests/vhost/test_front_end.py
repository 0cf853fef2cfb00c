"""net_vhost against a front end of our own (tests/vhost/front.py) over a real socket: traffic
both ways after the handshake, and a hostile front end -- every malformed message takes the
link down with its reason (or is NACKed when an ack was asked for), leaks no fd, and the
server accepts the next front end."""
from __future__ import annotations

import os
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pktbuf
from pktbuf.drivers.vhost import proto as P
from pktbuf.drivers.vhost.api.port import VhostPort

from .front import Front
from .guest import DESC_F_NEXT, DESC_F_WRITE, GuestMem


@pytest.fixture
def served(tmp_path):
    pool = pktbuf.PktmbufPool(1024)
    path = str(tmp_path / f"vh{os.getpid()}.sock")
    port = VhostPort(path, pool)
    yield port, pool, path
    port.close()
    assert pool.avail_count == pool.n
    assert not os.path.exists(path)
    pool.close()


def _wait(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def _fds():
    return len(os.listdir("/proc/self/fd"))


def test_traffic_both_ways_and_call(served):
    port, pool, path = served
    f = Front(path)
    rx_ring, tx_ring = f.setup(n=64)
    assert _wait(lambda: port.link_up), port.disconnect_reason
    mem = f.mem
    # guest Tx: header + frame over two descriptors
    frame = bytes(range(256)) * 3
    off = mem.alloc(12 + len(frame))
    mem.write(off, bytes(12) + frame)
    tx_ring.set_desc(0, mem.gpa + off, 100, DESC_F_NEXT, 1)
    tx_ring.set_desc(1, mem.gpa + off + 100, 12 + len(frame) - 100)
    tx_ring.make_avail(0)
    hs = port.rx_burst(32)
    assert [pool.mbuf(int(h)).tobytes() for h in hs] == [frame]
    pool.free_bulk(hs)
    assert tx_ring.take_used() == [(0, 0)]
    # guest Rx: two 512-byte buffers, a 700-byte frame merges over both
    for i in range(2):
        b = mem.alloc(512)
        rx_ring.set_desc(i, mem.gpa + b, 512, DESC_F_WRITE)
        rx_ring.make_avail(i)
    m = pool.alloc().append_bytes(frame[:700])
    assert port.tx_burst([m]) == 1
    used = rx_ring.take_used()
    assert used == [(0, 512), (1, 200)]
    d0 = struct.unpack("<QIHH", mem.read(rx_ring.desc, 16))[0] - mem.gpa
    d1 = struct.unpack("<QIHH", mem.read(rx_ring.desc + 16, 16))[0] - mem.gpa
    assert mem.read(d0, 12) == bytes(10) + b"\x02\x00"          # num_buffers = 2
    assert mem.read(d0 + 12, 500) + mem.read(d1, 200) == frame[:700]
    # the guest did not ask for no interrupts: both rings were called
    assert struct.unpack("<Q", os.read(f.calls[0], 8))[0] >= 1
    assert struct.unpack("<Q", os.read(f.calls[1], 8))[0] >= 1
    s = port.stats()
    assert (s["ipackets"], s["opackets"], s["ibytes"], s["obytes"]) == (1, 1, 768, 700)
    # stop: GET_VRING_BASE answers the next avail index and takes the link down
    req, flags, body = f.call(P.GET_VRING_BASE, P.STATE.pack(1, 0))
    assert (req, flags, P.STATE.unpack(body)) == (P.GET_VRING_BASE, 5, (1, 1))
    assert not port.link_up
    f.close()


def _memtable(regions):
    return P.MEMTABLE_HDR.pack(len(regions), 0) + b"".join(P.REGION.pack(*r) for r in regions)


def _bad_cases():
    m = GuestMem(1 << 16)
    fd = m.region.fd
    g, u, s = m.gpa, m.uva, m.size
    r, w = os.pipe()
    return m, [
        ("short payload", [(P.SET_FEATURES, b"\0" * 4, [])], "payload of 4 bytes"),
        ("payload too big", [(P.SET_FEATURES, b"", [], 700)], "payload size 700"),
        ("fd on a no-fd request", [(P.SET_FEATURES, b"\0" * 8, [fd])], "carries 1 fds"),
        ("kick without fd or NOFD", [(P.SET_VRING_KICK, struct.pack("<Q", 0), [])],
         "expected 1"),
        ("unknown request", [(23, b"\0" * 8, [])], "not supported"),
        ("feature not offered", [(P.SET_FEATURES, struct.pack("<Q", 1), [])], "not offered"),
        ("protocol feature not offered",
         [(P.SET_PROTOCOL_FEATURES, struct.pack("<Q", 2), [])], "not offered"),
        ("vring index past the device", [(P.SET_VRING_NUM, P.STATE.pack(300, 256), [])],
         "vring 300"),
        ("ring size not a power of two", [(P.SET_VRING_NUM, P.STATE.pack(0, 1000), [])],
         "power of two"),
        ("ring address before the memory table",
         [(P.SET_VRING_ADDR, P.ADDR.pack(0, 0, u, u + 4096, u + 8192, 0), [])],
         "before SET_MEM_TABLE"),
        ("fewer fds than regions", [(P.SET_MEM_TABLE, _memtable([(g, s, u, 0)] * 2), [fd])],
         "1 fds for 2 regions"),
        ("region of size 0", [(P.SET_MEM_TABLE, _memtable([(g, 0, u, 0)]), [fd])], "size 0"),
        ("region past the end of its file",
         [(P.SET_MEM_TABLE, _memtable([(g, s, u, 4096)]), [fd])], "file of"),
        ("regions overlap", [(P.SET_MEM_TABLE, _memtable([(g, s, u, 0), (g + 4096, 4096,
                                                                          u + s, 0)]),
                              [fd, fd])], "overlap in guest-physical"),
        ("nine regions", [(P.SET_MEM_TABLE, _memtable([(g + i * s, s, u + i * s, 0)
                                                        for i in range(9)]), [fd] * 8)],
         "9 regions"),
        ("address past 2**64", [(P.SET_MEM_TABLE, _memtable([(g, s, 2**64 - 4096, 0)]), [fd])],
         "past 2**64"),
        ("region fd not a file", [(P.SET_MEM_TABLE, _memtable([(g, s, u, 0)]), [r])],
         "not a regular file"),
        ("kick before addresses",
         [(P.SET_MEM_TABLE, _memtable([(g, s, u, 0)]), [fd]),
          (P.SET_VRING_KICK, struct.pack("<Q", P.VRING_NOFD), [])], "kicked before"),
        ("ring outside the memory table",
         [(P.SET_MEM_TABLE, _memtable([(g, s, u, 0)]), [fd]),
          (P.SET_VRING_NUM, P.STATE.pack(0, 256), []),
          (P.SET_VRING_ADDR, P.ADDR.pack(0, 0, u + s - 1024, u, u + 8192, 0), []),
          (P.SET_VRING_KICK, struct.pack("<Q", P.VRING_NOFD), [])], "not inside one region"),
        ("status past 8 bits", [(P.SET_STATUS, struct.pack("<Q", 0x100), [])], "8 bits"),
    ], (r, w)


CASES = [c[0] for c in _bad_cases()[1]]


@pytest.mark.parametrize("case", CASES)
def test_hostile_message_takes_the_link_down_with_its_reason(served, case):
    port, pool, path = served
    m, cases, pipe = _bad_cases()
    msgs, why = next((c[1], c[2]) for c in cases if c[0] == case)
    before = _fds()
    f = Front(path)
    f.negotiate()
    for msg in msgs:
        req, payload, fds = msg[:3]
        f.send(req, payload, fds, size=msg[3] if len(msg) > 3 else None)
    assert f.closed_by_peer(), "the back end kept the connection"
    f.close()
    assert _wait(lambda: port.disconnect_reason is not None and why in port.disconnect_reason), \
        port.disconnect_reason
    assert not port.link_up
    for x in pipe:
        os.close(x)
    m.region.close()
    assert _wait(lambda: _fds() <= before), "fds leaked"
    # the server takes the next front end, which works
    g = Front(path)
    g.setup(n=16)
    assert _wait(lambda: port.link_up), port.disconnect_reason
    g.close()


def test_nack_when_an_ack_was_asked_for_and_the_link_stays(served):
    port, pool, path = served
    f = Front(path)
    f.negotiate()
    f.u64(P.SET_FEATURES, 1, flags=1 | P.F_NEED_REPLY)        # not offered
    assert f.ack() == 1
    f.send(23, b"\0" * 8, flags=1 | P.F_NEED_REPLY)             # unknown
    assert f.reply() == (23, P.REPLY_FLAGS, struct.pack("<Q", 1))
    req, flags, body = f.call(P.GET_FEATURES)                    # still talking
    assert struct.unpack("<Q", body)[0] == P.FEATURES_OFFERED
    f.close()


def test_bad_ring_in_the_data_path_takes_the_link_down(served):
    port, pool, path = served
    f = Front(path)
    rx_ring, tx_ring = f.setup(n=16)
    assert _wait(lambda: port.link_up)
    tx_ring.set_desc(0, f.mem.gpa + 4096, 100, DESC_F_NEXT, 0)   # a loop on itself
    tx_ring.make_avail(0)
    assert port.rx_burst(32).size == 0
    assert f.closed_by_peer()
    assert "vring 1" in port.disconnect_reason and "loop" in port.disconnect_reason
    assert not port.link_up
    assert port.rx_burst(32).size == 0
    f.close()


def test_stale_socket_file_and_bad_devargs_are_refused(tmp_path):
    pool = pktbuf.PktmbufPool(64)
    p = tmp_path / "stale.sock"
    p.write_bytes(b"")
    with pytest.raises(pktbuf.InvalidArgument, match="exists"):
        VhostPort(str(p), pool)
    ports = pktbuf.Ports(pool)
    with pytest.raises(pktbuf.InvalidArgument, match="iface"):
        ports.open("net_vhost0,queues=1")
    with pytest.raises(pktbuf.InvalidArgument, match="unknown argument"):
        ports.open(f"net_vhost0,iface={tmp_path}/x.sock,bogus=1")
    with pytest.raises(pktbuf.InvalidArgument, match="out of range"):
        ports.open(f"net_vhost0,iface={tmp_path}/x.sock,queues=9")
    port = ports.open(f"net_vhost0,iface={tmp_path}/y.sock,queues=2")
    assert (port.nb_rx_queues, port.nb_tx_queues, port.link()["status"]) == (2, 2, "DOWN")
    assert port.rx_burst(8).size == 0
    ports.close()
    assert not os.path.exists(f"{tmp_path}/y.sock")
    pool.close()


REQS = sorted(P.RULES) + [0, 6, 7, 19, 20, 23, 24, 41, 0xFFFFFFFF]


@st.composite
def message(draw):
    req = draw(st.sampled_from(REQS))
    size = (P.RULES.get(req) or (8, "none"))[0]
    if size is None or draw(st.integers(0, 3)) == 0:
        size = draw(st.integers(0, 300))
    if req == P.SET_MEM_TABLE and draw(st.booleans()):
        n = draw(st.integers(0, 9))
        payload = P.MEMTABLE_HDR.pack(n, 0) + b"".join(
            P.REGION.pack(draw(st.integers(0, 2**64 - 1)), draw(st.sampled_from([0, 4096, 1 << 16, 2**63])),
                          draw(st.integers(0, 2**64 - 1)), draw(st.sampled_from([0, 4096, 2**62])))
            for _ in range(n))
    else:
        payload = draw(st.binary(min_size=size, max_size=size))
    return req, draw(st.sampled_from([0, 1, 9])), payload, draw(st.integers(0, 2))


@settings(max_examples=40, deadline=None)
@given(st.lists(message(), max_size=8), st.booleans())
def test_fuzz_messages_never_break_the_back_end(tmp_path_factory, msgs, handshake):
    """Random (mostly malformed) messages, after a full setup or not: the back end answers
    with well-formed replies or closes the connection; afterwards no fd is left over and the
    next front end sets up and moves a frame."""
    pool = pktbuf.PktmbufPool(256)
    path = str(tmp_path_factory.mktemp("fz") / "v.sock")
    port = VhostPort(path, pool)
    try:
        before = _fds()
        f = Front(path)
        if handshake:
            f.setup(n=8, size=1 << 16)
        mem = GuestMem(1 << 16)
        for req, flags, payload, nfd in msgs:
            fds = [mem.region.fd] * nfd
            try:
                f.send(req, payload, fds, flags)
            except OSError:
                break                                      # closed by the back end
        f.sock.setblocking(False)
        try:
            while f.sock.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        f.close()
        for fd in f.calls:
            os.close(fd)
        if f.mem is not None:
            f.mem.region.close()
        mem.region.close()
        assert _wait(lambda: not port.device.link_up)
        g = Front(path)
        rx_ring, tx_ring = g.setup(n=8, size=1 << 16)
        assert _wait(lambda: port.link_up), port.disconnect_reason
        off = g.mem.alloc(80)
        tx_ring.set_desc(0, g.mem.gpa + off, 76)
        tx_ring.make_avail(0)
        hs = port.rx_burst(4)
        assert len(hs) == 1
        pool.free_bulk(hs)
        g.close()
        for fd in g.calls:
            os.close(fd)
        g.mem.region.close()
        assert _wait(lambda: not port.link_up)
        assert _wait(lambda: _fds() <= before), "fds leaked"
    finally:
        port.close()
    assert pool.avail_count == pool.n
    pool.close()


def _send_frame(f, tx_ring, slot, frame):
    off = f.mem.alloc(12 + len(frame))
    f.mem.write(off, bytes(12) + frame)
    tx_ring.set_desc(slot, f.mem.gpa + off, 12 + len(frame))
    tx_ring.make_avail(slot)


def test_new_memory_table_while_running_moves_the_rings(served):
    """A front end that re-sends SET_MEM_TABLE with the rings running (DPDK's virtio_user does
    on a memory hotplug event): the rings stop, the new table is mapped, the rings restart at
    the same indices, translated through the new table -- here the same memory under other
    guest-physical and user-space addresses."""
    port, pool, path = served
    f = Front(path)
    rx_ring, tx_ring = f.setup(n=16)
    assert _wait(lambda: port.link_up)
    _send_frame(f, tx_ring, 0, b"A" * 60)
    hs = port.rx_burst(8)
    assert [pool.mbuf(int(h)).tobytes() for h in hs] == [b"A" * 60]
    pool.free_bulk(hs)
    m = f.mem
    delta = 1 << 32
    # the same memory under other guest-physical addresses (ring addresses are user-space
    # addresses, which stay): the rings restart and descriptors use the new gpa
    assert f.mem_table(m, regions=[(m.gpa + delta, m.size, m.uva, 0)]) == 0
    assert _wait(lambda: port.link_up), port.disconnect_reason
    m.gpa += delta
    _send_frame(f, tx_ring, 1, b"B" * 70)
    hs = port.rx_burst(8)
    assert [pool.mbuf(int(h)).tobytes() for h in hs] == [b"B" * 70]
    pool.free_bulk(hs)
    # a table that no longer holds the running rings is refused (NACK) and the link is down
    assert f.mem_table(m, regions=[(m.gpa, m.size, m.uva + delta, 0)]) == 1
    assert not port.link_up
    assert "not inside one region" in port.disconnect_reason
    assert tx_ring.take_used() == [(0, 0), (1, 0)]
    f.close()


def test_event_idx_decides_the_calls(served):
    """With EVENT_IDX the device calls only when used.idx passes the driver's used_event."""
    port, pool, path = served
    f = Front(path)
    f.negotiate(features=(1 << P.VIRTIO_RING_F_EVENT_IDX) | (1 << P.VIRTIO_F_VERSION_1)
                | (1 << P.VHOST_USER_F_PROTOCOL_FEATURES))
    calls = [os.eventfd(0, os.EFD_NONBLOCK) for _ in range(2)]
    for i, fd in enumerate(calls):
        f.u64(P.SET_VRING_CALL, i, fds=[fd])
    f.mem = GuestMem(1 << 20)
    assert f.mem_table(f.mem) == 0
    from .guest import SplitRing
    rings = [SplitRing(f.mem, 16) for _ in range(2)]
    for i, r in enumerate(rings):
        f.ring(i, r)
        f.send(P.SET_VRING_ENABLE, P.STATE.pack(i, 1))
    f.u64(P.SET_STATUS, 0x0F, flags=1 | P.F_NEED_REPLY)
    assert f.ack() == 0
    assert _wait(lambda: port.link_up), port.disconnect_reason
    tx = rings[1]
    used_event = tx.avail + 4 + 2 * tx.n

    def counter():
        try:
            return struct.unpack("<Q", os.read(calls[1], 8))[0]
        except BlockingIOError:
            return 0

    f.mem.write(used_event, struct.pack("<H", 5))        # call me once used passes 5
    for k in range(4):                                    # used 0 -> 4: no call
        _send_frame(f, tx, k, bytes(60))
    pool.free_bulk(port.rx_burst(8))
    assert counter() == 0
    for k in range(4, 8):                                 # used 4 -> 8 crosses 6: one call
        _send_frame(f, tx, k, bytes(60))
    pool.free_bulk(port.rx_burst(8))
    assert counter() == 1
    for fd in calls:
        os.close(fd)
    f.close()


def test_reset_owner_stops_the_rings(served):
    port, pool, path = served
    f = Front(path)
    f.setup(n=16)
    assert _wait(lambda: port.link_up)
    f.send(P.RESET_OWNER)
    assert _wait(lambda: not port.link_up)
    req, flags, body = f.call(P.GET_FEATURES)             # the connection stays
    assert struct.unpack("<Q", body)[0] == P.FEATURES_OFFERED
    f.close()


def test_memory_table_that_drops_some_rings_leaves_them_down(served, tmp_path):
    """Two queue pairs running; a new table holds pair 0's rings but not pair 1's: NACK, pair 0
    restarts in the new table, pair 1 stays down (never up with an address of the old one)."""
    pool = served[1]
    path = str(tmp_path / "mq.sock")
    port = VhostPort(path, pool, queues=2)
    try:
        f = Front(path)
        rings = f.setup(n=16, pairs=2)
        assert _wait(lambda: [v.up for v in port.device.vrings] == [True] * 4)
        m = f.mem
        cut = rings[2].desc                       # the region ends where pair 1's rings begin
        assert f.mem_table(m, regions=[(m.gpa, cut, m.uva, 0)]) == 1
        assert [v.up for v in port.device.vrings] == [True, True, False, False]
        assert port.link_up
        assert port.rx_burst(8, 1).size == 0
        f.close()
    finally:
        port.close()


def test_a_kick_fd_that_is_not_an_eventfd_is_neither_slept_on_nor_written(served):
    """rx_wait sleeps on the kick fd and the link going down writes it to wake a sleeper:
    only when it is an eventfd (a pipe's write end here: 8 bytes would land in the pipe)."""
    from pktbuf.drivers.vhost import layout as L
    port, pool, path = served
    f = Front(path)
    f.setup(n=64)
    assert _wait(lambda: port.link_up), port.disconnect_reason
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        f.u64(P.SET_VRING_KICK, 1, fds=[w], flags=1 | P.F_NEED_REPLY)
        assert f.ack() == 0
        os.close(w)
        assert _wait(lambda: port.link_up), port.disconnect_reason
        q = port.rx_queue(0)
        assert q.cfg[L.Q_KICKFD] == -1
        t = time.monotonic()
        assert port.rx_wait(0, 5000) == 0            # looked again after 1 ms, not slept
        assert time.monotonic() - t < 2.5
        assert q.st[L.QS_WAITS] == 0
        f.close()
        assert _wait(lambda: not port.link_up)
        got = []

        def _eof():
            try:
                got.append(os.read(r, 8))
            except BlockingIOError:
                return False
            return True
        assert _wait(_eof) and got == [b""]          # EOF: the back end closed it, unwritten
    finally:
        os.close(r)
