"""A peer's region sits between two inaccessible pages: a stray access just outside it faults
(in a child process) instead of reaching whatever mapping is adjacent."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CODE = """
    import os, mmap
    from numba import njit
    from pktbuf.drivers.memif.peermem import PeerRegion
    from pktbuf.rawmem import store_u8
    fd = os.memfd_create("peer-test")
    os.ftruncate(fd, 10000)
    r = PeerRegion(fd, 10000)
    end = r.address + -(-r.size // mmap.PAGESIZE) * mmap.PAGESIZE

    @njit
    def poke(a):
        store_u8(a, 7)

    poke(r.address); poke(end - 1)
    assert r.array[0] == 7
    print("inside ok", flush=True)
    poke({target})
    print("outside passed", flush=True)
"""


@pytest.mark.parametrize("target", ["r.address - 1", "end"])
def test_an_access_just_outside_a_peer_region_faults(target):
    e = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(CODE.format(target=target))],
                       env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr)
    assert "inside ok" in r.stdout and "outside passed" not in r.stdout


def test_closing_a_peer_region_closes_its_fd():
    from pktbuf.drivers.memif.peermem import PeerRegion
    fd = os.memfd_create("peer-test")
    os.ftruncate(fd, 4096)
    r = PeerRegion(fd, 4096)
    r.close()
    assert r.closed
    with pytest.raises(OSError):
        os.fstat(fd)
