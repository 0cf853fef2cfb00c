"""The one place where pktbuf's jit options are set.

Every kernel in the package is declared with :func:`kernel` so the options never drift apart:

* ``cache=True`` -- compiled code is written next to the source and reused by later processes;
* ``nogil=True`` -- kernels called from Python threads run in parallel, and a kernel is callable
  from a user's own ``@njit(nogil=True)`` code;
* ``error_model="numpy"`` -- no Python exception machinery for division;
* no bounds checking -- kernels validate what they are given where it matters and return error
  codes instead of raising;
* **no NRT** (``_nrt=False``).  With Numba's runtime on, every compiled function takes a
  reference on each array it is passed -- for a ``DomainState`` that is nine atomic increments
  at entry and nine decrements at exit, ~100 ns per call, more than a whole burst of 32 mbufs
  costs (measured: mempool get+put of 32 went from 220 ns to 23 ns).  The price: kernels do not
  allocate arrays and never return a view of an argument.  Scratch space comes from the caller
  or from the stack (:func:`pktbuf.rawmem.stack_i32`); views of raw memory
  (:func:`pktbuf.rawmem.addr_u8`) carry no reference and are fine.  (A kernel compiled with the
  runtime cannot be called from one without it: Numba then types its ``np.empty`` in the
  caller's configuration and fails -- so ``nrt=True`` exists for leaf functions only.)

Kernels never raise.  They return ``0`` (or a count) on success and a negative ``errno``-style
code on failure (see :mod:`pktbuf.errors`).  The facade classes turn codes into exceptions.

Cache invalidation: Numba keys a cached function on its own source file only, so a kernel that
calls (and inlines) a kernel from another module would keep stale code after that module
changed.  pktbuf therefore registers a cache locator that stamps every pktbuf kernel with the
state of *all* of pktbuf's source files: changing any of them recompiles every kernel.
(Your own ``cache=True`` functions that call pktbuf kernels are stamped by Numba with your file
only: clear their cache, ``__pycache__/*.nbi|nbc``, after upgrading pktbuf.)
"""
from __future__ import annotations

import hashlib
import os

from numba import njit, types
from numba.core import caching
from numba.core.errors import NumbaError
from numba.extending import intrinsic

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def _package_stamp():
    """(mtime, size) of every .py file of the package, as one hashable stamp."""
    items = []
    for root, dirs, files in os.walk(_PKG_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(root, f))
                items.append((os.path.relpath(os.path.join(root, f), _PKG_DIR), st.st_mtime_ns,
                              st.st_size))
    # a stable digest: Python's hash() of strings changes from process to process
    return hashlib.sha1(repr(items).encode()).hexdigest(), len(items)


_STAMP = _package_stamp()


def _stamped(base):
    """A subclass of one of Numba's cache locators, for pktbuf files, with the package stamp."""

    class Locator(base):
        def get_source_stamp(self):
            return _STAMP

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


def kernel(fn=None, *, inline: str = "never", nrt: bool = False):
    """Decorate a kernel: ``@kernel``, ``@kernel(nrt=True)`` or ``@kernel(inline="always")``.

    ``nrt=True`` (for leaf functions that must allocate) turns Numba's runtime back on; see the
    module docstring for why kernels run without it.
    ``inline="always"`` inlines at the Numba-IR level into every caller (rarely needed: LLVM
    inlines small callees anyway).
    """
    def wrap(f):
        opts = dict(_OPTIONS)
        if not nrt:
            opts["_nrt"] = False
        return njit(inline=inline, **opts)(f)

    return wrap(fn) if fn is not None else wrap


@intrinsic
def require_no_nrt(typingctx):
    """Compile-time guard for inline bodies: refuse to be compiled into a function that runs
    with Numba's runtime (there, every access to a DomainState array would be reference
    counted: measured 80x slower).  Emits no code."""
    def codegen(context, builder, sig, args):
        if context.enable_nrt:
            raise NumbaError(
                "pktbuf's inline kernels (pktbuf.inline) must be called from a function "
                "compiled without Numba's runtime: decorate it with @pktbuf.kernel or "
                "@njit(_nrt=False).  From ordinary @njit code call pktbuf.kernels instead.")
        return context.get_dummy_value()

    return types.none(), codegen
