"""The one place where pktbuf's jit options are set.

Every kernel in the package is declared with :func:`kernel` so the options never drift apart:

* ``cache=True`` -- compiled code is written next to the source and reused by later processes;
* ``nogil=True`` -- kernels called from Python threads run in parallel, and a kernel is callable
  from a user's own ``@njit(nogil=True)`` code;
* ``error_model="numpy"`` -- no Python exception machinery for division;
* no bounds checking -- kernels validate what they are given where it matters and return error
  codes instead of raising (``NUMBA_BOUNDSCHECK=1`` turns Numba's checks back on, and the
  checked build -- :data:`CHECKED` -- checks the raw copies);
* integer arguments compiled as ``int64`` (:func:`kernel`), so few versions get compiled;
* **no NRT** (``_nrt=False``).  With Numba's runtime on, every compiled function takes a
  reference on each array it is passed (an atomic increment at entry, a decrement at exit):
  per call that can cost more than a whole burst of work.  (State passed as a block --
  :mod:`pktbuf.block` -- is a plain pointer and costs nothing either way; the arrays users pass,
  bursts of handles, still would.)  The price: kernels do not allocate arrays and never return
  a view of an argument.  Scratch space comes from the caller
  or from the stack (:func:`pktbuf.rawmem.stack_i32`); views of raw memory
  (:func:`pktbuf.rawmem.addr_u8`) carry no reference and are fine.  (A kernel compiled with the
  runtime cannot be called from one without it: Numba then types its ``np.empty`` in the
  caller's configuration and fails -- so ``nrt=True`` exists for leaf functions only.)

Kernels never raise.  They return ``0`` (or a count) on success and a negative ``errno``-style
code on failure (see :mod:`pktbuf.errors`).  The facade classes turn codes into exceptions.

Cache invalidation: Numba keys a cached function on its own source file only, so a kernel that
calls (and inlines) a kernel from another module would keep stale code after that module
changed.  pktbuf therefore registers a cache locator that stamps every pktbuf kernel with the
state of *all* of pktbuf's source files and the build variant, and puts that tag in every cache
file's name: changing any source recompiles every kernel, and the files of older sources are
deleted.
(Your own ``cache=True`` functions that call pktbuf kernels are stamped by Numba with your file
only: clear their cache, ``__pycache__/*.nbi|nbc``, after upgrading pktbuf.)
"""
from __future__ import annotations

import hashlib
import inspect
import os
import re

from numba import njit, types
from numba.core import caching, sigutils

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))

CHECKED = os.environ.get("PKTBUF_CHECKED", "") not in ("", "0")
"""The checked build (``PKTBUF_CHECKED=1`` at import): raw memory copies assert that they stay
inside the buffers they were given (:func:`pktbuf.rawmem.copy_in_bounds`) and abort the process
with a message when they would not.  Release builds compile none of it."""


def _variant() -> str:
    """What, besides the sources, changes the compiled code: the checked build and Numba's
    global bounds-checking switch (``NUMBA_BOUNDSCHECK``, which overrides ``boundscheck=False``)."""
    from numba.core import config
    b = {None: "n", 0: "0", 1: "1"}.get(config.BOUNDSCHECK, "x")
    return f"c{int(CHECKED)}b{b}"


def _sources_digest() -> str:
    """(mtime, size) of every .py file of the package, as one digest."""
    items = []
    for root, dirs, files in os.walk(_PKG_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(root, f))
                items.append((os.path.relpath(os.path.join(root, f), _PKG_DIR), st.st_mtime_ns,
                              st.st_size))
    # a stable digest: Python's hash() of strings changes from process to process
    return hashlib.sha1(repr(items).encode()).hexdigest()


_SOURCES = _sources_digest()[:10]
_VARIANT = _variant()
_STAMP = _SOURCES + _VARIANT
_TAG = "pb" + _STAMP             # in every cache file name of this build of pktbuf
_OTHER_BUILD = re.compile(r"-pb([0-9a-f]{10})(c[01]b[n01x])\.")
_pruned: set[str] = set()


