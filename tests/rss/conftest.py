"""DPDK's own Toeplitz functions as an oracle: tests/rss/thash_vectors.c, built once per session
against the installed DPDK headers (pkg-config libdpdk).  Without DPDK the tests that need it
skip -- and fail under CI, whose job installs it."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.bench.conftest import dpdk_or_skip

SOURCE = Path(__file__).with_name("thash_vectors.c")


class Oracle:
    """Runs the vector program over a batch of request lines."""

    def __init__(self, exe: Path):
        self.exe = exe

    def run(self, lines: list[str]) -> list[tuple[int, int]]:
        r = subprocess.run([str(self.exe)], input="".join(f"{x}\n" for x in lines),
                           capture_output=True, text=True, timeout=60, check=True)
        out = r.stdout.splitlines()
        assert len(out) == len(lines), r.stdout
        assert "error" not in out, [ln for ln, o in zip(lines, out) if o == "error"]
        return [tuple(int(x, 16) for x in o.split()) for o in out]

    def raw(self, key: bytes, tuples: list[bytes]) -> list[tuple[int, int]]:
        """(rte_softrss, rte_softrss_be) of each tuple (network-order bytes)."""
        return self.run([f"raw {key.hex()} {t.hex()}" for t in tuples])

    def v4(self, key: bytes, flows) -> list[tuple[int, int]]:
        """(L3 hash, L4 hash) of each (src, dst, sport, dport), src/dst 4 bytes."""
        return self.run([f"v4 {key.hex()} {s.hex()} {d.hex()} {sp:x} {dp:x}"
                         for s, d, sp, dp in flows])

    def v6(self, key: bytes, flows) -> list[tuple[int, int]]:
        """(L3 hash, L4 hash) of each (src, dst, sport, dport), src/dst 16 bytes."""
        return self.run([f"v6 {key.hex()} {s.hex()} {d.hex()} {sp:x} {dp:x}"
                         for s, d, sp, dp in flows])


@pytest.fixture(scope="session")
def dpdk_thash(tmp_path_factory) -> Oracle:
    tc = dpdk_or_skip()
    exe = tmp_path_factory.mktemp("thash") / "thash_vectors"
    cmd = [tc.cc, "-O2", "-march=native", "-Wall", "-Wextra", *tc.cflags, "-o", str(exe),
           str(SOURCE)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:     # header-only code; link DPDK's libraries if the headers want them
        r = subprocess.run(cmd + tc.libs, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert os.access(exe, os.X_OK)
    return Oracle(exe)
