"""Control messages: wire format, strict parsing, handshake state machines (fuzzed)."""
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pktbuf.drivers.memif import layout as L
from pktbuf.drivers.memif import proto as P
from pktbuf.drivers.memif.control import ClientHandshake, PeerDisconnect, ServerHandshake
from pktbuf.drivers.memif.proto import ProtocolError


def test_constants_match_dpdk_22_11():
    assert P.COOKIE == 0x3E31F20
    assert P.VERSION == 0x0200
    assert P.MSG_SIZE == 128
    assert L.RING_HDR_DTYPE.itemsize == 128 and L.RING_HDR_DTYPE.fields["tail"][1] == 64
    assert L.RING_HDR_DTYPE.fields["head"][1] == 6 and L.RING_HDR_DTYPE.fields["flags"][1] == 4
    assert L.DESC_DTYPE.itemsize == 16 and L.DESC_DTYPE.fields["offset"][1] == 8


def test_copy_region_layout_matches_dpdk_worked_example():
    # docs/memif.md, "Shared memory": 1 C2S + 1 S2C, rsize 10, bsize 2048
    lay = L.copy_region_layout(1, 1, 10, 2048)
    assert lay["ring_size"] == 16512
    assert lay["rings"] == [(True, 0, 0), (False, 0, 16512)]
    assert lay["buffers"] == 33024
    assert lay["size"] == 4227328
    assert L.buffer_offset(lay, False, 0, 1, 10, 2048) == 2130176


def test_field_offsets_on_the_wire():
    m = P.build_hello("DPDK 22.11.11", 255, 255, 255, 14)
    assert len(m) == 128
    assert struct.unpack_from("<H", m, 0)[0] == P.MSG_HELLO
    assert m[2:15] == b"DPDK 22.11.11"
    assert struct.unpack_from("<HHHHHB", m, 34) == (0x200, 0x200, 255, 255, 255, 14)
    m = P.build_init(7, b"sec", "cli")
    assert struct.unpack_from("<HHIB", m, 0) == (P.MSG_INIT, 0x200, 7, 0)
    assert m[9:12] == b"sec" and m[33:36] == b"cli"
    m = P.build_add_region(3, 1 << 33)
    assert struct.unpack_from("<HHQ", m, 0) == (P.MSG_ADD_REGION, 3, 1 << 33)
    m = P.build_add_ring(True, 2, 1, 4096, 10)
    assert struct.unpack_from("<HHHHIBH", m, 0) == (P.MSG_ADD_RING, 1, 2, 1, 4096, 10, 0)
    m = P.build_disconnect("Incorrect secret")
    assert struct.unpack_from("<HI", m, 0) == (P.MSG_DISCONNECT, 0) and m[6:22] == b"Incorrect secret"


@pytest.mark.parametrize("msg", [
    P.build_ack(), P.build_hello(), P.build_init(5, b"s3cret", "x"), P.build_add_region(0, 4096),
    P.build_add_ring(False, 1, 0, 128, 12), P.build_connect("a"), P.build_connected("b"),
    P.build_disconnect("bye")])
def test_roundtrip(msg):
    parsed = P.parse(msg)
    assert parsed.type == struct.unpack_from("<H", msg)[0]


def test_parse_values():
    h = P.parse(P.build_hello("srv", 3, 4, 5, 9))
    assert (h.name, h.max_region, h.max_s2c_ring, h.max_c2s_ring, h.max_log2_ring_size) == \
        (b"srv", 3, 4, 5, 9)
    i = P.parse(P.build_init(0xFFFFFFFF, b"x" * 24, "n" * 31))
    assert i.id == 0xFFFFFFFF and i.secret == b"x" * 24 and i.name == b"n" * 31
    r = P.parse(P.build_add_ring(True, 7, 2, 0xFFFFFFFF, 14))
    assert r.c2s and (r.index, r.region, r.offset, r.log2_ring_size) == (7, 2, 0xFFFFFFFF, 14)
    assert P.parse(P.build_disconnect("x" * 200)).reason == "x" * 95


@pytest.mark.parametrize("n", [0, 1, 127, 129, 256])
def test_wrong_size_is_rejected(n):
    with pytest.raises(ProtocolError) as e:
        P.parse(bytes(n))
    assert e.value.reason == P.R_SIZE


