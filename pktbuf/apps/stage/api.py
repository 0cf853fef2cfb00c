"""The stage facade: :class:`Stage` (a stage function, its state, its counters and drop
reasons, checked before any port opens) and :class:`StageRunner` (one lcore's streams through
the stage's compiled loop).

::

    from pktbuf.apps.stage.api import Stage, StageRunner
    st = Stage(my_stage, state=(table.block, macs), counters=("hits", "misses"),
               drop_reasons=("ttl",))
    st.check(ports)                         # compiled (or loaded) now: StageError if it fails
    run = StageRunner(ports, st, streams=[(0, 0, 1), (1, 0, 0)])
    while run.run(0.1) == R_DEADLINE: ...   # 100 ms slices
    run.counters()                          # {"hits": ..., "misses": ...}

``Stage.from_spec("module:function")`` is what ``--stage`` takes: the attribute may be a jitted
function (no state, no counters), a :class:`Stage`, or a plain function returning one.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import time

import numpy as np
from numba.core.dispatcher import Dispatcher

from ...drivers.common.kinds import MAX_PORTS
from ...errors import InvalidArgument
from ...ethdev.api import kinds_of_ports
from ...ethdev.burst import KINDS_ALL
from ...idle import IDLE_SLEEP_MAX_US
from . import gen
from .abi import (F_BUSY_CYCLES, F_RX, F_RX_BYTES, F_STAGE_DROP, F_TX, F_TX_BYTES,
                  F_TX_DROP, F_WORDS)

__all__ = ["MAX_BURST", "Stage", "StageError", "StageRunner", "export_fd", "file_module",
           "import_fd"]

MAX_BURST = 512
BURST_TX_DRAIN_US = 100         # l3fwd's: the Tx buffers' timed drain
MAX_TX_DRAIN_US = 3_600_000_000
NPARAMS = 7
PARAMS = "(state, dom, rx_port, pkts, n, dest, cnt)"


class StageError(InvalidArgument):
    """The stage cannot be used: not jitted, wrong signature, not importable, or it does not
    compile with the state given."""


def _check_fn(fn, what="stage"):
    if not isinstance(fn, Dispatcher):
        raise StageError(f"the {what} {getattr(fn, '__qualname__', fn)!r} is not a jitted "
                         "function: decorate it with @numba.njit (or pktbuf's kernel)")
    sig = inspect.signature(fn.py_func)
    pos = [p for p in sig.parameters.values()
           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(pos) != NPARAMS or len(pos) != len(sig.parameters):
        raise StageError(f"the {what} {fn.py_func.__qualname__}{sig} must take exactly "
                         f"{NPARAMS} positional parameters {PARAMS}")
    try:
        return gen.function_ref(fn)
    except ValueError as e:
        raise StageError(str(e)) from None


FILE_PREFIX = "pktbuf_stagefile_"


def file_module(path: str):
    """The module of the Python file ``path``, imported (once per process) as
    ``pktbuf_stagefile_<digest of the absolute path>_<stem>``: a stable name, so the generated
    loop's ``from <name> import <fn>`` finds it in every process that imported the file this
    way first (``--workers`` processes do, through :meth:`Stage.from_spec`)."""
    ap = os.path.abspath(path)
    if not os.path.isfile(ap):
        raise StageError(f"--stage: no such file {path!r}")
    base = os.path.basename(ap)
    base = base[:-3] if base.endswith(".py") else base
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "stage"
    name = f"{FILE_PREFIX}{hashlib.sha256(ap.encode()).hexdigest()[:12]}_{stem}"
    hit = sys.modules.get(name)
    if hit is not None:
        return hit
    spec = importlib.util.spec_from_file_location(name, ap)
    if spec is None or spec.loader is None:
        raise StageError(f"--stage: {path!r} is not a Python source file")
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    try:
        spec.loader.exec_module(m)
    except BaseException:
        del sys.modules[name]
        raise
    return m


FD_ENV = "PKTBUF_STAGE_FD_"


def export_fd(name: str, fd: int) -> None:
    """Offer ``fd`` (a shared table's memfd: ``Hash(..., shared=True).fd``) to the worker
    processes started after this call, under ``name``: a stage factory calls it when
    ``worker`` is None (the process that starts the workers) and :func:`import_fd` in each
    worker.  It goes through the environment (``PKTBUF_STAGE_FD_<name>=<pid>:<fd>``), which
    the workers inherit."""
    if not name.isidentifier():
        raise InvalidArgument(f"export_fd: {name!r} must be an identifier")
    os.environ[FD_ENV + name] = f"{os.getpid()}:{int(fd)}"


def import_fd(name: str) -> int:
    """A new fd of the file the starting process offered under ``name`` (opened through
    ``/proc/<pid>/fd/<fd>``: root, or the same user with ptrace access); StageError when
    nothing was offered or that process or fd is gone."""
    v = os.environ.get(FD_ENV + name, "")
    pid, sep, fd = v.partition(":")
    if not sep or not pid.isdigit() or not fd.isdigit():
        raise StageError(f"no fd offered under {name!r} (export_fd in the starting process)")
    try:
        return os.open(f"/proc/{int(pid)}/fd/{int(fd)}", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise StageError(f"the fd offered under {name!r} ({v}) cannot be opened: "
                         f"{e.strerror}") from None


def _required(fn) -> set:
    """The names of ``fn``'s parameters that have no default."""
    return {p.name for p in inspect.signature(fn).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


class Stage:
    """A stage: ``fn(state, dom, rx_port, pkts, n, dest, cnt)`` (see
    :mod:`pktbuf.apps.stage.abi`), the ``state`` passed to it, the names of its ``counters``
    and of its ``drop_reasons`` (reason ``i`` is ``stage_drop(i)``).  ``depends``: further
    source files whose changes must recompile the loop (modules the stage calls into besides
    its own and pktbuf)."""

    def __init__(self, fn, state=None, *, counters=(), drop_reasons=(), depends=()):
        self._refs = [(*_check_fn(fn), (0, len(tuple(counters))))]
        self.fns = (fn,)
        self.state = state
        self.counters = tuple(str(c) for c in counters)
        self.drop_reasons = tuple(str(r) for r in drop_reasons)
        self.depends = tuple(str(d) for d in depends)
        self._loops = {}

    @classmethod
    def chain(cls, *stages: "Stage") -> "Stage":
        """The stages called in order on every burst, each with its own state and counters;
        counter and drop-reason names are prefixed by the stage index when they collide."""
        if len(stages) < 2:
            raise StageError("a chain takes at least two stages")
        for s in stages:
            if not isinstance(s, Stage) or len(s.fns) != 1:
                raise StageError("a chain is made of single Stage objects")
        self = cls.__new__(cls)
        refs, counters, reasons, off = [], [], [], 0
        for s in stages:
            k = len(s.counters)
            refs.append((s._refs[0][0], s._refs[0][1], (off, off + k)))
            off += k
            counters += list(s.counters)
            reasons += list(s.drop_reasons)
        self._refs = refs
        self.fns = tuple(s.fns[0] for s in stages)
        self.state = tuple(s.state for s in stages)
        self.counters = tuple(counters)
        self.drop_reasons = tuple(reasons)
        self.depends = tuple(d for s in stages for d in s.depends)
        self._loops = {}
        return self

    @classmethod
    def from_spec(cls, spec: str, *, worker: int | None = None) -> "Stage":
        """``module:function`` or ``path/to/file.py:function`` (``--stage``): a jitted
        function, a :class:`Stage`, or a function returning one (called here; if it takes a
        ``worker`` parameter it gets ``worker``: None in the process that checks the stage
        and in a single-process run, the worker's number in a ``--workers`` process).  A file
        is imported under a name derived from its absolute path (:func:`file_module`), the
        same in every process."""
        if not isinstance(spec, str):
            raise StageError(f"--stage takes module:function, got {spec!r}")
        mod, sep, name = spec.rpartition(":")
        if not sep or not mod or not name:
            raise StageError(f"--stage takes module:function or path/to/file.py:function, "
                             f"got {spec!r}")
        try:
            if mod.endswith(".py") or os.sep in mod:
                m = file_module(mod)
            else:
                m = importlib.import_module(mod)
        except StageError:
            raise
        except Exception as e:          # ImportError, SyntaxError, whatever its top level raised
            raise StageError(f"--stage {spec}: cannot import {mod!r}: "
                             f"{type(e).__name__}: {e}") from None
        obj = getattr(m, name, None)
        if obj is None:
            raise StageError(f"--stage {spec}: module {mod!r} has no {name!r}")
        if isinstance(obj, Stage):
            return obj
        if isinstance(obj, Dispatcher):
            try:
                return cls(obj)
            except StageError as e:
                raise StageError(f"--stage {spec}: {e}") from None
        if inspect.isfunction(obj) and _required(obj) - {"worker"}:
            # parameters a factory would not take: a stage someone forgot to jit
            raise StageError(f"--stage {spec}: the stage {name!r} is not a jitted function: "
                             "decorate it with @numba.njit (or pktbuf's kernel)")
        if inspect.isfunction(obj):
            try:
                takes = "worker" in inspect.signature(obj).parameters
                st = obj(worker=worker) if takes else obj()
            except StageError as e:
                raise StageError(f"--stage {spec}: {e}") from None
            except Exception as e:      # the user's factory failed: say so, with its words
                raise StageError(f"--stage {spec}: {name}() failed: "
                                 f"{type(e).__name__}: {e}") from None
            if not isinstance(st, Stage):
                raise StageError(f"--stage {spec}: {name}() returned "
                                 f"{type(st).__name__}, not a Stage")
            return st
        raise StageError(f"--stage {spec}: {name} is not a jitted function (decorate it with "
                         "@numba.njit), a Stage, or a function returning a Stage")

    @property
    def name(self) -> str:
        """``module:function`` of the stage (a chain's joined by ``+``)."""
        return "+".join(f"{m}:{n}" for m, n, _ in self._refs)

    @property
    def loop(self):
        """The compiled loop's dispatcher (``stage_loop`` of the generated module), for ports
        of every kind."""
        return self.loop_for(None)

    def loop_for(self, kinds: int | None):
        """The compiled loop for ports of the kinds in the mask ``kinds``
        (:func:`pktbuf.ethdev.api.kinds_of_devices`; None: every kind): only those kinds'
        burst kernels are compiled into it."""
        kinds = None if kinds is None or kinds & KINDS_ALL == KINDS_ALL else int(kinds)
        lp = self._loops.get(kinds)
        if lp is None:
            lp = self._loops[kinds] = gen.load(self._refs, self.depends,
                                               kinds=kinds).stage_loop
        return lp

    @property
    def module_file(self) -> str:
        return gen.load(self._refs, self.depends).__file__

    @property
    def dist_loop(self):
        """The compiled loop of a distributor-fed worker (``stage_dist_loop`` of the module
        generated from :mod:`pktbuf.apps.stage.dist_loop`)."""
        if getattr(self, "_dist_loop", None) is None:
            from . import dist_loop as template
            self._dist_loop = gen.load(self._refs, self.depends,
                                       template=template).stage_dist_loop
        return self._dist_loop

    def compiled(self, call):
        """``call()`` (a first call of one of this stage's loops), its Numba errors as
        :class:`StageError`."""
        try:
            return call()
        except StageError:
            raise
        except Exception as e:          # numba's TypingError, LoweringError, ...
            msg = str(e).strip().splitlines()
            head = "\n".join(msg[:12])
            raise StageError(f"the stage {self.name} does not compile with this state "
                             f"({type(e).__name__}):\n{head}") from None

    def check(self, ports, kinds: int | None = None) -> None:
        """Compile the loop with this state over ``ports``' table (no port need be open; a
        run of zero streams) -- or load it from the cache.  :class:`StageError` with Numba's
        message when it does not compile.  ``kinds``: the port kinds the loop is for, as
        :class:`StageRunner` takes them (give the same to both: before any port opens,
        :func:`pktbuf.ethdev.api.kinds_of_devices` of the device strings)."""
        r = StageRunner(ports, self, streams=[], kinds=kinds)
        self.compiled(lambda: r.run(0.0))


class StageRunner:
    """One lcore's loop over ``streams`` -- (rx port, rx queue, default Tx port) each --
    through ``stage``.  ``txq``: the Tx queue this lcore sends on; ``lcore``: its id (mempool
    cache); ``idle_backoff``: back off when polls find nothing (pktbuf fwd's default);
    ``record_cycles``: count the busy TSC cycles (:meth:`busy_cycles`), as testpmd's
    ``--record-core-cycles`` (off: the loop reads no clock for it).  ``tx_drain_us``: the
    period of the timed drain of the per-port Tx buffers (:mod:`pktbuf.apps.stage.loop`;
    l3fwd's ``BURST_TX_DRAIN_US``); they are drained after an idle round and before every
    return of :meth:`run` too.  ``kinds``: the mask of
    the port kinds the compiled loop serves (default: the kinds of the ports open in
    ``ports``, every kind if none is); should a port of another kind be open when the loop
    runs, the loop for the wider mask is taken (compiled or loaded) -- never a port that
    silently receives and sends nothing."""

    def __init__(self, ports, stage: Stage, streams, *, lcore: int = 0, txq: int = 0,
                 burst: int = 32, idle_backoff: bool = True, record_cycles: bool = False,
                 kinds: int | None = None, tx_drain_us: float = BURST_TX_DRAIN_US):
        if not 1 <= burst <= MAX_BURST:
            raise InvalidArgument(f"burst must be in 1..{MAX_BURST}")
        if not 0 <= tx_drain_us <= MAX_TX_DRAIN_US:
            raise InvalidArgument(f"tx_drain_us must be in 0..{MAX_TX_DRAIN_US}")
        st = np.asarray(list(streams), dtype=np.int64).reshape(-1, 3)
        if st.size and (st.min() < 0 or st[:, [0, 2]].max() >= MAX_PORTS):
            raise InvalidArgument(f"stream port ids must be in 0..{MAX_PORTS - 1}")
        self.ports, self.stage, self.streams = ports, stage, st
        self.lcore, self.txq, self.burst = int(lcore), int(txq), int(burst)
        self.idle_max_us = IDLE_SLEEP_MAX_US if idle_backoff else -1
        self.record_cycles = bool(record_cycles)
        self.tx_drain_ns = int(tx_drain_us * 1000)
        self.cnt = np.zeros((MAX_PORTS, F_WORDS), np.int64)
        self.scnt = np.zeros(max(1, len(stage.counters)), np.int64)
        self.drops = np.zeros(len(stage.drop_reasons) + 1, np.int64)
        self._dest = np.zeros((max(1, len(st)), burst), np.int32)
        self._dclean = np.zeros(max(1, len(st)), np.int64)
        self._pk = np.zeros(burst, np.int32)
        self._txbuf = np.zeros((MAX_PORTS, burst), np.int32)
        self._txn = np.zeros(MAX_PORTS, np.int64)
        self.kinds = kinds_of_ports(ports) if kinds is None else int(kinds)
        self._loop = None

    def run(self, seconds: float) -> int:
        """Run for up to ``seconds`` (at least one round); returns ``R_DEADLINE``,
        ``R_ALL_EOF`` or ``R_PORT_ERROR``."""
        k = kinds_of_ports(self.ports) if len(self.ports) else 0
        if self._loop is None or k & ~self.kinds:
            self.kinds |= k
            self._loop = self.stage.loop_for(self.kinds)
        deadline = time.monotonic_ns() + int(seconds * 1e9)
        return int(self._loop(self.ports.state, self.lcore, self.streams, self.txq,
                                   self.burst, self.stage.state, self.cnt, self.scnt,
                                   self.drops, self._dest, self._dclean, self._pk, self._txbuf,
                                   self._txn,
                                   deadline, self.tx_drain_ns, self.idle_max_us,
                                   self.record_cycles))

    def busy_cycles(self) -> int:
        """TSC cycles of the iterations that received packets (0 without
        ``record_cycles``)."""
        return int(self.cnt[:, F_BUSY_CYCLES].sum())

    def counters(self) -> dict:
        return {n: int(self.scnt[i]) for i, n in enumerate(self.stage.counters)}

    def drop_counts(self) -> dict:
        out = {n: int(self.drops[i]) for i, n in enumerate(self.stage.drop_reasons)}
        out["invalid"] = int(self.drops[-1])
        return out

    def port_counts(self, pid: int) -> dict:
        c = self.cnt[pid]
        return {"rx": int(c[F_RX]), "tx": int(c[F_TX]), "tx_dropped": int(c[F_TX_DROP]),
                "rx_bytes": int(c[F_RX_BYTES]), "tx_bytes": int(c[F_TX_BYTES]),
                "stage_dropped": int(c[F_STAGE_DROP])}
