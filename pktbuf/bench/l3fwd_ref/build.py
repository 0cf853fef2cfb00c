"""Build and run DPDK 22.11's l3fwd example as the reference for ``pktbuf l3fwd``.

The sources are the ones Debian's ``dpdk-doc`` installs (``/usr/share/dpdk/examples/l3fwd``
and ``examples/common``; override with ``PKTBUF_DPDK_EXAMPLES``).  :func:`build` copies both
into the user's cache directory (``$XDG_CACHE_HOME/pktbuf`` or ``~/.cache/pktbuf``), applies
``offloads.patch`` and runs the example's own ``make`` against ``pkg-config libdpdk`` -- once
per hash of the sources, the patch and the DPDK version; concurrent callers wait on a file
lock and then use the first one's build.

The patch changes one line: ``port_conf.rxmode.offloads`` (``main.c``) asks for Rx checksum
offload, which net_pcap refuses at configure time; it becomes 0.  l3fwd never reads the
checksum flags of ``ol_flags``, so forwarding is unchanged.

:func:`run` starts the binary over net_pcap ports, waits until its output files have stopped
growing (or hold the number of frames the caller expects), stops it with SIGINT as a user's
Ctrl-C does and returns its exit status and output.  DPDK 22.11 sometimes hangs in EAL cleanup
after closing its ports (the output files are complete by then): such a run is killed and, if
its log shows every port closed, accepted; otherwise it is retried, a bounded number of times.

``build(cycles=True)`` applies ``cycles.patch`` as well, for ``pktbuf bench l3fwd``: DPDK's
l3fwd prints no cycle counts, so the patch adds, per lcore, the TSC cycles of every loop
iteration that received packets (``rte_rdtsc`` before ``rte_eth_rx_burst`` to after the burst's
``l3fwd_*_send_packets``, as testpmd's ``--record-core-cycles`` counts them) and the packets
those iterations received, plus the cycles of every Tx drain that sent something (the
``BURST_TX_DRAIN_US`` flush of the per-port Tx buffers: the Tx work of the packets those
iterations only buffered), in the LPM and EM main loops (``lpm_main_loop``, ``em_main_loop``),
and prints their sums, ``L3FWD: busy cycles=C packets=N tsc_hz=H``, on SIGUSR1 (the sums so
far, written with ``write(2)`` from the handler) and once the lcores have stopped (SIGINT /
SIGTERM), before the ports close.  Forwarding is unchanged; the two patched builds are cached
apart.

``python -m pktbuf.bench.l3fwd_ref.build`` builds it and prints the binary's path.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..dpdk_ref import DpdkFailed, DpdkMissing, cache_dir, toolchain

PATCH = Path(__file__).with_name("offloads.patch")
CYCLES_PATCH = Path(__file__).with_name("cycles.patch")
EXAMPLES = "/usr/share/dpdk/examples"
PCAP_HDR = 24


def examples_dir(env=None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("PKTBUF_DPDK_EXAMPLES") or EXAMPLES)


def _tree_digest(root: Path) -> bytes:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.digest()


def build(env=None, *, cycles: bool = False) -> Path:
    """The patched ``dpdk-l3fwd`` binary, built on first use; :class:`DpdkMissing` when DPDK,
    a compiler, ``make``, ``patch`` or the example sources are absent, :class:`DpdkFailed`
    when the build fails.  ``cycles``: with ``cycles.patch`` too (busy-cycle counts)."""
    env = dict(os.environ if env is None else env)
    tc = toolchain(env)
    ex = examples_dir(env)
    src, common = ex / "l3fwd", ex / "common"
    if not (src / "main.c").is_file() or not common.is_dir():
        raise DpdkMissing(f"DPDK's l3fwd sources not found in {ex} (install dpdk-doc: "
                          "apt-get install dpdk-doc)")
    for tool in ("make", "patch"):
        if shutil.which(tool, path=env.get("PATH")) is None:
            raise DpdkMissing(f"DPDK's l3fwd not built: no {tool} on PATH")
    patches = [PATCH, CYCLES_PATCH] if cycles else [PATCH]
    key = hashlib.sha256(_tree_digest(src) + _tree_digest(common)
                         + b"".join(p.read_bytes() for p in patches)
                         + tc.version.encode() + tc.cc.encode()).hexdigest()[:16]
    base = cache_dir(env)
    base.mkdir(parents=True, exist_ok=True)
    out = base / f"l3fwd-{tc.version}-{key}"
    exe = out / "l3fwd" / "build" / "l3fwd-shared"
    if exe.is_file() and os.access(exe, os.X_OK):
        return exe
    lock = os.open(str(base / f"l3fwd-{key}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)            # one build; the others wait for it
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe
        tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=base))
        try:
            shutil.copytree(src, tmp / "l3fwd")
            shutil.copytree(common, tmp / "common")
            for pf in patches:
                r = subprocess.run(["patch", "-p1", "--forward", "-i", str(pf)],
                                   cwd=tmp / "l3fwd", capture_output=True, text=True,
                                   timeout=60)
                if r.returncode != 0:
                    raise DpdkFailed(f"{pf.name} does not apply to {src}:\n"
                                     f"{r.stdout}{r.stderr}")
            menv = dict(env)
            menv.setdefault("CC", tc.cc)
            r = subprocess.run(["make", "-s"], cwd=tmp / "l3fwd", capture_output=True,
                               text=True, timeout=900, env=menv)
            if r.returncode != 0:
                tail = "\n".join(r.stderr.strip().splitlines()[-15:])
                raise DpdkFailed(f"building DPDK's l3fwd failed:\n{tail}")
            shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        os.close(lock)
    return exe


@dataclass
class RefRun:
    returncode: int
    stdout: str
    stderr: str
    killed: bool          # it hung in EAL cleanup and was killed after closing its ports


def pcap_frames(path) -> int:
    """Frames in a pcap file so far (a partly written last record is not counted)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return 0
    n, off = 0, PCAP_HDR
    while off + 16 <= len(data):
        incl = int.from_bytes(data[off + 8:off + 12], "little")
        if off + 16 + incl > len(data):
            break
        off += 16 + incl
        n += 1
    return n


