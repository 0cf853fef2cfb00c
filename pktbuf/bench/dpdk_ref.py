"""The DPDK reference: ``dpdk_ref.c`` built against the system's DPDK and driven over a pipe.

``pktbuf bench core --dpdk`` and ``pktbuf bench heap --dpdk`` measure DPDK's own calls in the
same run as pktbuf's, sample for sample (the protocol is at the top of ``dpdk_ref.c``):

* :func:`toolchain` finds a C compiler and ``pkg-config libdpdk``, or raises
  :class:`DpdkMissing` with a plain sentence saying what is missing;
* :func:`build` compiles the program into the user's cache directory
  (``$XDG_CACHE_HOME/pktbuf`` or ``~/.cache/pktbuf``), once per hash of the source, the DPDK
  version and the flags; a compiler error raises :class:`DpdkFailed`;
* :class:`DpdkRef` starts it with :func:`eal_args` and sends commands; a crash, a timeout or
  output that does not parse raises :class:`DpdkFailed`.

EAL runs without hugepages (``--no-huge -m 512``: the memory is ordinary anonymous memory, so
``rte_malloc`` figures differ from a production setup on hugepages), without PCI, without a
shared configuration or telemetry socket, and with lcores allowed on every CPU this process may
use, as pktbuf's threads are.  DPDK 22.11 refuses ``--in-memory`` together with ``--no-huge``
and creates an (empty) runtime directory whatever the options; :class:`DpdkRef` removes it when
the program has exited.

``python -m pktbuf.bench.dpdk_ref [--quick]`` runs DPDK's side of every core case alone and
prints the program's JSON lines.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..fdwait import readable

SOURCE = Path(__file__).with_name("dpdk_ref.c")
TIMEOUT_S = 600.0          # one command may take this long before the program counts as hung


class DpdkMissing(RuntimeError):
    """DPDK (or a C compiler) is not installed: no reference column, and that is all."""


class DpdkFailed(RuntimeError):
    """The reference could not be built or run, or said something that does not parse."""


@dataclass(frozen=True)
class Toolchain:
    cc: str
    cflags: list
    libs: list
    version: str             # pkg-config's libdpdk version, e.g. "22.11.11"


def cache_dir(env=None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pktbuf"


def toolchain(env=None) -> Toolchain:
    """The compiler and DPDK flags, or :class:`DpdkMissing` saying which one is absent."""
    env = dict(os.environ if env is None else env)
    path = env.get("PATH", os.defpath)
    cc = shutil.which(env.get("CC", "gcc"), path=path) or shutil.which("cc", path=path)
    pkgc = shutil.which("pkg-config", path=path)
    if pkgc is None:
        raise DpdkMissing("DPDK not found: no pkg-config on PATH (install pkg-config and "
                          "DPDK's development files, e.g. apt-get install dpdk-dev libdpdk-dev)")

    def pc(*args):
        return subprocess.run([pkgc, *args, "libdpdk"], capture_output=True, text=True,
                              env=env, timeout=60)

    ver = pc("--modversion")
    if ver.returncode != 0:
        raise DpdkMissing("DPDK not found: pkg-config knows no libdpdk (install DPDK's "
                          "development files, e.g. apt-get install dpdk-dev libdpdk-dev)")
    if cc is None:
        raise DpdkMissing("DPDK reference not built: no C compiler (gcc or cc) on PATH")
    cflags, libs = pc("--cflags"), pc("--libs")
    if cflags.returncode != 0 or libs.returncode != 0:
        raise DpdkFailed("pkg-config libdpdk failed: " + (cflags.stderr + libs.stderr).strip())
    return Toolchain(cc, shlex.split(cflags.stdout), shlex.split(libs.stdout),
                     ver.stdout.strip())


def build(source: Path | str | None = None, env=None, tc: Toolchain | None = None,
          extra_cflags: tuple = ()) -> Path:
    """The reference program (default source: :data:`SOURCE`), compiled if the cache has no
    build of this source with this DPDK and these flags (``extra_cflags`` come after
    pkg-config's, so ``-march=native`` overrides its ``-march``)."""
    env = dict(os.environ if env is None else env)
    tc = tc or toolchain(env)
    source = SOURCE if source is None else source
    src = Path(source).read_bytes()
    cmd_tail = ["-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", *tc.cflags,
                *extra_cflags]
    key = hashlib.sha256(b"\0".join([src, tc.version.encode(), tc.cc.encode(),
                                     " ".join(cmd_tail + tc.libs).encode()])).hexdigest()[:16]
    out_dir = cache_dir(env)
    exe = out_dir / f"dpdk_ref-{tc.version}-{key}"
    if exe.is_file() and os.access(exe, os.X_OK):
        return exe
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=exe.name + ".", dir=out_dir)
    os.close(fd)
    cmd = [tc.cc, *cmd_tail, "-o", tmp, "-x", "c", str(source), *tc.libs]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        if r.returncode != 0:
            tail = "\n".join(r.stderr.strip().splitlines()[-15:])
            raise DpdkFailed(f"building the DPDK reference failed ({shlex.join(cmd)}):\n{tail}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, exe)          # atomic: a concurrent build of the same key is harmless
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return exe


def _cpu_list() -> str:
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    return ",".join(map(str, cpus))


def eal_args(prefix: str, lcores: int = 2) -> list[str]:
    """EAL arguments: no hugepages, no PCI, nothing shared on disk, ``lcores`` lcores each
    free to run on every CPU of this process (so DPDK's threads are placed as pktbuf's)."""
    cpus = _cpu_list()
    lc = ",".join(f"{i}@({cpus})" for i in range(lcores))
    return ["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--no-telemetry",
            f"--file-prefix={prefix}", f"--lcores={lc}", "--log-level=lib.eal:warning"]


def runtime_dir(prefix: str) -> Path:
    """Where EAL puts its runtime directory for ``prefix`` (22.11: /var/run/dpdk as root,
    else $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk)."""
    if os.geteuid() == 0:
        base = "/var/run"
    else:
        base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return Path(base) / "dpdk" / prefix


class DpdkRef:
    """A running reference program.  Use as a context manager, or call :meth:`close`."""

    def __init__(self, exe: Path | str, lcores: int = 2, timeout: float = TIMEOUT_S):
        self.prefix = f"pktbuf-ref-{os.getpid()}-{int(time.monotonic() * 1e3) % 100000}"
        self.eal = eal_args(self.prefix, lcores)
        self.timeout = timeout
        self._err = tempfile.TemporaryFile()
        self._buf = b""
        self.proc = subprocess.Popen([str(exe), *self.eal, "--"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err)
        try:
            self._expect("ready")
            self.info = self.command("info", "info")
        except BaseException:
            self.close()
            raise

    # -- the pipe --------------------------------------------------------------------------
    def _stderr_tail(self) -> str:
        self._err.seek(0)
        lines = self._err.read().decode(errors="replace").strip().splitlines()
        return "\n".join(lines[-10:])

    def _fail(self, what: str):
        rc = self.proc.poll()
        msg = f"DPDK reference {what}"
        if rc is not None:
            msg += f" (exit status {rc})"
        tail = self._stderr_tail()
        if tail:
            msg += f"; its stderr ends:\n{tail}"
        self.close()
        raise DpdkFailed(msg)

    def _readline(self) -> str:
        deadline = time.monotonic() + self.timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(f"gave no answer within {self.timeout:.0f} s")
            ready = readable([fd], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    try:
                        self.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        self._fail("closed its output")
                    self._fail("exited")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def _expect(self, kind: str) -> dict:
        line = self._readline()
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            self._fail(f"printed something that is not a JSON object: {line[:200]!r}")
        if obj.get("type") == "error":
            self._fail(f"refused {obj.get('cmd')!r}: {obj.get('error')}")
        if obj.get("type") != kind:
            self._fail(f"answered {obj.get('type')!r} where {kind!r} was expected: {line[:200]!r}")
        return obj

    def command(self, line: str, kind: str) -> dict:
        """Send one command line, return its answer (a dict of type ``kind``)."""
        if self.proc.poll() is not None:
            self._fail("is not running")
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._fail("closed its input")
        return self._expect(kind)

    # -- the cases -------------------------------------------------------------------------
    def core(self, case: str, burst: int, nchunks: int, chunk: int, drop_cyc: int,
             reps: int = 1) -> dict:
        """``reps`` samples of ``nchunks`` timed intervals of ``chunk`` loop iterations each."""
        r = self.command(f"core {case} {burst} {nchunks} {chunk} {int(drop_cyc)} {reps}", "core")
        if len(r.get("samples_cyc", ())) != reps:
            self._fail(f"gave {len(r.get('samples_cyc', ()))} samples for {reps}")
        return r

    def check(self) -> None:
        """Every mbuf back in its pool, or :class:`DpdkFailed`."""
        r = self.command("check", "check")
        if not r.get("ok"):
            self._fail(f"lost mbufs: {r.get('avail')} of {r.get('n')} each")

    def heap1(self, kind: str, size: int, per_chunk: int, chunks: int) -> dict:
        r = self.command(f"heap1 {kind} {size} {per_chunk} {chunks}", "heap1")
        if r.get("fails"):
            self._fail(f"{kind} of {size} B failed {r['fails']} times")
        return r

    def heap2(self, kind: str, size: int, pairs: int, runs: int = 1) -> dict:
        r = self.command(f"heap2 {kind} {size} {pairs} {runs}", "heap2")
        if r.get("fails"):
            self._fail(f"{kind} of {size} B failed {r['fails']} times")
        return r

    # -- life cycle ------------------------------------------------------------------------
    def close(self) -> None:
        p = self.proc
        if p.poll() is None:
            try:
                p.stdin.write(b"quit\n")
                p.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (p.stdin, p.stdout):
            try:
                f.close()
            except OSError:
                pass
        self._err.close() if not self._err.closed else None
        rd = runtime_dir(self.prefix)
        try:
            rd.rmdir()               # only if empty: it is, with --no-shconf --no-telemetry
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def label(self) -> str:
        """What the column is, for tables, reports and charts (the unique file prefix shown
        as ``pktbuf-ref-*``; ``self.eal`` has the exact arguments)."""
        eal = " ".join("--file-prefix=pktbuf-ref-*" if a.startswith("--file-prefix=") else a
                       for a in self.eal)
        return (f"{self.info.get('dpdk', 'DPDK')} (classic mempool cache, "
                f"{self.info.get('mempool_ops', '?')} ops, --no-huge, EAL {eal})")


def start(lcores: int = 2, env=None) -> DpdkRef:
    """Build (if needed) and start the reference: :class:`DpdkMissing` / :class:`DpdkFailed`."""
    return DpdkRef(build(env=env), lcores)


def main(argv=None) -> int:
    import argparse
    from ..errors import cli_number
    from .core import BURSTS, CASES, DROP_US, LAYOUTS, UNITS, chunking, loop_iters
    ap = argparse.ArgumentParser(prog="python -m pktbuf.bench.dpdk_ref",
                                 description="DPDK's side of `pktbuf bench core`, alone: JSON lines.")
    ap.add_argument("--quick", action="store_true", help="1 repetition of 20000 units each")
    ap.add_argument("--reps", type=cli_number(int, 1, 10**6), default=7)
    a = ap.parse_args(argv)
    reps, units = (1, 20_000) if a.quick else (max(1, a.reps), UNITS)
    try:
        ref = start(lcores=1)
    except DpdkMissing as e:
        print(e, file=sys.stderr)
        return 2
    except DpdkFailed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    with ref:
        print(json.dumps(ref.info))
        hz = ref.info["tsc_hz"]
        drop = int(DROP_US * 1e-6 * hz)
        done = set()
        for c in CASES:
            for n in BURSTS:
                if c.dpdk is None or not c.fits(n) or (c.dpdk, n) in done:
                    continue
                done.add((c.dpdk, n))
                iters = loop_iters(c.dpdk, n, units)
                if c.dpdk in LAYOUTS:
                    chunk, dcyc = 1, drop
                else:       # calibrated as pktbuf calibrates its own loops, on DPDK's loop
                    cal = ref.core(c.dpdk, n, 8, 1, 1 << 62, 5)
                    chunk, dcyc = chunking(min(cal["samples_cyc"]) * n, hz)
                print(json.dumps(ref.core(c.dpdk, n, max(1, iters // chunk), chunk, dcyc, reps)),
                      flush=True)
            ref.check()
    return 0


if __name__ == "__main__":   # pragma: no cover
    sys.exit(main())
