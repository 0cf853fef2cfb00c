"""Snapshots of everything a pool owns, to prove a failed call changed nothing."""
import numpy as np

from pktbuf.buf.mempool.layout import MAX_LCORE
from pktbuf.buf.ring.kernels import RING_HDR_WORDS


def pool_snapshot(pool):
    d = pool.domain
    st = d.state
    pid = pool.id
    desc = st.mb[pool.obj_base:pool.obj_base + pool.n].copy()
    hdr = st.ring_hdr[pid * RING_HDR_WORDS:(pid + 1) * RING_HDR_WORDS].copy()
    slots = st.ring_slots[pool._ring_base:pool._ring_base + pool._ring_size].copy()
    clen = d.cache_len_view()[pid].copy()
    cobj = d.cache_objs_view()[pid].copy()
    # cache slots beyond each cache's length are garbage by design: mask them
    for lc in range(MAX_LCORE):
        cobj[lc, clen[lc]:] = 0
    data = pool.region.array.copy()
    return dict(desc=desc, hdr=hdr, slots=slots, clen=clen, cobj=cobj, data=data)


def assert_same(a, b):
    for k in a:
        assert np.array_equal(a[k], b[k]), f"pool state changed: {k}"
