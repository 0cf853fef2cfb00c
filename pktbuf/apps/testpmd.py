"""Drive a ``dpdk-testpmd`` memif peer (DPDK 22.11) from Python: interop tests and benchmarks.

Works without hugepages: EAL ``--no-huge -m 256 --no-pci --file-prefix=<unique>`` (no
hugepages, no PCI scan, a runtime directory of our own), testpmd ``--no-mlockall`` (no locking
of 256 MB), ``--no-flush-rx`` (testpmd would otherwise drain, and lose, what a peer sends right
after connecting), ``--total-num-mbufs=8192``, interactive mode driven through a pipe on stdin.
DPDK's zero-copy client needs ``--single-file-segments``.  Every process runs under ``timeout``
(so it dies even if we do) and is stopped by its own PID.  Always stop forwarding before either
side disconnects: DPDK 22.11 can crash when its peer vanishes mid-traffic (docs/memif.md).

EAL leaves a runtime directory per file prefix (``/var/run/dpdk/<prefix>`` as root, else under
``$XDG_RUNTIME_DIR/dpdk`` or ``/tmp/dpdk``) even after a clean exit, and EAL's
``--in-memory``, which would avoid it, refuses to run with ``--no-huge`` in 22.11 (it implies
legacy memory).  So :meth:`Testpmd.close` removes the directory of its own prefix once the
process has exited -- also when EAL failed to start or the process was killed.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

TESTPMD = os.environ.get("PKTBUF_TESTPMD", "dpdk-testpmd")
PREFIX = "pktbuf"       # EAL file prefixes: pktbuf<our pid>_<n>
_seq = 0


def available() -> bool:
    """True if dpdk-testpmd is installed."""
    return shutil.which(TESTPMD) is not None


def runtime_base() -> str:
    """The directory under which EAL puts each file prefix's runtime directory."""
    if os.geteuid() == 0:
        return "/var/run/dpdk"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return os.path.join(xdg, "dpdk") if xdg else "/tmp/dpdk"


def own_runtime_dirs() -> list:
    """The runtime directories of this process's testpmds (``pktbuf<pid>_<n>``) that exist."""
    base = runtime_base()
    mine = f"{PREFIX}{os.getpid()}_"
    try:
        return sorted(os.path.join(base, d) for d in os.listdir(base) if d.startswith(mine))
    except OSError:
        return []


