"""A domain in shared memory, mapped by a second process at the same addresses.

The domain's tables are a memfd and every pool's data sits in the domain's address window, so a
process that maps the same memfds at the same addresses can use the same mbufs: descriptors hold
virtual addresses, as DPDK's do, and they are valid there too.  Where the address is taken, the
attach fails with AddressInUse instead of mapping somewhere else.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pktbuf
from pktbuf.buf.mempool.layout import OBJ_ALLOC, OBJ_FREE
from pktbuf.shm import Window

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from pktbuf.shm import Window, Region
    from pktbuf.buf.mempool.layout import DOMAIN
    from pktbuf.buf.mbuf import layout  # dom.mb
    from pktbuf.kernels import pktmbuf_alloc_bulk, pktmbuf_free_bulk, pktmbuf_append, addr_u8
    info = json.loads(sys.argv[1])
    if info.get("squat"):
        # something of ours already sits where the domain must go
        squat = Window(4096, address=info["base"] + info["squat"])
    w = Window.attach(info["base"], info["size"])
    tables = Region.attach(info["tables_fd"], info["tables_size"], window=w, offset=0)
    region = Region.attach(info["region_fd"], info["region_size"], window=w,
                           offset=info["region_off"])
    from numba import njit
    dom = DOMAIN.attach(tables)

    @njit
    def fill(dom, got):
        for i in range(got.size):
            b = addr_u8(pktmbuf_append(dom, got[i], 3), 3)
            b[0], b[1], b[2] = i, i + 1, i + 2

    got = np.empty(4, np.int32)
    assert pktmbuf_alloc_bulk(dom, info["pid"], 5, got, 4) == 0
    fill(dom, got)
    theirs = np.array(info["free_these"], np.int32)
    assert pktmbuf_free_bulk(dom, 5, theirs, theirs.size) == 0
    print(json.dumps([int(h) for h in got]))
""")


def _run_child(info):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    fds = (info["tables_fd"], info["region_fd"])
    return subprocess.run([sys.executable, "-c", CHILD, json.dumps(info)], env=env,
                          pass_fds=fds, capture_output=True, text=True, timeout=600)


@pytest.fixture
def shared():
    dom = pktbuf.Domain(max_objects=1 << 14, max_ring_slots=1 << 15, max_data_bytes=1 << 26,
                        shared=True)
    pool = pktbuf.PktmbufPool(256, 0, domain=dom, name="shared")
    st = dom.state
    info = dict(base=dom.window.base, size=dom.window.size,
                tables_fd=st.memory.fd, tables_size=st.memory.size,
                region_fd=pool.region.fd, region_size=pool.region.size,
                region_off=pool.region.address - dom.window.base, pid=pool.id)
    yield dom, pool, info
    pool.close(force=True)
    st.memory.close()          # the tables' memfd (a Domain has no close: it lives on unused)


def test_second_process_uses_the_same_mbufs(shared):
    dom, pool, info = shared
    mine = pool.alloc_bulk(3)
    info["free_these"] = [int(h) for h in mine]
    r = _run_child(info)
    assert r.returncode == 0, r.stderr
    theirs = json.loads(r.stdout)
    st = dom.state
    # what the child allocated is allocated here, with the bytes it wrote
    for i, h in enumerate(theirs):
        assert int(st.mb[h]["state"]) == OBJ_ALLOC
        assert pktbuf.Mbuf(dom, h).tobytes() == bytes((i, i + 1, i + 2))
    # what it freed of ours is back in the pool
    for h in mine:
        assert int(st.mb[h]["state"]) == OBJ_FREE
    pool.free_bulk(np.array(theirs, np.int32))
    pool.cache_flush(5)                     # the child's lcore cache
    assert pool.audit() == pool.n


def test_attach_where_the_address_is_taken_fails_clearly(shared):
    dom, pool, info = shared
    info["free_these"] = []
    info["squat"] = pool.region.address - dom.window.base
    r = _run_child(info)
    assert r.returncode != 0
    assert "AddressInUse" in r.stderr and "same address in every process" in r.stderr, r.stderr
    assert pool.audit() == pool.n           # nothing happened to the domain


def test_window_attach_in_process(shared):
    dom, pool, info = shared
    with pytest.raises(pktbuf.AddressInUse):
        Window.attach(dom.window.base, dom.window.size)
