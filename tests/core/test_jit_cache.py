"""The kernel cache stamp and the facade's fast-call entry.

Numba keys a cached function on its own source file only; pktbuf stamps every kernel with the
contents of its module's import closure inside pktbuf (and the build variant): editing a source
recompiles the kernels of the modules that reach it and no others, a kernel is never loaded
with stale code of a module it calls, and files of an older build are deleted instead of read.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np

from pktbuf._jit import _widen, closure_files, kernel, source_tag
from pktbuf.buf.domain.fastcall import FastCall

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "pktbuf")

# ring_count (pktbuf/buf/ring/kernels.py) and a kernel of another module that calls it
PROBE_MOD = textwrap.dedent("""
    from pktbuf._jit import kernel
    from pktbuf.buf.ring.kernels import ring_count

    @kernel
    def count_plus_one(hdr):
        return ring_count(hdr) + 1
""")
PROBE = textwrap.dedent("""
    import numpy as np
    from pktbuf._jit import source_tag
    from pktbuf.buf.ring import kernels as R
    from pktbuf import probe_mod
    hdr, slots = np.zeros(96, np.uint32), np.zeros(8, np.int32)
    R.ring_init(hdr, slots, 7, 0)
    v = probe_mod.count_plus_one(hdr)
    R.ring_count(hdr)
    def st(f):
        s = f.signatures[0]
        return f"{f.stats.cache_hits.get(s, 0)},{f.stats.cache_misses.get(s, 0)}"
    print(source_tag(R.__file__), st(R.ring_count), st(probe_mod.count_plus_one), v)
""")


def _probe(pkg_root):
    env = dict(os.environ, PYTHONPATH=str(pkg_root))
    env.pop("NUMBA_CACHE_DIR", None)          # the cache next to the sources
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                       timeout=600, cwd=str(pkg_root))
    assert r.returncode == 0, r.stderr
    tag, ring, probe, v = r.stdout.split()
    return tag, ring, probe, int(v)


def _edit(path, old=None, new=None):
    text = open(path).read()
    if old is None:
        text += "\n# an edit\n"
    else:
        assert old in text
        text = text.replace(old, new, 1)
    with open(path, "w") as f:
        f.write(text)


def test_an_edit_recompiles_exactly_the_modules_that_reach_it(tmp_path):
    shutil.copytree(PKG, tmp_path / "pktbuf", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pktbuf" / "probe_mod.py").write_text(PROBE_MOD)
    tag1, ring, probe, v = _probe(tmp_path)
    assert (ring, probe, v) == ("0,1", "0,1", 1)          # cold: both compiled
    assert _probe(tmp_path)[1:] == (tag1, "1,0", "1,0", 1)[1:]   # warm: both loaded
    # a module neither imports: nothing recompiles
    _edit(tmp_path / "pktbuf" / "idle.py")
    _edit(tmp_path / "pktbuf" / "apps" / "fwd" / "main.py")
    assert _probe(tmp_path) == (tag1, "1,0", "1,0", 1)
    # a module both reach (the ring kernels import the atomics): both recompile, and the old
    # build's files are deleted
    _edit(tmp_path / "pktbuf" / "atomics.py")
    tag2, ring, probe, v = _probe(tmp_path)
    assert tag2 != tag1 and (ring, probe) == ("0,1", "0,1")
    cache = tmp_path / "pktbuf" / "buf" / "ring" / "__pycache__"
    names = os.listdir(cache)
    assert any(tag2 in n for n in names)
    assert not any(tag1 in n for n in names)
    # the callee's own file: the caller in another module recompiles too and sees the new code
    # (a stale ring_count compiled into count_plus_one is never loaded)
    _edit(tmp_path / "pktbuf" / "buf" / "ring" / "kernels.py",
          "def ring_count(hdr):", "def ring_count(hdr):\n    return 41\n\n\ndef _old_count(hdr):")
    tag3, ring, probe, v = _probe(tmp_path)
    assert tag3 != tag2 and (ring, probe, v) == ("0,1", "0,1", 42)
    assert _probe(tmp_path) == (tag3, "1,0", "1,0", 42)


def _kernel_modules(sub):
    for d, dirs, files in os.walk(os.path.join(PKG, *sub.split("/"))):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(d, f)


def test_the_fwd_front_end_is_outside_every_buffer_and_memif_kernel_closure():
    """The start-up issue's case: editing pktbuf/apps/fwd/main.py recompiles none of ring,
    mempool, mbuf or memif (and only the modules whose closure holds it)."""
    front = os.path.join(PKG, "apps", "fwd", "main.py")
    for sub in ("buf/ring", "buf/mempool", "buf/mbuf", "drivers/memif", "ethdev"):
        for f in _kernel_modules(sub):
            assert front not in closure_files(f), f
    reach = [f for f in _kernel_modules("") if front in closure_files(f)]
    assert all("/apps/" in f or "/bench/" in f or f.endswith("cli.py") for f in reach), reach


def test_the_tag_follows_the_closure():
    f = os.path.join(PKG, "buf", "mempool", "kernels.py")
    files = closure_files(f)
    assert f in files and os.path.join(PKG, "buf", "ring", "kernels.py") in files
    assert os.path.join(PKG, "atomics.py") in files
    assert not any("/drivers/" in x or "/apps/" in x for x in files)
    assert source_tag(f) == source_tag(f) and len(source_tag(f)) == 10
    assert source_tag(f) != source_tag(os.path.join(PKG, "buf", "ring", "kernels.py"))


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


LOAD_PROBE = textwrap.dedent("""
    import sys
    import numpy as np
    import pktbuf
    from pktbuf.buf.ring import kernels as R
    p = pktbuf.PktmbufPool(512, 32, name="loadprobe")
    h = p.alloc_bulk(32)
    used = p.in_use_count
    p.free_bulk(h)
    hdr, slots = np.zeros(96, np.uint32), np.zeros(8, np.int32)
    R.ring_init(hdr, slots, 7, 0)
    hits = sum(R.ring_init.stats.cache_hits.values())
    refreshed = "numba.np.linalg" in sys.modules
    from numba import njit
    @njit
    def user(hdr, a):                      # a user's function: compiled here, after the loads
        return R.ring_count(hdr) + np.sum(a)
    print(hits, int(refreshed), used, p.in_use_count, user(hdr, np.arange(4.0)))
""")


def test_a_cached_kernel_loads_without_numba_s_registry_refresh():
    """Loading compiled kernels from the cache skips Numba's registry refresh (a fifth of a
    second in every process); compiling afterwards -- a user's function calling a loaded kernel
    and a NumPy function -- still works, Numba's compiler refreshes for itself."""
    env = dict(os.environ)
    out = None
    for _ in range(2):                     # the first run may compile; the second loads
        r = subprocess.run([sys.executable, "-c", LOAD_PROBE], env=env, capture_output=True,
                           text=True, timeout=600, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        out = r.stdout.split()
    hits, refreshed, used, after, user = out
    assert int(hits) >= 1                  # ring_init came from the cache
    assert refreshed == "0"                # no registry refresh before the user's compile
    assert (int(used), int(after)) == (32, 0)
    assert float(user) == 6.0
