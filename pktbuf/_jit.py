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
contents of the sources its module can reach -- the module's import closure inside pktbuf
(:func:`closure_files`) -- and the build variant, and puts that tag in every cache file's name:
changing a source recompiles the kernels of the modules that import it, directly or through
others, and no other; the files of older sources are deleted.  (A kernel can only call what its
module imports, so the closure covers everything that can be compiled into it.)
Several processes may compile at once (``pktbuf compile --jobs N``, test workers, spawned
workers): each compilation of a pktbuf kernel holds a file lock named after the function, so two
processes never compile one function at the same time -- the second waits, then loads what the
first wrote (:func:`_compile_lock`).
(Your own ``cache=True`` functions that call pktbuf kernels are stamped by Numba with your file
only: clear their cache, ``__pycache__/*.nbi|nbc``, after upgrading pktbuf.)
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import inspect
import os
import re
import tempfile

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


_ROOT_DIR = os.path.dirname(_PKG_DIR)
_VARIANT = _variant()
_OTHER_BUILD = re.compile(r"-pb([0-9a-f]{10})(c[01]b[n01x])\.")
_file_imports: dict[str, tuple[str, ...]] = {}
_tags: dict[str, str] = {}
_pruned: set[tuple[str, str]] = set()
_writable: set[str] = set()      # cache directories found writable (this process)


def _module_file(mod: str) -> str | None:
    """The source file of pktbuf module ``mod`` (a dotted name), or None."""
    base = os.path.join(_ROOT_DIR, *mod.split("."))
    for f in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(f):
            return f
    return None


_FROM_RE = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)",
                      re.M)
_IMPORT_RE = re.compile(r"^[ \t]*import[ \t]+(pktbuf[\w. ,]*)", re.M)


def _imports_of(path: str) -> tuple[str, ...]:
    """The pktbuf source files that ``path`` imports (at any depth of its code: a function's
    deferred import counts too).  A scan of the text, not a parse: an import written in a
    docstring counts too, which can only make a tag cover more files than it needs."""
    hit = _file_imports.get(path)
    if hit is not None:
        return hit
    rel = os.path.relpath(path, _ROOT_DIR)[:-3].split(os.sep)
    pkg = rel[:-1]               # the package a relative import starts from
    out = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    for m in _FROM_RE.finditer(text):
        spec, names = m.group(1), m.group(2)
        level = len(spec) - len(spec.lstrip("."))
        mod_part = spec[level:]
        if level:
            base = pkg[: len(pkg) - (level - 1)] if level > 1 else pkg
            mod = ".".join(base + ([mod_part] if mod_part else []))
        else:
            mod = mod_part
        if mod != "pktbuf" and not mod.startswith("pktbuf."):
            continue
        f = _module_file(mod)
        if f:
            out.add(f)
        for n in names.strip("()").replace("\n", " ").split(","):
            n = n.split(" as ")[0].strip()
            if n.isidentifier():                # a name may be a module: from . import raw
                g = _module_file(f"{mod}.{n}")
                if g:
                    out.add(g)
    for m in _IMPORT_RE.finditer(text):
        for n in m.group(1).split(","):
            f = _module_file(n.split(" as ")[0].strip())
            if f:
                out.add(f)
    res = tuple(sorted(out))
    _file_imports[path] = res
    return res


def closure_files(py_file: str) -> list[str]:
    """``py_file`` and every pktbuf source it reaches through imports, sorted.  Package
    ``__init__`` files other than the top level's hold a docstring only
    (``tests/test_architecture.py`` checks it), so they compile into nothing."""
    seen, todo = set(), [os.path.abspath(py_file)]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(g for g in _imports_of(f) if g not in seen)
    return sorted(seen)


def source_tag(py_file: str) -> str:
    """The 10-hex-digit tag of the kernels defined in ``py_file``: a digest of the contents of
    its import closure (:func:`closure_files`)."""
    key = os.path.abspath(py_file)
    tag = _tags.get(key)
    if tag is None:
        h = hashlib.sha1()
        for f in closure_files(key):
            h.update(os.path.relpath(f, _PKG_DIR).encode() + b"\0")
            try:
                with open(f, "rb") as fh:
                    h.update(hashlib.sha1(fh.read()).digest())
            except OSError:
                h.update(b"?")
        tag = _tags[key] = h.hexdigest()[:10]
    return tag


def _prune(path: str, stem: str, tag: str) -> None:
    """Delete the cache files that older sources of ``stem``'s module (this variant) left in
    ``path`` (once per process and module).  Files of the other variants stay: a checked and
    a release process may share a cache directory."""
    if (path, stem) in _pruned:
        return
    _pruned.add((path, stem))
    try:
        names = os.listdir(path)
    except OSError:
        return
    for n in names:
        if not n.startswith(stem + "."):
            continue
        m = _OTHER_BUILD.search(n)
        if m and m.group(2) == _VARIANT and m.group(1) != tag:
            try:
                os.unlink(os.path.join(path, n))
            except OSError:
                pass


def _stamped(base):
    """A subclass of one of Numba's cache locators, for pktbuf files.

    Each build of a module (the sources it reaches + the variant) gets cache files of its own
    name, so a process never even unpickles an index another build wrote (an index can name
    types that no longer exist), the checked and release builds are cached side by side, and
    stale files are deleted."""

    class Locator(base):
        def __init__(self, py_func, py_file):
            self._pb_stamp = source_tag(py_file) + _VARIANT
            super().__init__(py_func, py_file)

        def get_source_stamp(self):
            return self._pb_stamp

        def get_disambiguator(self):
            return f"{super().get_disambiguator()}-pb{self._pb_stamp}"

        def ensure_cache_path(self):
            path = self.get_cache_path()
            if path not in _writable or not os.path.isdir(path):
                # Numba's check creates a file: once per directory and process
                super().ensure_cache_path()
                _writable.add(path)
            stem = os.path.splitext(os.path.basename(self._py_file))[0]
            _prune(path, stem, self._pb_stamp[:10])

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


_LOCK_DIR = None


@contextlib.contextmanager
def _compile_lock(name: str):
    """Hold the lock of function ``name`` while it is compiled (or loaded from the cache).

    Several processes compiling the same cached function at once can corrupt Numba's cache;
    with this lock the second process waits and then loads what the first wrote.  It is a
    ``flock`` on a file named after the function and the cache it goes to, taken inside Numba's
    own (re-entrant, per process) compiler lock so that two threads of one process cannot
    deadlock on it.  A kernel's callees are compiled while it holds its own lock; call graphs
    have no cycles, so neither do the waits."""
    global _LOCK_DIR
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:
        if _LOCK_DIR is None:
            d = os.path.join(tempfile.gettempdir(), f"pktbuf-compile-{os.getuid()}")
            os.makedirs(d, mode=0o700, exist_ok=True)
            _LOCK_DIR = d
        where = os.environ.get("NUMBA_CACHE_DIR", "") + "|" + _PKG_DIR + "|" + _VARIANT
        key = hashlib.sha1(f"{where}|{name}".encode()).hexdigest()[:20]
        fd = os.open(os.path.join(_LOCK_DIR, key + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)                       # releases the lock


def _one_specialisation_per_shape(disp, keep=()):
    """Make ``disp`` compile every signature with :func:`_widen`-ed argument types.

    Numba compiles a new version of a function for each distinct argument type tuple it is
    called with -- a literal ``0`` here, an int32 there -- and each costs a full compile (seconds,
    cold).  Widened, a call site whose types differ only that way reuses the one version; the
    call converts its arguments (a literal or an int32 converts to int64 safely).  Arguments
    named in ``keep`` keep their literal type: one version per value, with the branches on it
    pruned at compile time."""
    compile_exact = disp.compile
    if keep:
        names = list(inspect.signature(disp.py_func).parameters)
        kept = tuple(names.index(k) for k in keep)
    else:
        kept = ()

    lock_name = f"{disp.py_func.__module__}.{disp.py_func.__qualname__}"

    def compile(sig):
        args, ret = sigutils.normalize_signature(sig)
        wide = tuple(a if i in kept else _widen(a) for i, a in enumerate(args))
        if wide != tuple(args):
            sig = wide if ret is None else ret(*wide)
        if sig in disp.overloads or tuple(wide) in disp.overloads:
            return compile_exact(sig)           # compiled or loaded in this process already
        with _compile_lock(lock_name):
            return compile_exact(sig)

    disp.compile = compile
    _load_without_refresh(disp)
    return disp


def _load_without_refresh(disp):
    """Load ``disp``'s cached versions without refreshing Numba's typing and lowering
    registries first.

    Numba's ``Cache.load_overload`` refreshes the target context before every load: the first
    refresh of a process imports and installs every implementation Numba has (NumPy's array
    functions, typed containers, random generators, ...), a fifth of a second or more, which a
    program that only loads compiled kernels never needs -- rebuilding one takes the code
    generator, the runtime's symbols and nothing else.  So the load here initialises the runtime
    (what the refresh would have done for it) and loads; a version that has to be compiled
    still goes through Numba's compiler, which refreshes the registries itself."""
    cache = getattr(disp, "_cache", None)
    if cache is None or not hasattr(cache, "_load_overload"):
        return

    def load_overload(sig, target_context):
        from numba.core.runtime import rtsys
        rtsys.initialize(target_context)
        with cache._guard_against_spurious_io_errors():
            return cache._load_overload(sig, target_context)

    cache.load_overload = load_overload


def kernel(fn=None, *, inline: str = "never", nrt: bool = False, literal: tuple = (),
           cfunc: bool | None = None):
    """Decorate a kernel: ``@kernel``, ``@kernel(nrt=True)``, ``@kernel(inline="always")``,
    ``@kernel(literal=("mode",))`` or ``@kernel(cfunc=True)``.

    ``nrt=True`` (for leaf functions that must allocate) turns Numba's runtime back on; see the
    module docstring for why kernels run without it.
    ``inline="always"`` inlines at the Numba-IR level into every caller: for small per-packet
    helpers only (it re-types the body at every call site, which costs compile time).
    Integer arguments are compiled as int64 whatever the caller passes (see
    :func:`_one_specialisation_per_shape`), except those named in ``literal``: a call with a
    constant there compiles a version for that constant (a loop shape, say), in which the
    branches on it are pruned.
    ``cfunc``: whether Numba also builds the C-callable wrapper of every compiled version (what
    a function's address is taken from when it is passed as a first-class function value, or
    called through a pointer: ``cfunc=True``).  pktbuf's own kernels are only ever called
    directly, from Python or from other kernels, so by default they go without it: each would
    cost its wrapper's lowering, optimisation and machine code at every cold compile, and it is
    never on a kernel-to-kernel call path.  Functions of other modules (yours) keep it.
    """
    def wrap(f):
        opts = dict(_OPTIONS)
        if not nrt:
            opts["_nrt"] = False
        own = f.__module__ == "pktbuf" or f.__module__.startswith("pktbuf.")
        if not (cfunc if cfunc is not None else not own):
            opts["no_cfunc_wrapper"] = True
        return _one_specialisation_per_shape(njit(inline=inline, **opts)(f), literal)

    return wrap(fn) if fn is not None else wrap


def always_inline(disp):
    """Mark a kernel for LLVM-level inlining into every caller (``alwaysinline``, DPDK's
    ``__rte_always_inline`` on ``rte_mempool_do_generic_get/put``); returns it.

    Why: Numba optimises each kernel on its own before linking it into its callers, so by the
    time a caller is optimised the cache fast path has been vectorised (a reversed copy with
    runtime alias checks and three loop versions) and is far over LLVM's inlining threshold.  It
    then stays a call that passes the handle array as seven words on the stack, re-checks every
    range and runs the vectorised copy's dispatch for a single object.  Inlined, the caller's
    constants (``start == 0``, ``n == 1``) and loop invariants fold into it.  This is not
    Numba's ``inline="always"``: nothing is re-typed at the call site, LLVM only inlines the
    compiled IR.  The out-of-line slow paths must say ``never_inline`` (Numba lets a callee
    compiled inside this one inherit the flag).
    """
    disp.targetoptions["forceinline"] = True
    return disp


def never_inline(disp):
    """The slow path of an :func:`always_inline` kernel: keep it out of line (see there)."""
    disp.targetoptions["forceinline"] = False
    return disp


def cfunc_address(disp, sig) -> int:
    """Compile (or load) kernel ``disp`` for argument types ``sig`` and return the address of
    that version's C-callable wrapper: what compiled code calls when it calls ``disp`` through
    a pointer (a kernel declared ``@kernel(cfunc=True)``).  The address is valid in this
    process only, for as long as the kernel is loaded (Numba keeps it: for the process)."""
    disp.compile(tuple(sig))
    cres = disp.overloads[tuple(_widen(t) for t in sig)]
    if disp.targetoptions.get("no_cfunc_wrapper"):
        raise TypeError(f"{disp.py_func.__qualname__} has no C wrapper: declare it "
                        "@kernel(cfunc=True)")
    addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name)
    if not addr:
        raise RuntimeError(f"{disp.py_func.__qualname__}: no C wrapper in its compiled code")
    return int(addr)
