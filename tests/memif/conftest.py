import pytest

import pktbuf
from pktbuf import Memif

from .helpers import exchange, payloads, sock_name


@pytest.fixture(scope="session")
def warm():
    """Compile (or load from the cache) every memif kernel once in this process, before any
    test starts child processes that would otherwise compile them concurrently."""
    pool = pktbuf.PktmbufPool(4096, name="warm")
    for kw in ({}, {"buffer_size": 1024}, {"buffer_size": 4096}, {"force_general": True}):
        name = sock_name("warm")
        s = Memif.server(name, pool=pool, **kw)
        c = Memif.client(name, pool=pool, ring_size_log2=6, **kw)
        assert c.wait_connected(10) and s.wait_connected(10)
        p = payloads([64, 3000])
        exchange(c, s, pool, p, [None, 1000])
        exchange(s, c, pool, p, [None, 1000])
        c.close()
        s.close()
    name = sock_name("warmzc")
    s = Memif.server(name, pool=pool)
    c = Memif.client(name, pool=pool, zero_copy=True, ring_size_log2=6)
    assert c.wait_connected(10) and s.wait_connected(10)
    exchange(c, s, pool, payloads([64, 3000]), [None, 1000])
    exchange(s, c, pool, payloads([64, 3000]), [None, 1000])
    c.close()
    s.close()
    from pktbuf.idle import idle_backoff
    from pktbuf.drivers.memif.poll import memif_link_wait, memif_rx_wait
    idle_backoff(0, 1)
    memif_rx_wait(c.rx_queue(0), 0, 0)          # link down now: returns after 1 ms
    memif_link_wait(c.rx_queue(0), 0)
    yield
    pool.close(force=True)


@pytest.fixture
def pool(warm):
    p = pktbuf.PktmbufPool(8192, name="memif-test")
    yield p
    p.close(force=True)
