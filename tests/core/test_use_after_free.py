"""A freed mbuf used again is refused as a *use after free* (``UseAfterFree``, a
``DoubleFree``: existing handlers still catch it); freeing it again stays a ``DoubleFree``
named as one.  Nothing changes in the pool either way."""
import pytest

import pktbuf
from pktbuf.errors import DoubleFree, UseAfterFree


@pytest.fixture
def pool(domain):
    p = pktbuf.PktmbufPool(64, 0, domain=domain)
    yield p
    p.close(force=True)


def test_reading_a_freed_mbuf_whose_clones_hold_its_buffer(pool, domain):
    m = pool.alloc()
    m.append_bytes(b"x" * 100)
    clones = [m.clone(pool) for _ in range(2)]
    h = m.handle
    m.free()                                 # the application's reference is gone
    avail = pool.avail_count
    with pytest.raises(UseAfterFree, match="used after it was freed") as ei:
        pktbuf.Mbuf(domain, h).refcnt
    assert isinstance(ei.value, DoubleFree) and "double free" not in str(ei.value)
    with pytest.raises(UseAfterFree):
        m.refcnt                             # the old object: the same
    with pytest.raises(UseAfterFree):
        m.append(1)
    with pytest.raises(DoubleFree) as ei:    # a second free is a double free, named so
        m.free()
    assert not isinstance(ei.value, UseAfterFree) and "double free" in str(ei.value)
    with pytest.raises(DoubleFree) as ei:
        m.free_seg()
    assert not isinstance(ei.value, UseAfterFree)
    assert pool.avail_count == avail
    for c in clones:
        c.free()
    assert pool.avail_count == pool.n


def test_a_freed_mbuf_back_in_its_pool(pool, domain):
    m = pool.alloc()
    h = m.handle
    m.free()
    with pytest.raises(UseAfterFree):
        pktbuf.Mbuf(domain, h)
    with pytest.raises(DoubleFree):          # the handlers written for DoubleFree catch it
        m.data_len
    assert pool.avail_count == pool.n
