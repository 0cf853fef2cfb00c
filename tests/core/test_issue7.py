"""Regression tests for the hardening issue: one (or more) per defect class, each failing on
the code before the fix (see the commit messages for how each failed).

Every refused call must raise a PktbufError subclass and leave every pool exactly as it was
(``unchanged``); kernel-level reads go into buffers with canary bytes on both sides.
"""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import pktbuf
from pktbuf import (Busy, DoubleFree, InvalidArgument, InvalidHandle, Mbuf, Mempool, NoRoom,
                    OutOfRange, PktbufError, PktmbufPool, PoolExhausted, RefcntError,
                    SanityCheckError)
from pktbuf.buf.mbuf import data as D
from pktbuf.buf.mbuf.layout import F_INDIRECT, REFCNT_MAX

from ..sigs import run_battery_without_new_specialisations
from .snap import assert_same, pool_snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUARD = 4096
CANARY = 0xA5


def unchanged(pools, fn, exc):
    before = [pool_snapshot(p) for p in pools]
    with pytest.raises(exc) as ei:
        fn()
    assert isinstance(ei.value, PktbufError), type(ei.value)
    for b, p in zip(before, pools):
        assert_same(b, pool_snapshot(p))
    return ei.value


@pytest.fixture
def pools(domain):
    return (PktmbufPool(64, 16, 2048 + 128, domain=domain, name="p"),
            PktmbufPool(64, 16, 1024, domain=domain, name="q"))


def packet(pool, lens, fill=None):
    """A chained packet whose segments hold ``lens`` bytes (0 allowed) with a known pattern."""
    segs = []
    k = 0
    for n in lens:
        m = pool.alloc()
        if n:
            m.append(n)[:] = (np.arange(k, k + n) * 7 + 3) % 251 if fill is None else fill
        k += n
        segs.append(m)
    for s in segs[1:]:
        segs[0].chain(s)
    return segs[0], ((np.arange(k) * 7 + 3) % 251).astype(np.uint8)


def canaried(n):
    big = np.full(n + 2 * GUARD, CANARY, np.uint8)
    return big, big[GUARD:GUARD + n]


def assert_canaries(big, n):
    assert (big[:GUARD] == CANARY).all(), "bytes written in front of the buffer"
    assert (big[GUARD + n:] == CANARY).all(), "bytes written after the buffer"


# ---------------------------------------------------------------------------------------------
# defect 1: a zero-length segment in the middle of a chain made pktmbuf_read write in front of
# its destination buffer (negative chunk length)

def test_read_across_an_empty_middle_segment(pools):
    p, _ = pools
    m, want = packet(p, [100, 0, 100])
    big, buf = canaried(10)
    addr = int(D.pktmbuf_read(p.domain.state, m.handle, 150, 10, buf))
    assert addr > 0
    assert_canaries(big, 10)
    got = buf if addr == buf.ctypes.data else m.read(150, 10)
    assert bytes(got) == bytes(want[150:160])
    big, out = canaried(10)
    assert bytes(m.read(150, 10, out=out)) == bytes(want[150:160])
    assert_canaries(big, 10)
    m.free()
    assert p.audit() == 64


@pytest.mark.parametrize("lens", [[1024, 0, 100], [100, 0, 100], [0, 100], [100, 0], [0, 0, 5],
                                  [100, 100, 100], [100, 125, 150], [1000, 1, 1000],
                                  [3, 0, 0, 4, 0, 5]])
def test_read_at_every_offset(pools, lens):
    """DPDK's test_pktmbuf_read_from_chain segment sets (and more zero-length ones): every
    offset, a spread of lengths, into canaried buffers, compared byte for byte."""
    p, _ = pools
    m, want = packet(p, lens)
    total = sum(lens)
    st = p.domain.state
    for off in range(total + 1):
        for length in sorted({0, 1, 2, 7, 99, 101, total - off}):
            if length > total - off or length < 0:
                continue
            big, buf = canaried(max(length, 1))
            addr = int(D.pktmbuf_read(st, m.handle, off, length, buf))
            assert addr > 0, (off, length, addr)
            assert_canaries(big, max(length, 1))
            assert bytes(m.read(off, length)) == bytes(want[off:off + length]), (off, length)
        assert int(D.pktmbuf_read(st, m.handle, off, total - off + 1, canaried(total + 2)[1])) == -34
    m.free()
    assert p.audit() == 64


