"""The call table (pktbuf.calltable): compiled code calls a kernel through a slot of this
process's table, the cached machine code finds the table of the process that loads it, and the
free kernels refuse (E_NOSYS, nothing freed) in a process whose slots are empty."""
import os
import subprocess
import sys
import textwrap

import numpy as np

from pktbuf import calltable as CT
from pktbuf._jit import cfunc_address, kernel
from pktbuf.errors import E_NOSYS
from pktbuf.rawmem import addr_view

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPARE = CT.NSLOTS - 1          # a slot no pktbuf path uses


@kernel(cfunc=True)
def _scaled_sum(addr, n, k):
    a = addr_view(addr, n, np.int32)
    s = 0
    for i in range(n):
        s += a[i]
    return np.int64(s * k)


@kernel
def _through_slot(slot, a, k):
    fn = CT.slot_address(slot)
    if fn == 0:
        return np.int64(E_NOSYS)
    return CT.call_address3(fn, a, np.int64(a.size), k)


def test_a_kernel_calls_through_a_slot():
    from numba import types
    a = np.arange(10, dtype=np.int32)
    before = CT.installed(SPARE)
    try:
        CT.install(SPARE, 0)
        assert _through_slot(SPARE, a, 3) == E_NOSYS          # empty: refused
        CT.install(SPARE, cfunc_address(_scaled_sum, (types.int64, types.int64, types.int64)))
        assert _through_slot(SPARE, a, 3) == 3 * 45
        assert _through_slot(SPARE, a[2:], -1) == -(45 - 1)   # a view: its own data address
    finally:
        CT.install(SPARE, before)


def test_install_refuses_a_slot_outside_the_table():
    import pytest
    with pytest.raises(IndexError):
        CT.install(CT.NSLOTS, 1)


NO_DOMAIN = textwrap.dedent("""
    import numpy as np
    from pktbuf import calltable as CT
    from pktbuf.buf.mempool.layout import DOMAIN
    from pktbuf.buf.mbuf import layout  # noqa: F401
    from pktbuf.buf.mbuf.free import install_free_paths, pktmbuf_free_bulk
    dom = DOMAIN.create({"obj": 64, "ring_slots": 64})
    h = np.full(4, -1, np.int32)
    before = [CT.installed(s) for s in (CT.FREE_ALTERNATING, CT.FREE_CHECK, CT.FREE_PREFREE, CT.FREE_CHAINS)]
    rc = pktmbuf_free_bulk(dom, 0, h, 4)
    install_free_paths()
    after = [CT.installed(s) != 0 for s in (CT.FREE_ALTERNATING, CT.FREE_CHECK, CT.FREE_PREFREE, CT.FREE_CHAINS)]
    print(rc, sum(before), all(after), pktmbuf_free_bulk(dom, 0, h, 4))
""")


def test_a_process_without_a_domain_has_no_free_paths():
    """No domain created or attached through the facade: the slots are empty and the bulk free
    refuses before touching anything; installed, the same call succeeds -- in a process that
    loads the free kernels from the cache (the second run), so the loaded code reads this
    process's table."""
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", NO_DOMAIN], capture_output=True, text=True,
                           timeout=600, cwd=ROOT, env=dict(os.environ))
        assert r.returncode == 0, r.stderr
        rc, before, after, rc2 = r.stdout.split()
        assert (int(rc), int(before), after, int(rc2)) == (E_NOSYS, 0, "True", 0)


def test_every_domain_installs_the_free_paths():
    import pktbuf
    pktbuf.Domain(max_objects=64, max_ring_slots=64)
    assert all(CT.installed(s) for s in (CT.FREE_ALTERNATING, CT.FREE_CHECK, CT.FREE_PREFREE, CT.FREE_CHAINS))
