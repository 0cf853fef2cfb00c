"""Bad input: a clear exception from the facade, and every pool exactly as it was."""
import numpy as np
import pytest

from pktbuf import (ChainTooLong, DoubleFree, InvalidArgument, InvalidHandle, Mempool, NoRoom,
                    OutOfRange, PktmbufPool, PoolExhausted, RefcntError)

from .snap import assert_same, pool_snapshot


@pytest.fixture
def pools(domain):
    p = PktmbufPool(64, 16, 1024, domain=domain)
    q = PktmbufPool(64, 16, 1024, domain=domain)
    return p, q


def unchanged(pools, fn, exc):
    before = [pool_snapshot(p) for p in pools]
    with pytest.raises(exc):
        fn()
    for b, p in zip(before, pools):
        assert_same(b, pool_snapshot(p))


def test_unknown_handles(pools, domain):
    p, q = pools
    a = p.alloc_bulk(4, lcore=0)
    other = PktmbufPool(8, 0, domain=None)       # another domain: its handles mean nothing here
    plain = Mempool(8, 8, domain=domain)
    obj = plain.get()
    for bad in ([a[0], 10 ** 6], [a[0], -2], [a[1], 2 ** 31 - 1], [obj], [a[0], 4000]):
        unchanged(pools, lambda: p.free_bulk(np.array(bad, np.int64)), InvalidHandle)
    with pytest.raises(InvalidHandle):
        p.mbuf(10 ** 6)
    with pytest.raises(InvalidHandle):
        p.mbuf(obj)
    unchanged(pools, lambda: p.free_bulk(np.array([1.0])), InvalidHandle)
    unchanged(pools, lambda: p.free_bulk(np.zeros((2, 2), np.int32)), InvalidArgument)
    other.close()


def test_double_frees(pools):
    p, q = pools
    a = p.alloc_bulk(6, lcore=0)
    p.free_bulk(a[:1])
    unchanged(pools, lambda: p.free_bulk(a[:2]), DoubleFree)                 # a[0] already free
    unchanged(pools, lambda: p.free_bulk([a[1], a[2], a[1]]), DoubleFree)   # twice in one call
    h = p.mbuf(a[3])
    h.chain(int(a[4]))
    unchanged(pools, lambda: p.free_bulk([a[3], a[4]]), DoubleFree)         # segment listed too
    c = p.mbuf(a[5]).clone(q)
    unchanged(pools, lambda: p.free_bulk([a[5], a[5]]), DoubleFree)         # clone holds a ref
    m = p.mbuf(a[5])
    m.free()
    with pytest.raises(DoubleFree):
        m.free()                  # the clone's reference is not ours to drop
    c.free()                      # the last reference: m goes back to its pool
    with pytest.raises(DoubleFree):
        m.append(1)
    p.free_bulk([a[1], a[2], a[3]])
    assert p.avail_count == 64 and q.avail_count == 64


def test_refcnt_underflow_and_overflow(pools):
    p, _ = pools
    m = p.alloc()
    unchanged(pools, lambda: m.refcnt_update(-1), RefcntError)
    m.refcnt_update(0xFFFE - 1)
    assert m.refcnt == 0xFFFE
    unchanged(pools, lambda: m.refcnt_update(1), RefcntError)
    m.refcnt_update(-(0xFFFE - 1))
    m.free()


def test_room_and_range_errors(pools):
    p, _ = pools
    m = p.alloc()
    m.append(100)
    unchanged(pools, lambda: m.append(m.tailroom + 1), NoRoom)
    unchanged(pools, lambda: m.prepend(m.headroom + 1), NoRoom)
    unchanged(pools, lambda: m.adj(101), OutOfRange)
    unchanged(pools, lambda: m.trim(101), OutOfRange)
    unchanged(pools, lambda: m.read(50, 51), OutOfRange)
    unchanged(pools, lambda: m.append(-1), InvalidArgument)
    unchanged(pools, lambda: m.adj(-1), InvalidArgument)
    t = p.alloc()
    t.append(10)
    m.chain(t)
    unchanged(pools, lambda: m.adj(101), OutOfRange)      # only the first segment counts
    unchanged(pools, lambda: m.trim(11), OutOfRange)      # only the last segment counts
    unchanged(pools, lambda: m.chain(m), InvalidArgument)
    unchanged(pools, lambda: m.chain(t), InvalidArgument)
    m.free()