@pytest.mark.parametrize("lens", [[1024, 0, 100], [100, 0, 100], [0, 0, 7], [7, 0, 0]])
def test_copy_at_every_offset(pools, lens):
    p, q = pools
    m, want = packet(p, lens)
    total = sum(lens)
    for off in range(0, total + 1, max(1, total // 37)):
        for length in (None, 0, 1, 1000):
            c = m.copy(q, off, length)
            end = total if length is None else min(total, off + length)
            assert c.tobytes() == bytes(want[off:end])
            c.check()
            c.free()
    m.free()
    assert p.audit() == 64 and q.audit() == 64


def test_read_in_a_child_process_exits_cleanly():
    """The corruption was silent: right bytes, then an abort at exit.  Run it in a child."""
    code = textwrap.dedent("""
        import numpy as np, pktbuf
        d = pktbuf.Domain(max_objects=1 << 12, max_ring_slots=1 << 13)
        p = pktbuf.PktmbufPool(16, 0, 512, domain=d)
        a, b, c = p.alloc(), p.alloc(), p.alloc()
        a.append(100)[:] = 1; c.append(100)[:] = 2
        a.chain(b); a.chain(c)
        for _ in range(200):
            assert bytes(a.read(150, 10)) == b"\\x02" * 10
        a.free()
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def test_lengths_that_disagree_never_overrun(pools):
    """The same class: segment walks trusted pkt_len.  A packet whose lengths disagree (made
    here by appending through a segment, which DPDK does not forbid) must not make read, copy
    or linearize touch memory outside the buffers: linearize counts the bytes it moves."""
    p, q = pools
    region = p.region.array

    def outside(m):
        mine = np.zeros(region.size, bool)
        for s in m.segments():
            b = s.buffer
            o = b.ctypes.data - p.region.address
            mine[o:o + b.size] = True
        return ~mine

    # fits: the head's tailroom (2048 - 100) holds the 1050 bytes; all of them move
    m, _ = packet(p, [100, 50])
    m.segments()[1].append(1000)     # the second segment grows; the head's pkt_len does not
    assert m.pkt_len == 150
    out, before = outside(m), region.copy()
    m.linearize()
    assert m.data_len == 1150 and m.nb_segs == 1
    assert (region[out] == before[out]).all(), "linearize wrote outside the packet's buffers"
    m.free()
    # does not fit: 1010 bytes to move, 48 bytes of tailroom (pkt_len says 10: it would have
    # copied 1010 bytes past the end of the head's buffer)
    m, _ = packet(p, [2000, 10])
    m.segments()[1].append(1000)
    assert m.pkt_len == 2010
    unchanged(pools, m.linearize, NoRoom)
    m.free()
    # pkt_len larger than the segments hold: read and copy report it instead of walking off
    m, _ = packet(p, [100, 50])
    m.segments()[1].trim(50)
    assert m.pkt_len == 150
    big, buf = canaried(40)
    assert int(D.pktmbuf_read(p.domain.state, m.handle, 110, 40, buf)) == -14
    assert_canaries(big, 40)
    unchanged(pools, lambda: m.read(110, 40), SanityCheckError)
    unchanged(pools, lambda: m.copy(q), SanityCheckError)
    unchanged(pools, lambda: m.copy(q, 60), SanityCheckError)
    c = m.copy(q, 60, 40)                                   # within what is there
    assert c.tobytes() == m.read(60, 40).tobytes()
    c.free()
    m.free()
    assert p.audit() == 64 and q.audit() == 64


# ---------------------------------------------------------------------------------------------
# defects 2 and 3: clone/copy did not check the pool they were given

def test_copy_into_a_closed_pool(domain):
    p = PktmbufPool(16, 0, 512, domain=domain, name="src")
    gone = PktmbufPool(16, 0, 512, domain=domain, name="gone")
    m = p.alloc()
    m.append(10)
    gone.close()
    unchanged([p], lambda: m.copy(gone), InvalidArgument)
    unchanged([p], lambda: m.clone(gone), InvalidArgument)
    new = PktmbufPool(16, 0, 512, domain=domain, name="new")   # reuses gone's id
    assert new.id == gone.id
    unchanged([p, new], lambda: m.copy(gone), InvalidArgument)
    unchanged([p, new], lambda: m.clone(gone), InvalidArgument)
    assert new.avail_count == 16
    m.free()


def test_clone_and_copy_refuse_foreign_and_plain_pools(domain):
    p = PktmbufPool(16, 0, 512, domain=domain)
    other_dom = pktbuf.Domain(max_objects=1 << 12, max_ring_slots=1 << 13)
    foreign = PktmbufPool(16, 0, 512, domain=other_dom)
    plain = Mempool(16, 64, domain=domain)
    m = p.alloc()
    m.append(10)
    for bad in (foreign, plain, "x", 3, object()):
        unchanged([p, foreign, plain], lambda: m.clone(bad), InvalidArgument)
        unchanged([p, foreign, plain], lambda: m.copy(bad), InvalidArgument)
    assert m.refcnt == 1 and plain.avail_count == 16 and foreign.avail_count == 16
    m.free()
    assert p.audit() == 16 and plain.audit() == 16


# ---------------------------------------------------------------------------------------------
# defect 4: free_seg skipped the reference check free does

def test_free_seg_after_free_with_a_clone(pools):
    p, q = pools
    d = p.alloc()
    c = d.clone(q)
    d.free()                         # the application's reference; the clone keeps the buffer
    unchanged(pools, d.free_seg, DoubleFree)
    unchanged(pools, d.free, DoubleFree)
    unchanged(pools, lambda: d.append(1), DoubleFree)
    c.free()
    assert p.avail_count == 64 and p.audit() == 64 and q.audit() == 64


def test_free_seg_of_every_segment(pools):
    p, _ = pools
    m, _ = packet(p, [10, 20, 30])
    segs = m.segments()
    for s in segs:
        s.free_seg()
    for s in segs:
        unchanged(pools, s.free_seg, DoubleFree)
    assert p.avail_count == 64 and p.audit() == 64


# ---------------------------------------------------------------------------------------------
# defect 5: an mbuf attached to itself became its own clone and never went back

def test_attach_to_itself(pools):
    p, q = pools
    x = p.alloc()
    x.append(10)
    unchanged(pools, lambda: x.attach(x), InvalidArgument)
    unchanged(pools, lambda: x.attach(x.handle), InvalidArgument)
    assert x.refcnt == 1 and not x.is_indirect
    y = q.alloc()
    y.attach(x)                      # attaching another mbuf still works
    assert x.refcnt == 2
    y.free()
    x.free()
    assert p.avail_count == 64 and q.avail_count == 64


def test_attach_and_clone_never_overflow_the_buffer_refcnt(pools):
    """Clones of clones take the reference on the direct mbuf: its refcnt is the limit."""
    p, q = pools
    m = p.alloc()
    c = m.clone(q)
    m.refcnt_update(REFCNT_MAX - 2)
    assert m.refcnt == REFCNT_MAX
    unchanged(pools, lambda: c.clone(q), RefcntError)
    y = q.alloc()
    unchanged(pools, lambda: y.attach(c), RefcntError)
    m.refcnt_update(-(REFCNT_MAX - 2))
    for x in (y, c, m):
        x.free()
    assert p.audit() == 64 and q.audit() == 64


# ---------------------------------------------------------------------------------------------
# defect 6: read allocated `length` bytes before checking the range

@pytest.mark.parametrize("off,length", [(0, 2 ** 40), (2 ** 40, 0), (0, 2 ** 64), (2 ** 70, 1),
                                        (5, 6)])
def test_read_checks_the_range_first(pools, off, length):
    p, _ = pools
    m = p.alloc()
    m.append(10)
    unchanged(pools, lambda: m.read(off, length), OutOfRange)
    m.free()


# ---------------------------------------------------------------------------------------------
# defect 7: an explicit impossible cache size was lowered silently; alloc_bulk(n > size)

def test_cache_size(domain):
    with pytest.raises(InvalidArgument):
        PktmbufPool(16, cache_size=32, domain=domain)
    with pytest.raises(InvalidArgument):
        PktmbufPool(16, 17, domain=domain)
    assert domain.pools == []
    assert PktmbufPool(16, domain=domain).cache_size == 16          # the default is clamped
    assert PktmbufPool(1000, domain=domain).cache_size == 256
    assert PktmbufPool(16, 16, domain=domain).cache_size == 16


def test_alloc_bulk_beyond_the_pool_is_exhaustion(pools):
    p, _ = pools
    unchanged(pools, lambda: p.alloc_bulk(65), PoolExhausted)
    unchanged(pools, lambda: p.alloc_bulk(2 ** 40), PoolExhausted)
    unchanged(pools, lambda: p.alloc_bulk(-1), InvalidArgument)


# ---------------------------------------------------------------------------------------------
# defect 8: errors that were not PktbufError, and input accepted by accident

def test_garbage_arguments_raise_pktbuf_errors(pools, domain):
    garbage_battery(pools, domain)


def test_garbage_arguments_compile_nothing(pools, domain):
    """Odd arguments never reach a kernel as a new type: a second run of the battery (and of
    the lcore checks) compiles nothing, and the first compiles only canonical signatures."""
    def battery():
        garbage_battery(pools, domain)
        for lc in (500, 1.5, True, "0"):
            lcore_battery(pools, lc)
    run_battery_without_new_specialisations(battery)


def garbage_battery(pools, domain):
    p, q = pools
    m = p.alloc()
    m.append(10)
    t = p.alloc()
    cases = [
        (lambda: m.adj(2 ** 64), OutOfRange), (lambda: m.trim(2 ** 64), OutOfRange),
        (lambda: m.read(2 ** 64, 2 ** 64), OutOfRange), (lambda: m.copy(q, 2 ** 64), OutOfRange),
        (lambda: m.copy(q, 0, 2 ** 64).free(), None), (lambda: m.append(2 ** 64), NoRoom),
        (lambda: m.prepend(2 ** 64), NoRoom),
        (lambda: Mbuf(domain, None), InvalidHandle), (lambda: Mbuf(domain, 2 ** 70), InvalidHandle),
        (lambda: Mbuf(domain, "3"), InvalidHandle), (lambda: Mbuf(domain, 3.0), InvalidHandle),
        (lambda: Mbuf(domain, True), InvalidHandle), (lambda: Mbuf("dom", 3), InvalidArgument),
        (lambda: m.set(port=70000), InvalidArgument), (lambda: m.set(port=-1), InvalidArgument),
        (lambda: m.set(port=1.0), InvalidArgument), (lambda: m.set(nb_segs=3), InvalidArgument),
        (lambda: m.clone(pool="x"), InvalidArgument), (lambda: m.copy(pool=1), InvalidArgument),
        (lambda: m.chain(float(t.handle)), InvalidHandle), (lambda: m.chain(str(t.handle)), InvalidHandle),
        (lambda: m.chain(None), InvalidHandle),
        (lambda: m.refcnt_update("1"), InvalidArgument), (lambda: m.refcnt_update(1.0), InvalidArgument),
        (lambda: m.refcnt_update(True), InvalidArgument),
        (lambda: m.adj(1.0), InvalidArgument), (lambda: m.append("1"), InvalidArgument),
        (lambda: m.read(0.0, 1), InvalidArgument), (lambda: m.mtod(1.5), InvalidArgument),
        (lambda: m.dump(None), InvalidArgument), (lambda: m.dynfield(92.0, 1), InvalidArgument),
        (lambda: m.set_dynfield(92, 1, 256), InvalidArgument),
        (lambda: m.set_dynfield(92, 1, 1.5), InvalidArgument),
        (lambda: m.check(header="yes"), InvalidArgument),
        (lambda: m.append_bytes(12), InvalidArgument),
        (lambda: p.alloc_bulk(2, raw="no"), InvalidArgument),
        (lambda: p.alloc_bulk(2, out=np.empty(2, np.int64)), InvalidArgument),
        (lambda: p.free_bulk([m.handle + 0.5]), InvalidHandle),
        (lambda: p.free_bulk("abc"), InvalidArgument), (lambda: p.free_bulk(None), InvalidArgument),
        (lambda: p.free_bulk([[m.handle]]), InvalidArgument),
        (lambda: p.free_bulk([True]), InvalidHandle),
        (lambda: p.free_bulk([m.handle], staged="no"), InvalidArgument),
        (lambda: p.mbuf(None), InvalidHandle), (lambda: domain.pool_of("1"), InvalidHandle),
        (lambda: p.obj_view(None), InvalidHandle), (lambda: p.put(1.0), InvalidHandle),
        (lambda: PktmbufPool(8, 0, domain="d"), InvalidArgument),
        (lambda: PktmbufPool(8, 0, name=3, domain=domain), InvalidArgument),
        (lambda: pktbuf.Domain(debug="on"), InvalidArgument),
        (lambda: domain.dyn.register_field(None, 1), InvalidArgument),
        (lambda: domain.dyn.register_field("f", 1.0), InvalidArgument),
        (lambda: domain.dyn.lookup_field("nope"), PktbufError),
    ]
    for fn, exc in cases:
        if exc is None:
            fn()
        else:
            unchanged(pools, fn, exc)
    m.free()
    t.free()
    assert p.audit() == 64 and q.audit() == 64


@pytest.mark.parametrize("lcore", [500, 128, -2, 1.5, "0", True, 2 ** 70])
def test_lcore_is_checked_by_every_call(pools, lcore):
    lcore_battery(pools, lcore)


def lcore_battery(pools, lcore):
    p, q = pools
    m = p.alloc()
    m.append(10)
    c = m.clone(q)
    t = p.alloc()
    m.chain(t)
    calls = [lambda: p.alloc(lcore=lcore), lambda: p.alloc_bulk(1, lcore=lcore),
             lambda: p.free_bulk([c.handle], lcore=lcore), lambda: c.free(lcore=lcore),
             lambda: c.free_seg(lcore=lcore), lambda: m.clone(q, lcore=lcore),
             lambda: m.copy(q, lcore=lcore), lambda: c.detach(lcore=lcore),
             lambda: m.linearize(lcore=lcore), lambda: p.cache_flush(lcore),
             lambda: p.cache_count(lcore), lambda: p.get_bulk(1, lcore=lcore),
             lambda: p.domain.free_bulk([c.handle], lcore=lcore)]
    for fn in calls:
        unchanged(pools, fn, InvalidArgument)
    c.free()
    m.free()
    assert p.audit() == 64 and q.audit() == 64


def test_odd_handle_arrays_are_normalised(pools):
    """Other dtypes, byte orders, strides and read-only arrays free the same mbufs (the
    caller's array is never written)."""
    p, _ = pools
    for conv in (lambda a: a.copy(), lambda a: a.astype(np.int64), lambda a: a.astype(">i4"),
                 lambda a: np.repeat(a, 2)[::2], lambda a: a[::-1],
                 lambda a: a.astype(np.uint16), lambda a: list(a), lambda a: tuple(a)):
        a = p.alloc_bulk(5)
        b = conv(a)
        if isinstance(b, np.ndarray):
            b.flags.writeable = False
        p.free_bulk(b)
        assert p.avail_count == 64
    assert p.audit() == 64


# ---------------------------------------------------------------------------------------------
# defect 9: Mbufs know their domain and their pool's generation; raw ints do not

def test_a_stale_mbuf_is_refused_after_its_pool_id_is_reused(domain):
    p = PktmbufPool(8, 0, 512, domain=domain, name="old")
    m = p.alloc()
    h = m.handle
    p.close(force=True)
    with pytest.raises(InvalidHandle, match="stale"):
        m.append(1)
    new = PktmbufPool(8, 0, 512, domain=domain, name="new")
    assert new.id == p.id and new.obj_base == p.obj_base     # same id, same handles
    x = new.alloc_bulk(8)
    assert h in x
    snap = pool_snapshot(new)
    for fn in (lambda: m.append(1), m.free, m.free_seg, lambda: m.refcnt, lambda: m.data,
               lambda: m.clone(new), lambda: new.free_bulk([m]), lambda: Mbuf(domain, m)):
        with pytest.raises(InvalidHandle, match="stale"):
            fn()
    assert_same(snap, pool_snapshot(new))
    # the raw int is only checked for "an allocated mbuf of a live pool": it is accepted
    # (it names an allocated mbuf of the new pool) ...
    assert Mbuf(domain, h).refcnt == 1
    new.free_bulk([h])
    # ... and refused once that mbuf is free
    with pytest.raises(DoubleFree):
        new.free_bulk([h])
    new.free_bulk([k for k in x if k != h])
    assert new.audit() == 8


def test_a_closed_pool_refuses_everything(domain):
    p = PktmbufPool(8, 4, 512, domain=domain)
    m = p.alloc()
    p.close(force=True)
    for fn in (lambda: p.alloc(), lambda: p.alloc_bulk(1), lambda: p.avail_count,
               lambda: p.in_use_count, lambda: p.cache_flush(0), lambda: p.cache_count(0),
               lambda: p.stats(), lambda: p.audit(), lambda: p.obj_view(0)):
        with pytest.raises(InvalidArgument):
            fn()
    with pytest.raises(InvalidHandle):
        domain.free_bulk([m.handle])


def test_mbufs_of_another_domain_are_refused(pools):
    p, q = pools
    other = pktbuf.Domain(max_objects=1 << 12, max_ring_slots=1 << 13)
    r = PktmbufPool(64, 0, 512, domain=other)
    a, x = p.alloc(), r.alloc()
    pools3 = (p, q, r)
    for fn in (lambda: a.chain(x), lambda: a.attach(x), lambda: p.free_bulk([x]),
               lambda: Mbuf(p.domain, x), lambda: p.domain.pool_of(x), lambda: q.put_bulk([x])):
        unchanged(pools3, fn, InvalidHandle)
    a.free()
    x.free()
    assert p.audit() == 64 and r.audit() == 64


def test_force_close_refuses_pools_linked_to_others(pools):
    """Closing a pool whose mbufs other pools' mbufs point at (or the other way round)
    would leave them pointing at unmapped memory: refused even with force."""
    p, q = pools
    m = p.alloc()
    m.append(10)
    c = m.clone(q)                   # q's mbuf uses p's buffer
    with pytest.raises(Busy):
        p.close(force=True)
    with pytest.raises(Busy):
        q.close(force=True)
    assert bytes(c.read(0, 10)) == bytes(m.read(0, 10))
    c.free()
    t = q.alloc()
    m.chain(t)                       # p's mbuf links to q's
    with pytest.raises(Busy):
        q.close(force=True)
    with pytest.raises(Busy):
        p.close(force=True)
    m.free()
    q.close()
    p.close()


# ---------------------------------------------------------------------------------------------
# defect 10: fields a user sets, refcnt of one segment, binding a thread to an lcore

def test_field_setters(pools):
    p, _ = pools
    m = p.alloc()
    m.port = 3
    m.vlan_tci, m.vlan_tci_outer, m.timesync = 0xFFFF, 7, 9
    m.packet_type, m.hash, m.hash_hi = 0xFFFFFFFF, 0x12345678, 5
    m.ol_flags = 1 << 60
    m.tx_offload = 2 ** 64 - 1
    assert (m.port, m.vlan_tci, m.vlan_tci_outer, m.timesync, m.packet_type, m.hash,
            m.hash_hi, m.ol_flags, m.tx_offload) == (3, 0xFFFF, 7, 9, 0xFFFFFFFF, 0x12345678, 5,
                                                     1 << 60, 2 ** 64 - 1)
    m.set_tx_offload(l2_len=14, l3_len=20, l4_len=8)
    assert m.tx_offload_fields()["l3_len"] == 20
    for name, bad in (("port", 0x10000), ("vlan_tci", -1), ("packet_type", 2 ** 32),
                      ("hash", 2 ** 32), ("ol_flags", 2 ** 64), ("tx_offload", -1),
                      ("timesync", 1.0), ("port", None)):
        unchanged(pools, lambda: setattr(m, name, bad), InvalidArgument)
    unchanged(pools, lambda: m.set_tx_offload(l2_len=128), InvalidArgument)
    unchanged(pools, lambda: m.set(port=1, vlan_tci=-1), InvalidArgument)   # all or nothing
    assert m.port == 3
    # the mbuf's kind is not a flag: setting INDIRECT on a direct mbuf would make the free
    # path detach it from a buffer it never had
    unchanged(pools, lambda: setattr(m, "ol_flags", F_INDIRECT), InvalidArgument)
    m.free()
    assert p.audit() == 64


def test_refcnt_of_one_segment(pools):
    p, q = pools
    m, _ = packet(p, [10, 10])
    t = m.segments()[1]
    t.refcnt = 2                     # the payload segment is shared; the head is not
    assert (m.refcnt, t.refcnt) == (1, 2)
    for bad in (0, REFCNT_MAX + 1, -1, 1.0):
        unchanged(pools, lambda: setattr(t, "refcnt", bad), PktbufError)
    c = t.clone(q)                   # one clone holds a reference: at least 2 stays
    assert t.refcnt == 3
    unchanged(pools, lambda: setattr(t, "refcnt", 1), RefcntError)
    c.free()
    m.free()                         # t keeps the reference set for it
    assert t.refcnt == 1
    t.free()
    assert p.avail_count == 64 and p.audit() == 64


def test_chain_onto_a_shared_packet_is_refused(pools):
    """Chaining onto a packet other holders also free would free the new segment twice."""
    p, _ = pools
    h, t = p.alloc(), p.alloc()
    h.refcnt_update(1)               # two holders of h
    unchanged(pools, lambda: h.chain(t), InvalidArgument)
    h.refcnt_update(-1)
    h.chain(t)
    a, b = p.alloc(), p.alloc()
    b.refcnt = 2                     # b shared: as the tail of two packets it is fine ...
    a.chain(b)
    h.chain(b)
    x = p.alloc()
    unchanged(pools, lambda: a.chain(x), InvalidArgument)   # ... but not to chain after it
    for y in (a, h, x):
        y.free()
    assert p.avail_count == 64 and p.audit() == 64


def test_linearize_a_shared_packet_is_refused(pools):
    p, _ = pools
    m, want = packet(p, [10, 10])
    m.refcnt_update(1)
    unchanged(pools, m.linearize, InvalidArgument)
    m.refcnt_update(-1)
    m.linearize()
    assert m.tobytes() == bytes(want)
    m.free()
    assert p.avail_count == 64 and p.audit() == 64


def test_copy_into_a_pool_without_data_room(domain):
    p = PktmbufPool(8, 0, 512, domain=domain)
    z = PktmbufPool(8, 0, 0, priv_size=64, domain=domain)
    m = p.alloc()
    m.append(10)
    unchanged([p, z], lambda: m.copy(z), InvalidArgument)
    m.copy(z, 10).free()             # nothing to copy: one empty mbuf is fine
    m.free()


def test_lcore_bind(pools):
    from pktbuf import lcore as L
    p, _ = pools
    with L.bind(5) as lc:
        assert lc == 5 and L.facade_lcore() == 5
        a = p.alloc_bulk(3)
        # a miss refills half the cache (8) and hands 3 out of it
        assert p.cache_count(5) == 5 and p.cache_count() == 5
        p.free_bulk(a)
        with L.bind(L.LCORE_ANY):
            assert L.facade_lcore() == L.LCORE_ANY
        assert L.facade_lcore() == 5
        errs = []

        def other():
            try:
                L.bind(5)
            except InvalidArgument as e:
                errs.append(e)
            with L.bind(6):
                errs.append(L.facade_lcore())
            with L.bind(L.LCORE_ANY):     # shared by any number of threads
                errs.append(L.facade_lcore())

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert isinstance(errs[0], InvalidArgument) and errs[1:] == [6, L.LCORE_ANY]
    assert L.facade_lcore() != 5
    for bad in (128, -2, 1.5, "1", True, None):
        with pytest.raises(InvalidArgument):
            L.bind(bad)
    mine = L.facade_lcore()        # this thread's automatic id is not another thread's
    errs = []
    t = threading.Thread(target=lambda: errs.append(pytest.raises(InvalidArgument, L.bind, mine)))
    t.start()
    t.join()
    assert errs
    # a thread that bound an id and died without releasing it gives the id back
    t = threading.Thread(target=lambda: L.bind(7))
    t.start()
    t.join()
    with L.bind(7):
        pass