def _sizes(paths) -> tuple:
    return tuple(os.path.getsize(p) if os.path.exists(p) else -1 for p in paths)


def _run_once(cmd, outputs, expect_frames, settle_s, timeout_s, stop_grace_s, nports):
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        p = subprocess.Popen(cmd, stdout=so, stderr=se, start_new_session=True)
        t_end = time.monotonic() + timeout_s
        last, t_last = None, time.monotonic()
        started = False
        while time.monotonic() < t_end:
            if p.poll() is not None:
                break
            time.sleep(0.05)
            if not started:
                so.flush()
                se.flush()
                so.seek(0)
                se.seek(0)
                started = "entering main loop" in so.read() + se.read()   # RTE_LOG: stderr
                t_last = time.monotonic()
                continue
            if expect_frames is not None and sum(pcap_frames(o) for o in outputs) \
                    >= expect_frames:
                time.sleep(0.05)
                break
            s = _sizes(outputs)
            if s != last:
                last, t_last = s, time.monotonic()
            elif time.monotonic() - t_last >= settle_s:
                break
        killed = False
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(stop_grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                killed = True
        so.seek(0)
        se.seek(0)
        out, err = so.read(), se.read()
    if killed and out.count("Done") < nports:
        return None                          # hung before closing every port: retry
    return RefRun(0 if killed else p.returncode, out, err, killed)


def run(args: list, outputs: list, *, expect_frames: int | None = None, nports: int = 2,
        settle_s: float = 1.0, timeout_s: float = 30.0, stop_grace_s: float = 5.0,
        retries: int = 3, env=None, prefix: str | None = None, mem_mb: int = 512,
        cycles: bool = False) -> RefRun:
    """Run the reference: ``args`` are EAL's ``--vdev`` arguments, ``--`` and l3fwd's own.
    EAL runs without hugepages or PCI and shares nothing on disk, with ``mem_mb`` of memory
    (EM mode's two 4 M-entry hash tables need more than the 512 MB that suit LPM).
    ``cycles``: the build with ``cycles.patch``."""
    exe = build(env, cycles=cycles)
    prefix = prefix or f"pbl3-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    eal = ["--no-huge", "-m", str(mem_mb), "--no-pci", "--no-shconf", "--no-telemetry",
           f"--file-prefix={prefix}", "-l", "0", "--log-level=lib.eal:warning"]
    cmd = [str(exe), *eal, *args]
    for _ in range(retries):
        r = _run_once(cmd, outputs, expect_frames, settle_s, timeout_s, stop_grace_s, nports)
        if r is not None:
            return r
    raise DpdkFailed(f"DPDK's l3fwd hung {retries} times: {' '.join(cmd)}")


if __name__ == "__main__":
    try:
        print(build(cycles="--cycles" in sys.argv[1:]))
    except (DpdkMissing, DpdkFailed) as e:
        print(e, file=sys.stderr)
        sys.exit(1)
