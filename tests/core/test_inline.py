"""pktbuf.inline: the same results as pktbuf.kernels, and refused in runtime-on code."""
import numpy as np
import pytest
from numba import njit
from numba.core.errors import NumbaError

from pktbuf import PktmbufPool, kernel
from pktbuf import inline as inl
from pktbuf.kernels import LCORE_ANY


@kernel
def churn(dom, pid, lcore, out, n, rounds):
    for _ in range(rounds):
        for i in range(n):
            out[i] = inl.pktmbuf_alloc(dom, pid, lcore)
        for i in range(n):
            inl.pktmbuf_free(dom, lcore, out[i])
    got = inl.mempool_get_bulk(dom, pid, lcore, out, n)
    if got == 0:
        inl.mempool_put_bulk(dom, pid, lcore, out, n)
    return got


def test_inline_kernels_keep_the_pool_whole(domain):
    p = PktmbufPool(256, 32, domain=domain)
    out = np.empty(64, np.int32)
    for lc in (0, LCORE_ANY):
        assert churn(domain.state, p.id, lc, out, 64, 100) == 0
        p.cache_flush(0)
        assert p.avail_count == 256 and p.audit() == 256
    # exhaustion is reported like the kernel's: a negative handle, nothing taken
    held = p.alloc_bulk(256, lcore=LCORE_ANY)
    assert churn(domain.state, p.id, LCORE_ANY, out, 1, 0) == -2
    p.free_bulk(held)


def test_inline_refused_where_numba_counts_references(domain):
    p = PktmbufPool(16, 0, domain=domain)

    @njit
    def ordinary(dom, pid):
        return inl.pktmbuf_alloc(dom, pid, 0)

    with pytest.raises(NumbaError, match="without Numba's runtime"):
        ordinary(domain.state, p.id)