def test_chain_past_the_segment_limit(pools):
    p, _ = pools
    a, b = p.alloc(), p.alloc()
    p.domain.state.mb[a.handle]["nb_segs"] = 0xFFFF
    unchanged(pools, lambda: a.chain(b), ChainTooLong)
    p.domain.state.mb[a.handle]["nb_segs"] = 1
    p.free_bulk([a.handle, b.handle])


@pytest.mark.parametrize("n", [-1, -2 ** 70])
def test_negative_counts(pools, n):
    p, _ = pools
    unchanged(pools, lambda: p.alloc_bulk(n), InvalidArgument)


@pytest.mark.parametrize("n", [65, 1024, 2 ** 32 - 1, 2 ** 33, 2 ** 70])
def test_counts_beyond_the_pool_are_exhaustion(pools, n):
    """As DPDK's test_neg_pktmbuf_alloc_bulk: more than the pool holds is -ENOENT, the error
    the README promises for exhaustion, with nothing taken (and no huge array allocated)."""
    p, _ = pools
    unchanged(pools, lambda: p.alloc_bulk(n), PoolExhausted)
    unchanged(pools, lambda: p.get_bulk(n), PoolExhausted)


@pytest.mark.parametrize("n", [True, 1.0, "2", None])
def test_count_types(pools, n):
    p, _ = pools
    unchanged(pools, lambda: p.alloc_bulk(n), InvalidArgument)


def test_exhausted(pools):
    p, _ = pools
    held = p.alloc_bulk(60, lcore=0)
    unchanged(pools, lambda: p.alloc_bulk(5, lcore=0), PoolExhausted)
    unchanged(pools, lambda: p.alloc_bulk(64, lcore=1), PoolExhausted)
    # a clone needs one mbuf per segment: a 5-segment packet with 4 mbufs left is refused,
    # with every pool exactly as it was (no partial clone taken and given back)
    head = p.mbuf(held[0])
    head.append(800)[:] = 1
    for i, h in enumerate(held[1:5]):
        p.mbuf(h).append(800)[:] = 2 + i
        head.chain(int(h))
    assert p.avail_count == 4
    unchanged(pools, lambda: head.clone(p, lcore=0), PoolExhausted)
    # a copy needs one mbuf per 896 bytes (data room 1024 - headroom 128): 4000 bytes need 5
    assert head.pkt_len == 4000
    unchanged(pools, lambda: head.copy(p, lcore=0), PoolExhausted)
    c = head.copy(p, off=4000 - 4 * 896, lcore=0)           # 4 mbufs: exactly what is left
    assert c.nb_segs == 4 and c.tobytes() == head.tobytes()[-4 * 896:]
    assert p.avail_count == 0
    c.free()
    p.free_bulk(held[5:])
    head.free()
    assert p.avail_count == 64 and p.audit() == 64


def test_bad_out_arrays(pools):
    p, _ = pools
    for out in (np.empty(3, np.int32), np.empty(8, np.int64), np.empty(8, np.int32)[::2],
                np.empty((8, 1), np.int32)):
        unchanged(pools, lambda: p.alloc_bulk(4, out=out), InvalidArgument)


def test_attach_rules(pools):
    p, q = pools
    m, x = p.alloc(), q.alloc()
    x.refcnt_update(1)
    unchanged(pools, lambda: x.attach(m), InvalidArgument)   # refcnt 2
    x.refcnt_update(-1)
    c = m.clone(q)
    unchanged(pools, lambda: c.attach(m), InvalidArgument)   # already indirect
    for y in (m, x, c):
        y.free()
    assert p.avail_count == 64 and q.avail_count == 64


def test_closed_pool(domain):
    p = PktmbufPool(8, 0, domain=domain)
    a = p.alloc_bulk(2)
    p.free_bulk(a)
    p.close()
    with pytest.raises(InvalidArgument):
        p.alloc_bulk(1)
    with pytest.raises(InvalidHandle):
        domain.free_bulk(a)
