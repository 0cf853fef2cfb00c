"""The bounds detectors: the checked build, and Numba's bounds checking over pktbuf's kernels.

Numba's bounds checking covers array indexing only, not the raw copies into and out of data
rooms, so pktbuf has a checked build (PKTBUF_CHECKED=1 at import) in which every such copy
asserts that it stays inside both buffers.  Each test proves that an out-of-bounds access is
caught -- the process aborts, or IndexError is raised -- in a fresh interpreter that selects the
variant, with a cache directory of its own.
"""
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np

from pktbuf._jit import CHECKED
from pktbuf.rawmem import copy_in_bounds, fill_in_bounds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code, tmp_path, **env):
    e = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=str(tmp_path / "cache"), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                          capture_output=True, text=True, timeout=600)


COPY = """
    import numpy as np
    from numba import njit
    from pktbuf.rawmem import copy_in_bounds
    src = np.arange(64, dtype=np.uint8)
    dst = np.zeros(80, np.uint8)
    canary = dst[64:].copy()

    @njit
    def copy(dst, src, n):
        copy_in_bounds(dst.ctypes.data, dst.ctypes.data, 64, src.ctypes.data, src.ctypes.data, 64, n)

    copy(dst, src, 64)
    assert (dst[:64] == src).all()
    print("in bounds ok", flush=True)
    copy(dst, src, 65)                      # one byte past both buffers
    print("out of bounds passed", (dst[64:] != canary).any(), flush=True)
"""


def test_checked_build_aborts_on_a_copy_past_its_buffer(tmp_path):
    r = _run(COPY, tmp_path, PKTBUF_CHECKED="1")
    assert r.returncode == -signal.SIGABRT, (r.returncode, r.stdout, r.stderr)
    assert "in bounds ok" in r.stdout and "out of bounds passed" not in r.stdout
    assert "pktbuf checked build: write of 65 bytes" in r.stderr


def test_checked_build_aborts_on_a_negative_length(tmp_path):
    code = COPY.replace("copy(dst, src, 65)", "copy(dst, src, -5)")
    r = _run(code, tmp_path, PKTBUF_CHECKED="1")
    assert r.returncode == -signal.SIGABRT, (r.returncode, r.stdout, r.stderr)
    assert "of -5 bytes" in r.stderr


def test_checked_kernels_are_cached_apart_from_release_ones(tmp_path):
    """Both variants in one cache directory: each process gets the code of its own build."""
    code = """
        import numpy as np
        from pktbuf._jit import CHECKED, _VARIANT, source_tag
        from pktbuf.buf.ring import kernels
        tag = "pb" + source_tag(kernels.__file__) + _VARIANT  # in the ring kernels' files
        # one small kernel (a ring header is 96 words), not the facade's whole alloc/free path:
        # the variant tag is the same for every kernel, and each process compiles it cold
        print(CHECKED, tag, kernels.ring_count(np.zeros(96, np.uint32)))
    """
    a = _run(code, tmp_path, PKTBUF_CHECKED="1")
    b = _run(code, tmp_path, PKTBUF_CHECKED="0")
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    ca, ta, _ = a.stdout.split(maxsplit=2)
    cb, tb, _ = b.stdout.split(maxsplit=2)
    assert (ca, cb) == ("True", "False") and ta != tb
    names = [n for d, _, fs in os.walk(tmp_path / "cache") for n in fs if n.endswith(".nbi")]
    assert any(ta in n for n in names) and any(tb in n for n in names)


def test_boundscheck_covers_pktbuf_kernels_and_atomics(tmp_path):
    code = """
        import numpy as np
        from numba import njit
        from pktbuf.buf.ring.kernels import ring_count
        from pktbuf.atomics import fetch_add
        try:
            ring_count(np.zeros(3, np.uint32))        # a ring header is 96 words
        except IndexError as e:
            print("kernel:", e)

        @njit
        def bump(a, i):
            return fetch_add(a, i, 1)

        a = np.zeros(4, np.int64)
        bump(a, 3)
        try:
            bump(a, 4)
        except IndexError as e:
            print("atomic:", e)
    """
    r = _run(code, tmp_path, NUMBA_BOUNDSCHECK="1")
    assert r.returncode == 0, r.stderr
    assert "kernel: index is out of bounds" in r.stdout
    assert "atomic: index is out of bounds" in r.stdout


def test_release_build_copies_in_bounds_exactly():
    from numba import njit

    @njit
    def both(dst, src, n):
        copy_in_bounds(dst.ctypes.data, dst.ctypes.data, dst.size, src.ctypes.data,
                       src.ctypes.data, src.size, n)
        fill_in_bounds(dst.ctypes.data + n, dst.ctypes.data, dst.size, 0xAB, dst.size - n)

    src = np.arange(10, dtype=np.uint8)
    dst = np.zeros(16, np.uint8)
    both(dst, src, 10)
    assert dst.tolist() == list(range(10)) + [0xAB] * 6
    assert CHECKED in (True, False)


def test_checked_build_catches_a_lying_descriptor_in_a_data_room_copy(tmp_path):
    """A segment whose data_len runs past its buffer (memory someone else corrupted): the
    release kernels trust descriptors, the checked build stops the copy that would read past
    the data room."""
    code = """
        import numpy as np
        import pktbuf
        from pktbuf.kernels import pktmbuf_read
        p = pktbuf.PktmbufPool(8, 0, data_room=256)
        a, b = p.alloc(), p.alloc()
        a.append_bytes(bytes(100)); b.append_bytes(bytes(100)); a.chain(b)
        dom = p.domain.state
        buf = np.zeros(4096, np.uint8)
        print("ok", pktmbuf_read(dom, a.handle, 50, 100, buf) == buf.ctypes.data, flush=True)
        m = dom.mb[a.handle]
        m["data_len"] = int(m["buf_len"])          # runs past the room by data_off bytes
        m["pkt_len"] = int(m["buf_len"]) + 100
        pktmbuf_read(dom, a.handle, 0, int(m["pkt_len"]), buf)
        print("overrun passed", flush=True)
    """
    r = _run(code, tmp_path, PKTBUF_CHECKED="1")
    assert r.returncode == -signal.SIGABRT, (r.returncode, r.stdout, r.stderr)
    assert "ok True" in r.stdout and "overrun passed" not in r.stdout
    assert "pktbuf checked build: read of" in r.stderr


def test_a_write_past_a_pools_data_faults(tmp_path):
    """Every pool's data region is followed by a guard page in the domain's window: running
    off the last buffer faults instead of writing into the next pool's first buffer."""
    code = """
        import mmap
        from numba import njit
        import pktbuf
        from pktbuf.rawmem import store_u8
        d = pktbuf.Domain(4096, 8192)
        p = pktbuf.PktmbufPool(8, 0, data_room=256, domain=d)
        q = pktbuf.PktmbufPool(8, 0, data_room=256, domain=d)
        end = p.region.address + -(-p.region.size // mmap.PAGESIZE) * mmap.PAGESIZE
        assert q.region.address >= end + mmap.PAGESIZE, (hex(end), hex(q.region.address))

        @njit
        def poke(a):
            store_u8(a, 1)

        poke(end - 1)                     # the pool's own last byte: fine
        print("inside ok", flush=True)
        poke(end)                         # the first byte past it
        print("overrun passed", flush=True)
    """
    r = _run(code, tmp_path)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr)
    assert "inside ok" in r.stdout and "overrun passed" not in r.stdout