@pytest.mark.parametrize("t", [0, 9, 100, 0xFFFF])
def test_unknown_type_is_rejected(t):
    with pytest.raises(ProtocolError) as e:
        P.parse(struct.pack("<H", t) + bytes(126))
    assert e.value.reason == P.R_TYPE


def test_builders_refuse_oversized_fields():
    with pytest.raises(ValueError):
        P.build_init(0, b"x" * 25)
    with pytest.raises(ValueError):
        P.build_connect("n" * 32)


def test_secret_rules():
    assert P.secret_matches(b"", b"anything") is None
    assert P.secret_matches(b"abc", b"") == P.R_SECRET_REQUIRED
    assert P.secret_matches(b"abc", b"abd") == P.R_SECRET
    assert P.secret_matches(b"abc", b"abc") is None


@settings(max_examples=2000, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_fuzz_parse_never_fails_otherwise(data):
    try:
        msg = P.parse(data)
    except ProtocolError as e:
        assert e.reason in (P.R_SIZE, P.R_TYPE)
    else:
        assert len(data) == 128 and 1 <= msg.type <= 8


@settings(max_examples=2000, deadline=None)
@given(st.integers(1, 8), st.binary(min_size=126, max_size=126))
def test_fuzz_parse_valid_types(t, body):
    msg = P.parse(struct.pack("<H", t) + body)
    assert msg.type == t


# -- handshake state machines -----------------------------------------------------------------
class _Iface:
    n_rx = 2
    n_tx = 1


def _lookup(init):
    if init.id != 0:
        raise ProtocolError(P.R_ID)
    why = P.secret_matches(b"", init.secret)
    if why:
        raise ProtocolError(why)
    return _Iface()


def _open_fds(n):
    fds = []
    for _ in range(n):
        r, w = os.pipe()
        os.close(w)
        fds.append(r)
    return fds


def _fd_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_server_handshake_happy_path():
    hs = ServerHandshake(_lookup)
    assert hs.on_message(P.parse(P.build_init(0)), []) == [(P.build_ack(), None)]
    fd_r, = _open_fds(1)
    assert hs.on_message(P.parse(P.build_add_region(0, 1 << 20)), [fd_r])[0][0] == P.build_ack()
    f1, f2 = _open_fds(2)
    hs.on_message(P.parse(P.build_add_ring(True, 0, 0, 0, 10)), [f1])
    hs.on_message(P.parse(P.build_add_ring(False, 0, 0, 16512, 10)), [f2])
    assert hs.on_message(P.parse(P.build_connect("c")), []) == []
    assert hs.state == "done"
    regions, rings, fds = hs.take()
    assert regions == [(fd_r, 1 << 20)] and set(rings) == {(True, 0), (False, 0)}
    for f in (fd_r, f1, f2):
        os.close(f)


@pytest.mark.parametrize("msgs,reason", [
    ([P.build_add_region(0, 4096)], P.R_UNEXPECTED),
    ([P.build_init(0, version=0x0100)], P.R_VERSION),
    ([P.build_init(1)], P.R_ID),
    ([P.build_init(0, mode=1)], P.R_MODE),
    ([P.build_init(0), P.build_add_region(1, 4096)], P.R_REGION_INDEX),
    ([P.build_init(0), P.build_add_region(0, 0)], P.R_REGION_SIZE),
    ([P.build_init(0), P.build_add_ring(True, 2, 0, 0, 10)], P.R_RING_INDEX),   # only 2 Rx
    ([P.build_init(0), P.build_add_ring(False, 1, 0, 0, 10)], P.R_RING_INDEX),  # only 1 Tx
    ([P.build_init(0), P.build_add_ring(True, 0, 0, 0, 15)], P.R_RING_SIZE),
    ([P.build_init(0), P.build_add_ring(True, 0, 0, 0, 10), P.build_add_ring(True, 0, 0, 0, 10)],
     P.R_RING_INDEX),
    ([P.build_init(0), P.build_connect()], P.R_NO_RINGS),
    ([P.build_init(0), P.build_init(0)], P.R_UNEXPECTED),
])
def test_server_handshake_rejects(msgs, reason):
    hs = ServerHandshake(_lookup)
    given_fds = []
    with pytest.raises(ProtocolError) as e:
        for m in msgs:
            fds = _open_fds(1)
            given_fds += fds
            hs.on_message(P.parse(m), fds)
    assert e.value.reason == reason
    hs.close()
    assert not any(_fd_open(f) for f in given_fds), "a received fd leaked"


def test_missing_fds():
    hs = ServerHandshake(_lookup)
    hs.on_message(P.parse(P.build_init(0)), [])
    with pytest.raises(ProtocolError) as e:
        hs.on_message(P.parse(P.build_add_region(0, 4096)), [])
    assert e.value.reason == P.R_REGION_FD
    hs = ServerHandshake(_lookup)
    hs.on_message(P.parse(P.build_init(0)), [])
    with pytest.raises(ProtocolError) as e:
        hs.on_message(P.parse(P.build_add_ring(True, 0, 0, 0, 10)), [])
    assert e.value.reason == P.R_RING_FD


def test_disconnect_message_is_reported():
    hs = ServerHandshake(_lookup)
    with pytest.raises(PeerDisconnect) as e:
        hs.on_message(P.parse(P.build_disconnect("go away")), [])
    assert e.value.reason == "go away"


def test_client_handshake_lock_step():
    plan_calls = []

    def plan(hello):
        plan_calls.append(hello)
        return [(b"INIT", None), (b"REGION", 5), (b"RING", 6), (b"CONNECT", None)]

    hs = ClientHandshake(plan)
    assert hs.on_message(P.parse(P.build_hello()), []) == [(b"INIT", None)]
    assert hs.on_message(P.Ack(), []) == [(b"REGION", 5)]
    assert hs.on_message(P.Ack(), []) == [(b"RING", 6)]
    assert hs.on_message(P.Ack(), []) == [(b"CONNECT", None)]
    assert hs.on_message(P.parse(P.build_connected("srv")), []) == []
    assert hs.state == "done" and hs.connected.if_name == b"srv" and len(plan_calls) == 1


@pytest.mark.parametrize("first,reason", [
    (P.build_ack(), P.R_UNEXPECTED),
    (P.build_hello(min_version=0x0300, max_version=0x0300), P.R_VERSION),
    (P.build_connected(), P.R_UNEXPECTED),
])
def test_client_handshake_rejects(first, reason):
    hs = ClientHandshake(lambda h: [(b"x", None)])
    with pytest.raises(ProtocolError) as e:
        hs.on_message(P.parse(first), [])
    assert e.value.reason == reason


_any_msg = st.one_of(
    st.builds(P.build_ack), st.builds(P.build_hello, max_log2_ring_size=st.integers(0, 255),
                                      max_c2s_ring=st.integers(0, 0xFFFF)),
    st.builds(P.build_init, st.integers(0, 3), st.binary(max_size=24), mode=st.integers(0, 2),
              version=st.sampled_from([0x200, 0x100, 0x201])),
    st.builds(P.build_add_region, st.integers(0, 300), st.integers(0, 1 << 63)),
    st.builds(P.build_add_ring, st.booleans(), st.integers(0, 300), st.integers(0, 300),
              st.integers(0, 0xFFFFFFFF), st.integers(0, 255)),
    st.builds(P.build_connect), st.builds(P.build_connected),
    st.builds(P.build_disconnect, st.text(max_size=120)),
    st.binary(min_size=128, max_size=128))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_any_msg, st.integers(0, 2)), max_size=12))
def test_fuzz_server_handshake(seq):
    """Any message sequence: only ProtocolError/PeerDisconnect, and no fd ever leaks."""
    hs = ServerHandshake(_lookup)
    all_fds = []
    try:
        for raw, nfd in seq:
            fds = _open_fds(nfd)
            all_fds += fds
            try:
                msg = P.parse(raw)
            except ProtocolError:
                for f in fds:
                    os.close(f)
                raise
            hs.on_message(msg, fds)
    except (ProtocolError, PeerDisconnect):
        pass
    regions, rings, fds = hs.take()
    kept = {f for f, _ in regions} | set(fds.values())
    for f in kept:
        os.close(f)
    assert not any(_fd_open(f) for f in all_fds), "a received fd leaked"


@settings(max_examples=500, deadline=None)
@given(st.lists(_any_msg, max_size=8))
def test_fuzz_client_handshake(seq):
    hs = ClientHandshake(lambda h: [(b"a", None), (b"b", None)])
    try:
        for raw in seq:
            hs.on_message(P.parse(raw), [])
    except (ProtocolError, PeerDisconnect):
        pass
    assert hs.state in ("hello", "acks", "connected-wait", "done")
