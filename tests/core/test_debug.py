"""The debug switch turns on checks inside kernels called from user code."""
import numpy as np
from numba import njit

import pktbuf
from pktbuf import PktmbufPool
from pktbuf.errors import E_ALREADY, E_BADF
from pktbuf.kernels import pktmbuf_free, pktmbuf_free_bulk, pktmbuf_free_bulk_staged


@njit(cache=True)
def user_free(dom, mbufs, n, staged):
    if staged:
        return pktmbuf_free_bulk_staged(dom, 0, mbufs, n)
    return pktmbuf_free_bulk(dom, 0, mbufs, n)


@njit(cache=True)
def user_free_one(dom, h):
    return pktmbuf_free(dom, 0, h)


def test_debug_checks_in_kernels(domain):
    p = PktmbufPool(64, 8, domain=domain)
    assert not domain.debug
    domain.debug = True
    a = p.alloc_bulk(4, lcore=0)
    for staged in (False, True):
        dup = np.array([a[0], a[1], a[0]], np.int32)
        assert user_free(domain.state, dup, 3, staged) == E_ALREADY
        assert p.avail_count == 60, "nothing freed"
        assert user_free(domain.state, np.array([a[0], 99999], np.int32), 2, staged) == E_BADF
        assert p.avail_count == 60
    assert user_free(domain.state, a[:2], 2, False) == 0
    assert user_free_one(domain.state, int(a[0])) == E_ALREADY
    assert user_free_one(domain.state, int(a[2])) == 0
    assert p.avail_count == 63
    domain.debug = False
    assert user_free(domain.state, a[3:], 1, False) == 0
    assert p.avail_count == 64 and p.audit() == 64


def test_set_debug_reaches_new_domains():
    pktbuf.set_debug(True)
    try:
        assert pktbuf.Domain(max_objects=1024, max_ring_slots=2048).debug
    finally:
        pktbuf.set_debug(False)
    assert not pktbuf.Domain(max_objects=1024, max_ring_slots=2048).debug