def _prune(path: str) -> None:
    """Delete the cache files that older sources of this variant left in ``path`` (once per
    process).  Files of the other variants stay: a checked and a release process may share
    a cache directory."""
    if path in _pruned:
        return
    _pruned.add(path)
    try:
        names = os.listdir(path)
    except OSError:
        return
    for n in names:
        m = _OTHER_BUILD.search(n)
        if m and m.group(2) == _VARIANT and m.group(1) != _SOURCES:
            try:
                os.unlink(os.path.join(path, n))
            except OSError:
                pass


def _stamped(base):
    """A subclass of one of Numba's cache locators, for pktbuf files.

    Each build (sources + variant) gets cache files of its own name, so a process never even
    unpickles an index another build wrote (an index can name types that no longer exist), the
    checked and release builds are cached side by side, and stale files are deleted."""

    class Locator(base):
        def get_source_stamp(self):
            return _STAMP

        def get_disambiguator(self):
            return f"{super().get_disambiguator()}-{_TAG}"

        def ensure_cache_path(self):
            super().ensure_cache_path()
            _prune(self.get_cache_path())

        @classmethod
        def from_function(cls, py_func, py_file):
            if not os.path.abspath(py_file).startswith(_PKG_DIR + os.sep):
                return None
            return super().from_function(py_func, py_file)

    Locator.__name__ = Locator.__qualname__ = "Pktbuf" + base.__name__.lstrip("_")
    return Locator


def _numba_name(name):
    # Numba 0.61 dropped the leading underscore of these class names
    return getattr(caching, name, None) or getattr(caching, "_" + name)


def _install_locators():
    classes = _numba_name("CacheImpl")._locator_classes
    if any(c.__name__.startswith("Pktbuf") for c in classes):
        return
    bases = [_numba_name(n) for n in ("UserProvidedCacheLocator", "InTreeCacheLocator",
                                      "UserWideCacheLocator")]
    classes[:0] = [_stamped(b) for b in bases]


_install_locators()


def _widen(t):
    """The argument type a kernel is compiled for: literals lose their value and integers
    narrower than 64 bits become int64 (lossless), so ``f(dom, 0)``, ``f(dom, n)`` and
    ``f(dom, handles[i])`` (an int32) share one compiled version."""
    t = types.unliteral(t)
    if isinstance(t, types.Integer) and t.bitwidth < 64:
        return types.int64
    return t


def _one_specialisation_per_shape(disp, keep=()):
    """Make ``disp`` compile every signature with :func:`_widen`-ed argument types.

    Numba compiles a new version of a function for each distinct argument type tuple it is
    called with -- a literal ``0`` here, an int32 there -- and each costs a full compile (seconds,
    cold).  Widened, a call site whose types differ only that way reuses the one version; the
    call converts its arguments (a literal or an int32 converts to int64 safely).  Arguments
    named in ``keep`` keep their literal type: one version per value, with the branches on it
    pruned at compile time."""
    compile_exact = disp.compile
    names = list(inspect.signature(disp.py_func).parameters)
    kept = tuple(names.index(k) for k in keep)

    def compile(sig):
        args, ret = sigutils.normalize_signature(sig)
        wide = tuple(a if i in kept else _widen(a) for i, a in enumerate(args))
        if wide == tuple(args):
            return compile_exact(sig)
        return compile_exact(wide if ret is None else ret(*wide))

    disp.compile = compile
    return disp


def kernel(fn=None, *, inline: str = "never", nrt: bool = False, literal: tuple = ()):
    """Decorate a kernel: ``@kernel``, ``@kernel(nrt=True)``, ``@kernel(inline="always")`` or
    ``@kernel(literal=("mode",))``.

    ``nrt=True`` (for leaf functions that must allocate) turns Numba's runtime back on; see the
    module docstring for why kernels run without it.
    ``inline="always"`` inlines at the Numba-IR level into every caller: for small per-packet
    helpers only (it re-types the body at every call site, which costs compile time).
    Integer arguments are compiled as int64 whatever the caller passes (see
    :func:`_one_specialisation_per_shape`), except those named in ``literal``: a call with a
    constant there compiles a version for that constant (a loop shape, say), in which the
    branches on it are pruned.
    """
    def wrap(f):
        opts = dict(_OPTIONS)
        if not nrt:
            opts["_nrt"] = False
        return _one_specialisation_per_shape(njit(inline=inline, **opts)(f), literal)

    return wrap(fn) if fn is not None else wrap
