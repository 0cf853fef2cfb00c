"""The ``pktbuf`` command.

    pktbuf bench [core|memif|vhost|pagepool|heap|ports|rss|distrib|net|l3fwd|lpm_update|all] [options]  measure (default: core)
    pktbuf demo [options]                                   the memif forwarding demo
    pktbuf fwd --vdev DEVICE [--vdev ...] [options]         testpmd-like forwarder over any ports
    pktbuf l3fwd --vdev DEVICE [...] -- -p MASK --config "(port,queue,lcore),..." [l3fwd options]
                                                            DPDK's l3fwd on pktbuf's ports
    pktbuf compile [--jobs N] [--report] [TARGET ...]       warm the kernel cache (default: demo)
    pktbuf info                                             versions and cache location

pktbuf bench core|heap options (``pktbuf bench core --help`` lists them all):
    --dpdk              build and run the DPDK 22.11 reference in the same run, a DPDK column
    --json FILE         every figure, the machine, the command and the commit, as JSON
    --plot FILE.svg     a chart of pktbuf against DPDK (needs matplotlib: pktbuf[plot])
    --report [PATH]     update PATH (default docs/performance.md) and its chart
    --quick             fewer and shorter samples

Exit status (every command): 0 success; 1 a runtime failure (a port error stopped the run, a
port could not be opened, a worker failed, mbufs were not returned, a benchmark failed); 2 a
usage error (an unknown command or option, a value out of its range).  docs/failures.md.
"""
from __future__ import annotations

import importlib
import sys

_BENCHES = {
    "core": "pktbuf.bench.report",
    "memif": "pktbuf.bench.memif",
    "vhost": "pktbuf.bench.vhost",
    "pagepool": "pktbuf.bench.pagepool",
    "heap": "pktbuf.bench.heap",
    "ports": "pktbuf.bench.ports",
    "rss": "pktbuf.bench.rss",
    "distrib": "pktbuf.bench.distrib",
    "net": "pktbuf.bench.net",
    "l3fwd": "pktbuf.bench.l3fwd",
    "lpm_update": "pktbuf.bench.lpm_update",
}


def _bench(argv) -> int:
    if argv and argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    which = argv[0] if argv and not argv[0].startswith("-") else "core"
    rest = argv[1:] if argv and not argv[0].startswith("-") else argv
    names = list(_BENCHES) if which == "all" else [which]
    rc = 0
    for name in names:
        mod = _BENCHES.get(name)
        if mod is None:
            print(f"pktbuf bench: unknown benchmark {name!r} (choose from {', '.join(_BENCHES)}, all)",
                  file=sys.stderr)
            return 2
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            print(f"pktbuf bench {name}: not available in this version", file=sys.stderr)
            rc = rc or 2
            continue
        rc = m.main(rest) or rc
    return rc


def _demo(argv) -> int:
    try:
        m = importlib.import_module("pktbuf.apps.demo")
    except ModuleNotFoundError as e:
        if e.name not in ("pktbuf.apps", "pktbuf.apps.demo"):
            raise
        print("pktbuf demo: the memif demo is not available in this version", file=sys.stderr)
        return 2
    return m.main(argv) or 0


def _fwd(argv) -> int:
    from pktbuf.apps.compile import ensure_compiled, fwd_unit_for, pcapng_inputs
    from pktbuf.apps.fwd import main as fwd
    return fwd.main(argv, before_start=lambda a: ensure_compiled(
        [fwd_unit_for(a.vdev)] + (["pcapng"] if pcapng_inputs(a.vdev) else []), "pktbuf fwd"))


L3FWD_USAGE = """usage: pktbuf l3fwd --vdev DEVICE [--vdev DEVICE ...] -- -p PORTMASK
           --config "(port,queue,lcore)[,(port,queue,lcore)...]" [--lookup lpm|em|fib]
           [--rule_ipv4 FILE --rule_ipv6 FILE] [--eth-dest X,MAC] [--parse-ptype] [-P]
           [--ipv6] [--max-pkt-len N] [--per-port-pool] [--ttl-expiry]

DPDK 22.11's l3fwd on pktbuf's ports: its options after --, as --opt=value or --opt value,
its route files, the same output byte for byte (docs/l3fwd.md); --ttl-expiry drops TTL <= 1
as a router must (DPDK's l3fwd does not).  Stops on Ctrl-C or SIGTERM (exit 0)."""


def _l3fwd(argv) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(L3FWD_USAGE)
        return 0
    from pktbuf.apps.l3fwd import options
    from pktbuf.apps.l3fwd.app import main
    try:
        vdevs = options.parse(argv).vdevs
    except options.UsageError:
        vdevs = []                    # main reports it
    from pktbuf.apps.compile import CompileFailed, compile_first_run, port_units_to_compile
    units = port_units_to_compile(vdevs)
    if units:                         # a first run: the ports' bursts on every core first
        try:
            compile_first_run(units, "pktbuf l3fwd")
        except CompileFailed as e:
            print(f"pktbuf l3fwd: {e}", file=sys.stderr)
            return 1
    return main(argv)


def _compile(argv) -> int:
    from pktbuf.apps import compile as c
    return c.main(argv)


def _info(argv) -> int:
    if argv:
        print(f"pktbuf info: takes no arguments, got {' '.join(argv)!r}", file=sys.stderr)
        return 2
    import numba
    import numpy

    import pktbuf
    from pktbuf import _jit
    print(f"pktbuf {pktbuf.__version__}  numba {numba.__version__}  numpy {numpy.__version__}  "
          f"python {sys.version.split()[0]}")
    print(f"package: {_jit._PKG_DIR}  (kernel cache next to it, or in NUMBA_CACHE_DIR)")
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    handlers = {"bench": _bench, "demo": _demo, "fwd": _fwd, "compile": _compile, "l3fwd": _l3fwd,
                "info": _info}
    if cmd not in handlers:
        print(f"pktbuf: unknown command {cmd!r}\n{__doc__}", file=sys.stderr)
        return 2
    return handlers[cmd](rest)


if __name__ == "__main__":
    sys.exit(main())