class Testpmd:
    """One interactive testpmd: a single memif port, or the ports ``vdevs`` gives.

    ``role``: "server" or "client"; ``vdevs``: full ``--vdev`` strings (``["net_af_packet0,
    iface=veth0"]``) used in place of the memif port (``role`` and ``socket`` are then
    ignored); ``fwd``: testpmd forwarding mode (io, macswap, rxonly,
    txonly...); ``lcores``: EAL core option (e.g. ``["-l", "0-1"]`` or
    ``["--lcores=0@1,1@0"]``); ``vdev_extra``: extra memif devargs (``"zero-copy=yes"``,
    ``"bsize=1024"``...); ``app_extra``: extra testpmd arguments.  ``bpffs``: mount the BPF
    filesystem at ``/sys/fs/bpf`` in the namespace's mount namespace first (``net_af_xdp``).
    """

    def __init__(self, role: str = "server", socket: str = "", *, abstract: bool = True,
                 id: int = 0, secret: str | None = None, fwd: str = "io", lcores=None,
                 vdev_extra: str = "", vdevs=None, eal_extra=(), app_extra=(),
                 lifetime: int = 120, mem: int = 256, mbufs: int = 8192,
                 netns: str | None = None, bpffs: bool = False):
        global _seq
        _seq += 1
        self.role = role
        self.socket = socket
        self.abstract = abstract
        self.workdir = tempfile.mkdtemp(prefix="pktbuf-testpmd-")
        self.log_path = os.path.join(self.workdir, "testpmd.log")
        vdev = f"net_memif0,role={role},id={id},socket={socket},socket-abstract={'yes' if abstract else 'no'}"
        if secret:
            vdev += f",secret={secret}"
        if vdev_extra:
            vdev += "," + vdev_extra
        vdev_args = [f"--vdev={v}" for v in (vdevs if vdevs else [vdev])]
        prefix = f"{PREFIX}{os.getpid()}_{_seq}"
        self.prefix = prefix
        self.runtime_dir = os.path.join(runtime_base(), prefix)
        # net_af_xdp (libxdp) wants the BPF filesystem; `ip netns exec` runs in a mount
        # namespace of its own, so mounting it there touches nothing outside
        mount = (["sh", "-c", "mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf; "
                  'exec "$@"', "sh"] if bpffs and netns else [])
        self.argv = ((["ip", "netns", "exec", netns] if netns else []) + mount
                     + ["timeout", "--kill-after=5", str(lifetime), "stdbuf", "-oL", TESTPMD]
                     + list(lcores or ["-l", "0-1"])
                     + ["--no-huge", "-m", str(mem), "--no-pci", f"--file-prefix={prefix}",
                        "--log-level=pmd.net.memif:info"] + vdev_args + list(eal_extra)
                     + ["--", "-i", "--no-mlockall", "--no-flush-rx",
                        f"--total-num-mbufs={mbufs}", f"--forward-mode={fwd}"] + list(app_extra))
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._pos = 0

    # -- process ---------------------------------------------------------------------------
    def start(self) -> "Testpmd":
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cmd(self, line: str) -> None:
        if not self.alive():
            return
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_log(self, pattern: str, timeout: float = 30.0, *, since: int = 0) -> bool:
        """Wait for a regex in the log (after byte offset ``since``); False on timeout/exit."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if rx.search(self.log()[since:]):
                return True
            if not self.alive():
                return bool(rx.search(self.log()[since:]))
            time.sleep(0.05)
        return False

    def wait_listening(self, timeout: float = 30.0) -> bool:
        """Server: wait until its socket is listening (read from /proc/net/unix, no probe)."""
        want = ("@" + self.socket) if self.abstract else self.socket
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.alive():
            try:
                with open("/proc/net/unix") as f:
                    for line in f:
                        parts = line.split()
                        # flags 00010000 = __SO_ACCEPTCON (listening)
                        if len(parts) >= 8 and parts[-1] == want and parts[3] == "00010000":
                            return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def port_stats(self, timeout: float = 5.0, port: int = 0) -> dict:
        """``show port stats <port>`` parsed: rx/tx packets, bytes, errors, pps."""
        mark = len(self.log())
        self.cmd(f"show port stats {port}")
        if not self.wait_log(r"Tx-pps:\s+\d+", timeout, since=mark):
            return {}
        text = self.log()[mark:]
        out = {}
        for key, rx in (("rx_packets", r"RX-packets:\s+(\d+)"), ("rx_missed", r"RX-missed:\s+(\d+)"),
                        ("rx_bytes", r"RX-bytes:\s+(\d+)"), ("tx_packets", r"TX-packets:\s+(\d+)"),
                        ("tx_errors", r"TX-errors:\s+(\d+)"), ("tx_bytes", r"TX-bytes:\s+(\d+)"),
                        ("rx_pps", r"Rx-pps:\s+(\d+)"), ("tx_pps", r"Tx-pps:\s+(\d+)")):
            m = re.search(rx, text)
            if m:
                out[key] = int(m.group(1))
        return out

    def link_up(self) -> bool:
        return bool(re.search(r"memif_connect\(\): Connected", self.log()))

    def stop_forwarding(self) -> None:
        mark = len(self.log())
        self.cmd("stop")
        self.wait_log(r"Done\.|Packet forwarding not started", 10, since=mark)

    def close(self, timeout: float = 15.0) -> int | None:
        """Stop forwarding, quit, and make sure the process is gone (by PID only)."""
        if self.proc is None:
            return None
        if self.alive():
            self.cmd("stop")
            self.cmd("quit")
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if self.alive():
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)   # our own session: timeout + testpmd
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(5)
                    break
                except subprocess.TimeoutExpired:
                    continue
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if self._log is not None:
            self._log.close()
        self._remove_runtime_dir()
        return self.proc.returncode

    def _remove_runtime_dir(self) -> None:
        """EAL's runtime directory of our prefix, once no process of ours can use it."""
        if self.proc is not None and self.proc.poll() is None:
            return
        shutil.rmtree(self.runtime_dir, ignore_errors=True)

    def cleanup(self) -> None:
        self.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()
