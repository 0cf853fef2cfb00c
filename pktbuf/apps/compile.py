"""``pktbuf compile``: warm the Numba cache explicitly, in parallel, and report where compile time
goes.

::

    pktbuf compile                     # what `pktbuf demo` and `pktbuf fwd` run, on every core
    pktbuf compile --jobs 1 fwd        # one target, one process
    pktbuf compile --report            # cold, into a temporary cache: seconds per kernel
    pktbuf compile --report --json r.json all

The work is split into **units** (:data:`UNITS`): the facade's entry points, each port type's
Rx and Tx burst kernels (``memif:rx``, ``memif:tx``; ``memif`` is both), the forwarding loop,
the demo's traffic loop, ...  The units run in one worker process per core (each runs one
unit after another, as they become ready: Python, Numba and what earlier units loaded start
once per core), so a driver's Rx kernels compile beside its Tx kernels and beside another
driver's, and the forwarding loop then loads all of them from the cache instead of compiling
them one after the other.  Two processes never compile one function: every pktbuf kernel
compiles under a per-function file lock (:func:`pktbuf._jit._compile_lock`); a process that
needs a function another is compiling waits and then loads it.

A unit compiles kernels for the exact types the commands call them with: the port types'
bursts by signature (the types ``rx_burst``/``tx_burst`` pass), the rest by running the
facade path or loop once on a small private pool.  Nothing is compiled that the target does
not run.

``--report`` compiles the targets cold, into a temporary ``NUMBA_CACHE_DIR`` (unless
``--warm``), and prints per unit its wall and CPU time and per kernel the seconds spent compiling it
(self: its own compilation; total: with the callees it compiled), and the number of
specialisations.  The figures come from Numba's ``numba:compile`` events.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from ..errors import cli_number

# --------------------------------------------------------------------------------------------
# the units


def _burst_sig(qkind: str):
    from numba import types
    from ..block import BlockType
    return (BlockType("domain"), BlockType(qkind), types.int64, types.int32[::1], types.int64)


def _dispatcher(path: str):
    """The kernel at dotted ``path`` (``pktbuf.drivers.pcap.rx.pcap_rx_burst``), imported."""
    import importlib
    mod, _, name = path.rpartition(".")
    return getattr(importlib.import_module(mod), name)


def _bursts(*pairs):
    """A unit compiling driver burst kernels by signature: ``(dispatcher path, queue kind)``."""
    def run():
        import importlib
        importlib.import_module("pktbuf.buf.mbuf.layout")      # the domain block's layout
        for path, qkind in pairs:
            _dispatcher(path).compile(_burst_sig(qkind))
    return run


def _core():
    from ..buf.domain.shared_workers import warm_kernels
    warm_kernels()


def _free_paths():
    from ..buf.mbuf.free import install_free_paths
    install_free_paths()


def _eof():
    from ..block import BlockType
    from ..buf.mbuf import layout  # noqa: F401  (the domain block's layout)
    from ..drivers.pcap.rx import pcap_rx_eof
    pcap_rx_eof.compile((BlockType("pcap_rxq"),))


DRIVERS = ("ring", "memif", "pcap", "af_packet", "af_xdp", "vhost", "virtio_user")
_KIND_OF = {"ring": "K_RING", "memif": "K_MEMIF", "pcap": "K_PCAP", "af_packet": "K_AF_PACKET",
            "af_xdp": "K_AF_XDP", "vhost": "K_VHOST",
            "virtio_user": "K_VIRTIO_USER"}
_DRIVER_OF = {"net_ring": "ring", "net_memif": "memif", "net_pcap": "pcap",
              "net_af_packet": "af_packet", "net_af_xdp": "af_xdp", "net_vhost": "vhost",
              "net_virtio_user": "virtio_user"}


def _pcapng():
    from ..buf.mbuf import layout  # noqa: F401  (the domain block's layout)
    from ..drivers.pcap.ngcall import pcapng_parser
    pcapng_parser()


def _fwd(drivers):
    """The forwarding loop for ports of ``drivers`` (it is compiled once per set of port
    kinds, with those kinds' bursts only: :func:`pktbuf.ethdev.burst.rx_burst_of`)."""
    def run():
        from ..drivers.common import kinds as K
        from ..drivers.ring.api import RingPort
        from ..ethdev.burst import kinds_mask
        from .fwd.forwarder import Forwarder
        fw = Forwarder([lambda pool, pid: RingPort(pool=pool, port_id=pid)], "io", nb_mbufs=256)
        try:
            fw.warm(kinds_mask(getattr(K, _KIND_OF[d]) for d in drivers))
        finally:
            fw.close()
    return run


def _traffic():
    from .traffic import warm
    warm()


_BURSTS = {
    # driver: ((Rx burst kernel, its queue's block kind), (Tx ...))
    "ring": (("pktbuf.drivers.ring.burst.eth_ring_rx_burst", "eth_ring_queue"),
             ("pktbuf.drivers.ring.burst.eth_ring_tx_burst", "eth_ring_queue")),
    "memif": (("pktbuf.drivers.memif.datapath.memif_rx_burst", "memif_queue"),
              ("pktbuf.drivers.memif.datapath.memif_tx_burst", "memif_queue")),
    "pcap": (("pktbuf.drivers.pcap.rx.pcap_rx_burst", "pcap_rxq"),
             ("pktbuf.drivers.pcap.tx.pcap_tx_burst", "pcap_txq")),
    "af_packet": (("pktbuf.drivers.af_packet.rx.af_packet_rx_burst", "af_packet_rxq"),
                  ("pktbuf.drivers.af_packet.tx.af_packet_tx_burst", "af_packet_txq")),
    "af_xdp": (("pktbuf.drivers.af_xdp.rx.af_xdp_rx_burst", "af_xdp_rxq"),
               ("pktbuf.drivers.af_xdp.tx.af_xdp_tx_burst", "af_xdp_txq")),
    "vhost": (("pktbuf.drivers.vhost.rx.vhost_rx_burst", "vhost_queue"),
              ("pktbuf.drivers.vhost.tx.vhost_tx_burst", "vhost_queue")),
    "virtio_user": (("pktbuf.drivers.virtio_user.rx.virtio_user_rx_burst", "virtio_user_queue"),
                    ("pktbuf.drivers.virtio_user.tx.virtio_user_tx_burst", "virtio_user_queue")),
}

UNITS = {
    # name: (units it builds on, what it runs; None: nothing of its own, it is done when the
    # units it builds on are).  A port type's unit is its Rx and its Tx bursts, each in a
    # process of its own (``memif:rx``, ``memif:tx``): they are most of the compile work of
    # a command and share little, so the two compile side by side.  The bursts build on
    # nothing: they start beside the facade's entries, and the mbuf kernels several of them
    # call are compiled by whichever gets there first (the others wait on the function's lock,
    # then load it)
    # the free kernels' rare paths, called through the call table (pktbuf.calltable): every
    # process that makes a domain loads them, so the units that run code on a pool build on it
    "mbuf:free": ((), _free_paths),
    "core": (("mbuf:free",), _core),
    # the pcapng parser: compiled when a port opens a pcapng file, not with the bursts
    # (pktbuf.drivers.pcap.ngcall), so neither `demo` nor `fwd` compiles it
    "pcapng": ((), _pcapng),
}

def _memif_paths(*names):
    """A unit compiling memif burst paths the bursts call through an address
    (:mod:`pktbuf.drivers.memif.variants`), by name."""
    def run():
        from ..drivers.memif.variants import burst_address
        for name in names:
            burst_address(name)
    return run


# memif's burst paths called through an address: the general copy loops, which every copy
# queue may fall back to, are part of the port type (a unit each: among the largest pieces of
# its compile work); the zero-copy loops only of the targets that compile everything ("ports",
# "all") -- a zero-copy device compiles them when it is created
MEMIF_PATH_UNITS = {"memif:rx:general": ("rx_general",), "memif:tx:general": ("tx_general",),
                    "memif:zerocopy": ("rx_zerocopy", "tx_zerocopy")}
for _u, _names in MEMIF_PATH_UNITS.items():
    UNITS[_u] = ((), _memif_paths(*_names))
_PORT_EXTRA = {"memif": ("memif:rx:general", "memif:tx:general")}
for _d in DRIVERS:
    _rx, _tx = _BURSTS[_d]
    UNITS[f"{_d}:rx"] = ((), _bursts(_rx) if _d != "pcap"
                          else (lambda f=_bursts(_rx): (f(), _eof())))
    UNITS[f"{_d}:tx"] = ((), _bursts(_tx))
    # (and the free paths: whatever opens a port of the type makes a domain first)
    UNITS[_d] = (("mbuf:free", f"{_d}:rx", f"{_d}:tx") + _PORT_EXTRA.get(_d, ()), None)
# the bursts it links, not the paths
UNITS["traffic"] = (("mbuf:free", "memif:rx", "memif:tx"), _traffic)
# the forwarding loop for one port type each (fwd:memif, ...), and for every type at once
for _d in DRIVERS:
    UNITS[f"fwd:{_d}"] = ((_d,), _fwd((_d,)))
UNITS["fwd:all"] = (DRIVERS, _fwd(DRIVERS))


def fwd_unit(drivers) -> str:
    """The unit of the forwarding loop for ports of ``drivers`` (a set of names of
    :data:`DRIVERS`), registered on first use: ``fwd:memif``, ``fwd:pcap+ring``, ..."""
    ds = tuple(sorted(set(drivers), key=DRIVERS.index))
    name = "fwd:all" if set(ds) == set(DRIVERS) else "fwd:" + "+".join(ds)
    if name not in UNITS:
        UNITS[name] = (ds, _fwd(ds))
    return name


def fwd_unit_for(vdevs) -> str:
    """:func:`fwd_unit` for the device strings of a ``pktbuf fwd`` command line (all kinds when
    one is not recognised: its error comes when the port opens)."""
    from ..ethdev.api import driver_of
    ds = set()
    for v in vdevs or ():
        try:
            ds.add(_DRIVER_OF[driver_of(v.split(",", 1)[0])])
        except Exception:          # noqa: BLE001 -- an unknown device: reported when it opens
            return "fwd:all"
    return fwd_unit(ds or DRIVERS)


def pcapng_inputs(vdevs) -> bool:
    """Whether a ``pktbuf fwd`` command line replays a pcapng file (an ``rx_pcap=`` file that
    starts with a Section Header Block): its port then needs the pcapng parser, which is not
    compiled with the bursts (:mod:`pktbuf.drivers.pcap.ngcall`), so the command compiles it
    beside the other units.  A look at four bytes; a file that cannot be read says no (its
    error comes when the port opens)."""
    from ..drivers.pcap.format import BT_SHB
    for v in vdevs or ():
        for arg in str(v).split(",")[1:]:
            key, _, path = arg.partition("=")
            if key.strip() != "rx_pcap":
                continue
            try:
                with open(path, "rb") as f:
                    head = f.read(4)
            except OSError:
                continue
            if len(head) == 4 and int.from_bytes(head, "little") == BT_SHB:
                return True
    return False


def port_units_to_compile(vdevs) -> list[str]:
    """The burst units (``pcap:rx``, ``pcap:tx``, ...) of the port types of a command line
    whose burst kernels the cache holds no version of yet, and ``mbuf:free`` if the free paths
    are not cached: what a command that compiles its own loop (``pktbuf l3fwd``: its stage's)
    compiles on every core first, so that its loop then loads them.  A device that is not
    recognised adds nothing (its error comes when the port opens)."""
    from ..ethdev.api import driver_of
    units: list[str] = []
    for v in vdevs or ():
        try:
            d = _DRIVER_OF[driver_of(str(v).split(",", 1)[0])]
        except Exception:          # noqa: BLE001 -- reported when the port opens
            continue
        for side, (path, _qkind) in zip(("rx", "tx"), _BURSTS[d]):
            u = f"{d}:{side}"
            if u in units:
                continue
            if not _cached_args(_dispatcher(path)):
                units.append(u)
        for u in _PORT_EXTRA.get(d, ()):
            if u not in units and not all(_cached_args(_memif_path(n))
                                          for n in MEMIF_PATH_UNITS[u]):
                units.append(u)
    from ..buf.mbuf.free import FREE_PATHS
    if not all(_cached_args(p) for p in FREE_PATHS):     # what every domain loads, first
        units.insert(0, "mbuf:free")
    return units


def _memif_path(name: str):
    from ..drivers.memif.variants import BURST_PATHS
    return BURST_PATHS[name]


TARGETS = {
    "core": ("core",),
    "fwd": tuple(f"fwd:{d}" for d in DRIVERS),
    # not "core": the demo's processes use pools through their loops and ports only, and the
    # mbuf kernels the memif bursts call compile in the two burst units, side by side
    "demo": ("fwd:memif", "traffic"),
    # the facade's entries and every port type's bursts, without the loops that call them
    # (CI's checked pass: its tests drive the kernels, not the fwd or traffic loops)
    "ports": ("core",) + DRIVERS + ("pcapng", "memif:zerocopy"),
    "all": tuple(u for u in UNITS if u != "fwd:all"),
}
DEFAULT_TARGETS = ("demo",)


def _waits_for(u: str) -> tuple:
    """The units that must be done before unit ``u`` starts.  A forwarding loop's unit starts
    beside the port types' units it builds on: its first work is the forwarder's pool and
    ports, and a burst kernel both processes reach is compiled by whichever gets there first
    (the other waits on the function's lock, then loads it) -- cold ``pktbuf fwd`` over a
    capture file went from 25 s to 18 s so."""
    return () if u.startswith("fwd:") else UNITS[u][0]


def units_for(targets, *, deps: bool = True) -> list[str]:
    """The units ``targets`` need, each after the units it builds on (``deps=False``: the
    named units alone)."""
    out: list[str] = []

    def add(u):
        if u in out:
            return
        if u not in UNITS and u.startswith("fwd:"):
            u = fwd_unit(u[4:].split("+"))
            if u in out:
                return
        for d in UNITS[u][0] if deps or UNITS[u][1] is None else ():
            add(d)
        out.append(u)
    for t in targets:
        for u in TARGETS.get(t, (t,)):
            add(u)
    return out


# --------------------------------------------------------------------------------------------
# running one unit (in this process) and recording what it compiled


def _record(fn):
    """Run ``fn`` and return the compilations it caused:
    ``[{"kernel", "args", "self_s", "total_s"}]`` from Numba's ``numba:compile`` events."""
    from numba.core import event
    with event.install_recorder("numba:compile") as rec:
        fn()
    out, stack = [], []
    for ts, ev in rec.buffer:
        if ev.is_start:
            stack.append([ts, ev, 0.0])
        else:
            t0, ev0, child = stack.pop()
            total = ts - t0
            if stack:
                stack[-1][2] += total
            disp = ev0.data.get("dispatcher")
            py = getattr(disp, "py_func", None)
            name = f"{py.__module__}.{py.__qualname__}" if py is not None else str(disp)
            out.append({"kernel": name, "args": str(ev0.data.get("args")),
                        "self_s": round(total - child, 4), "total_s": round(total, 4)})
    return out


def run_unit(name: str, report: bool = False) -> dict:
    if name not in UNITS and name.startswith("fwd:"):
        name = fwd_unit(name[4:].split("+"))
    t0, c0 = time.perf_counter(), time.process_time()
    fn = UNITS[name][1] or (lambda: None)
    compiled = _record(fn) if report else (fn(), [])[1]
    # CPU seconds beside wall seconds: on a loaded machine waiting for a CPU inflates the wall
    # figure, much less the CPU one
    return {"unit": name, "seconds": round(time.perf_counter() - t0, 3),
            "cpu_s": round(time.process_time() - c0, 3), "compiled": compiled}


def _worker_main(argv) -> int:
    """A compile worker: runs the units named on its stdin, one per line, in turn, and writes
    each one's result (or its error) as a JSON line to file descriptor ``argv[0]``; ends at
    the end of its input.  One process runs several units, so Python, Numba and what the
    earlier units loaded start once per core, not once per unit."""
    import traceback
    out = os.fdopen(int(argv[0]), "w")
    report = argv[1] == "1"
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        try:
            r = run_unit(name, report)
        except BaseException:          # noqa: BLE001 -- reported to the scheduler, which raises
            r = {"unit": name, "error": traceback.format_exc()}
        out.write(json.dumps(r) + "\n")
        out.flush()
    return 0


# --------------------------------------------------------------------------------------------
# the scheduler


class CompileFailed(RuntimeError):
    pass


class _Worker:
    """A :func:`_worker_main` process, its result pipe and its error output."""

    def __init__(self, env, report):
        rfd, wfd = os.pipe()
        self.err = tempfile.TemporaryFile("w+")      # a file, not a pipe: it is read at the end
        try:
            self.p = subprocess.Popen(
                [sys.executable, "-m", "pktbuf.apps.compile", "--worker", str(wfd),
                 "1" if report else "0"], env=env, stdin=subprocess.PIPE, stdout=self.err,
                stderr=self.err, pass_fds=(wfd,), text=True)
        finally:
            os.close(wfd)
        self.results = os.fdopen(rfd, "r")
        self.unit = None
        self.t0 = 0.0

    def start(self, u):
        self.unit, self.t0 = u, time.perf_counter()
        self.p.stdin.write(u + "\n")
        self.p.stdin.flush()

    def error_output(self) -> str:
        self.err.seek(0)
        return self.err.read().strip()[-4000:]

    def close(self, kill=False):
        try:
            self.p.stdin.close()                      # the end of its input: it exits
        except OSError:
            pass
        if kill:
            self.p.kill()
        try:
            self.p.wait(timeout=None if kill else 30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.results.close()
        self.err.close()


def compile_targets(targets=DEFAULT_TARGETS, jobs: int | None = None, *, report=False,
                    env=None, quiet=True, deps: bool = True) -> list[dict]:
    """Compile (or load) what ``targets`` need; ``jobs`` processes at once (default: one per
    CPU this process may use), each running units in turn as they become ready.  Returns one
    result per unit (with the compilations when ``report``).  Raises :class:`CompileFailed`
    naming the unit and its error output."""
    import selectors
    units = units_for(targets, deps=deps)
    if jobs is None:
        jobs = len(os.sched_getaffinity(0))
    if jobs <= 1 and env is None:
        return [run_unit(u, report) for u in units if UNITS[u][1] is not None]
    done: dict[str, dict] = {}
    todo = list(units)
    env = dict(os.environ if env is None else env)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    workers: list[_Worker] = []
    sel = selectors.DefaultSelector()
    failed = True
    try:
        while todo or any(w.unit for w in workers):
            while True:
                ready = [u for u in todo
                         if all(d in done or d not in units for d in _waits_for(u))]
                empty = [u for u in ready if UNITS[u][1] is None]    # nothing to run: done
                if not empty:                                        # (and what waits for
                    break                                            # it may be ready now)
                for u in empty:
                    todo.remove(u)
                    done[u] = {"unit": u, "seconds": 0.0, "cpu_s": 0.0, "compiled": [],
                               "wall_s": 0.0}
            # a forwarding loop may start beside its port types' units (_waits_for), but
            # what is ready and would not wait on their locks goes first
            ready.sort(key=lambda u: u.startswith("fwd:") and not all(
                f"{d}:{side}" in done for d in UNITS[u][0] for side in ("rx", "tx")))
            for u in ready:
                idle = [w for w in workers if w.unit is None]
                if not idle and len(workers) < max(1, jobs):
                    w = _Worker(env, report)
                    workers.append(w)
                    sel.register(w.results, selectors.EVENT_READ, w)
                    idle = [w]
                if not idle:
                    break
                todo.remove(u)
                idle[0].start(u)
            busy = [w for w in workers if w.unit]
            if not busy:
                if not todo:
                    break
                raise CompileFailed(f"units {todo} wait for units that are not scheduled")
            for key, _ in sel.select(timeout=1.0):
                w = key.data
                line = w.results.readline()
                u = w.unit
                if not line:                             # the worker died
                    code = w.p.wait()
                    raise CompileFailed(f"compiling unit {u!r} failed (exit {code}):\n"
                                        + w.error_output())
                r = json.loads(line)
                if "error" in r:
                    raise CompileFailed(f"compiling unit {u!r} failed:\n"
                                        + r["error"].strip()[-4000:])
                r["wall_s"] = round(time.perf_counter() - w.t0, 3)
                done[u] = r
                w.unit = None
                if not quiet:
                    print(f"  {u:10s} {r['wall_s']:7.1f} s", flush=True)
        failed = False
    finally:
        for w in workers:
            w.close(kill=failed)
        sel.close()
    return [done[u] for u in units if u in done and UNITS[u][1] is not None]


def _cached_args(disp) -> list | None:
    """The argument types of the versions of ``disp`` its cache index holds for these sources
    (a read of the index file, nothing is loaded), or None when it has no index."""
    cf = getattr(disp._cache, "_cache_file", None)
    path = getattr(cf, "_index_path", None)
    if path is None or not os.path.exists(path):
        return None
    try:
        index = cf._load_index()
    except Exception:          # noqa: BLE001 -- an unreadable index: as good as none
        return None
    return [tuple(getattr(k[0], "args", k[0])) for k in index]


def _unit_kinds(u: str) -> int:
    """The port-kind mask the forwarding loop of unit ``u`` (``fwd:...``) is compiled for."""
    from ..drivers.common import kinds as K
    from ..ethdev.burst import kinds_mask
    if u not in UNITS:
        u = fwd_unit(u[4:].split("+"))
    return kinds_mask(getattr(K, _KIND_OF[d]) for d in UNITS[u][0])


def is_warm(targets=DEFAULT_TARGETS) -> bool:
    """Whether the cache already holds the loops of ``targets`` for these sources (a cheap
    check of their index files; anything missing still compiles on first use).  The
    forwarding loop is compiled once per set of port kinds: it is warm for a ``fwd:...`` unit
    only when its index holds the version for that unit's kinds (a loop cached for memif
    ports does not make ``pktbuf fwd`` over a capture file warm)."""
    from numba import types
    from .fwd.loop import fwd_loop
    from .traffic import traffic_loop
    for t in targets:
        for u in TARGETS.get(t, (t,)):
            disp = fwd_loop if u.startswith("fwd:") else traffic_loop if u == "traffic" else None
            if disp is None:
                continue
            cached = _cached_args(disp)
            if not cached:
                return False
            if disp is fwd_loop:
                want = types.literal(_unit_kinds(u))
                if not any(a and a[-1] == want for a in cached):
                    return False
    return True


def ensure_compiled(targets, what: str, *, quiet: bool = False) -> None:
    """On a cold cache, compile ``targets`` on every core first (a first run of ``what``);
    warm, do nothing."""
    if is_warm(targets):
        return
    compile_first_run(targets, what, quiet=quiet)


def compile_first_run(targets, what: str, *, quiet: bool = False) -> None:
    """Compile ``targets`` on every core, saying so on stderr (a first run of ``what``)."""
    jobs = len(os.sched_getaffinity(0))
    if not quiet:
        print(f"{what}: first run, compiling on {jobs} core(s) (pktbuf compile)...",
              file=sys.stderr, flush=True)
    compile_targets(targets, jobs)


# --------------------------------------------------------------------------------------------
# the command


def _table(results) -> str:
    lines = []
    agg: dict[str, dict] = {}
    for r in results:
        lines.append(f"{r['unit']:10s} {r.get('wall_s', r['seconds']):8.2f} s wall, "
                     f"{r.get('cpu_s', 0.0):8.2f} s CPU, {len(r['compiled'])} compilations")
        for c in r["compiled"]:
            a = agg.setdefault(c["kernel"], {"self_s": 0.0, "total_s": 0.0, "n": 0,
                                             "unit": r["unit"]})
            a["self_s"] += c["self_s"]
            a["total_s"] = max(a["total_s"], c["total_s"])
            a["n"] += 1
    if agg:
        lines.append("")
        lines.append(f"{'kernel':64s} {'self s':>8s} {'total s':>8s} {'specs':>5s}  unit")
        for k, a in sorted(agg.items(), key=lambda kv: -kv[1]["self_s"]):
            lines.append(f"{k:64.64s} {a['self_s']:8.2f} {a['total_s']:8.2f} {a['n']:5d}  "
                         f"{a['unit']}")
        lines.append(f"{'all kernels':64s} {sum(a['self_s'] for a in agg.values()):8.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pktbuf compile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*", metavar="TARGET",
                    help=f"what to compile: {', '.join(TARGETS)} or a unit "
                         f"({', '.join(UNITS)}); default: demo")
    ap.add_argument("--jobs", "-j", type=cli_number(int, 1, 256), default=None, metavar="N",
                    help="processes at once (default: one per CPU)")
    ap.add_argument("--only", action="store_true",
                    help="the named units alone, not the units they build on")
    ap.add_argument("--report", action="store_true",
                    help="compile cold into a temporary cache and report seconds per kernel")
    ap.add_argument("--warm", action="store_true",
                    help="--report: into the real cache (what is cached is not compiled)")
    ap.add_argument("--json", metavar="FILE", help="--report: also write the results as JSON")
    a = ap.parse_args(argv)
    for t in a.targets:
        ok = t in TARGETS or t in UNITS or (
            t.startswith("fwd:") and all(d in DRIVERS for d in t[4:].split("+")))
        if not ok:
            ap.error(f"unknown target {t!r}: choose from {', '.join(list(TARGETS) + list(UNITS))}"
                     " or fwd:DRIVER+DRIVER...")
    if (a.warm or a.json) and not a.report:
        ap.error("--warm and --json go with --report")
    targets = a.targets or list(DEFAULT_TARGETS)
    env = None
    tmp = None
    if a.report and not a.warm:
        tmp = tempfile.mkdtemp(prefix="pktbuf-compile-report-")
        env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
    elif a.jobs not in (None, 1):
        env = dict(os.environ)
    t0 = time.perf_counter()
    try:
        results = compile_targets(targets, a.jobs if a.jobs is not None or env is None
                                  else len(os.sched_getaffinity(0)),
                                  report=a.report, env=env, quiet=False, deps=not a.only)
    except CompileFailed as e:
        print(f"pktbuf compile: {e}", file=sys.stderr)
        return 1
    finally:
        if tmp is not None:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    wall = time.perf_counter() - t0
    if a.report:
        print(_table(results))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"targets": targets, "jobs": a.jobs, "wall_s": round(wall, 3),
                           "cold": not a.warm, "units": results}, f, indent=1)
    print(f"pktbuf compile: {', '.join(targets)} in {wall:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.exit(_worker_main(sys.argv[2:]))
    sys.exit(main())
