"""The kernel cache stamp and the facade's fast-call entry.

Numba keys a cached function on its own source file only; pktbuf stamps every kernel with all of
its sources (and the build variant), so editing any source recompiles every kernel, and files of
an older build are deleted instead of being read.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np

from pktbuf._jit import _widen, kernel
from pktbuf.buf.domain.fastcall import FastCall

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = textwrap.dedent("""
    import numpy as np
    from pktbuf._jit import _TAG
    from pktbuf.buf.ring.kernels import ring_count, ring_init
    hdr, slots = np.zeros(96, np.uint32), np.zeros(8, np.int32)
    ring_init(hdr, slots, 7, 0)
    ring_count(hdr)
    print(_TAG, ring_count.stats.cache_hits.get(ring_count.signatures[0], 0),
          ring_count.stats.cache_misses.get(ring_count.signatures[0], 0))
""")


def _probe(pkg_root):
    env = dict(os.environ, PYTHONPATH=str(pkg_root))
    env.pop("NUMBA_CACHE_DIR", None)          # the cache next to the sources
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                       timeout=600, cwd=str(pkg_root))
    assert r.returncode == 0, r.stderr
    tag, hits, misses = r.stdout.split()
    return tag, int(hits), int(misses)


def test_editing_any_source_recompiles_and_prunes(tmp_path):
    shutil.copytree(os.path.join(ROOT, "pktbuf"), tmp_path / "pktbuf",
                    ignore=shutil.ignore_patterns("__pycache__"))
    tag1, hits, misses = _probe(tmp_path)
    assert (hits, misses) == (0, 1)                       # cold: compiled
    assert _probe(tmp_path)[1:] == (1, 0)                 # warm: loaded
    # edit a module the ring kernels do not even import
    with open(tmp_path / "pktbuf" / "idle.py", "a") as f:
        f.write("\n# an edit\n")
    tag2, hits, misses = _probe(tmp_path)
    assert tag2 != tag1 and (hits, misses) == (0, 1)      # recompiled
    cache = tmp_path / "pktbuf" / "ring" / "__pycache__"
    names = os.listdir(cache)
    assert any(tag2 in n for n in names)
    assert not any(tag1 in n for n in names)              # the old build's files are gone


@kernel
def _add(a, b):
    return a + b


def test_one_specialisation_for_every_integer_width():
    before = len(_add.signatures)
    assert _add(1, 2) == 3
    assert _add(np.int32(5), np.int8(1)) == 6
    assert _add(np.uint16(7), 1) == 8
    assert len(_add.signatures) - before <= 1
    assert all(str(t) == "int64" for sig in _add.signatures for t in sig)
    from numba import types
    assert _widen(types.literal(3)) == types.int64
    assert _widen(types.uint64) == types.uint64            # not lossless: left alone
    assert _widen(types.float32) == types.float32 and _widen(types.boolean) == types.boolean


def test_fastcall_resolves_once_and_agrees_with_the_dispatcher():
    fc = FastCall(_add)
    assert fc.entry is None
    assert fc(2, 3) == 5
    entry = fc.entry
    assert entry is not None
    for a, b in ((0, 0), (-7, 3), (1 << 40, 1)):
        assert fc(a, b) == _add(a, b)
    assert fc.entry is entry                              # resolved once


def test_fastcall_from_a_narrow_first_call():
    fc = FastCall(_add)
    assert fc(np.int32(1), np.int32(2)) == 3              # compiled (widened) as int64
    assert fc.entry is not None and fc(4, 5) == 9
