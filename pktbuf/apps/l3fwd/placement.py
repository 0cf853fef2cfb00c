"""Where ``pktbuf l3fwd``'s threads run: EAL's ``-l CORELIST`` / ``-c COREMASK``.

DPDK's EAL runs lcore N on CPU N for every N of ``-l`` / ``-c`` and puts its control threads
(the interrupt thread, which serves net_memif's control socket, among them) on the CPUs of the
process's affinity that no lcore uses -- the lcores' CPUs only when none is left (DPDK 22.11
``lib/eal/common/eal_common_options.c``, ``compute_ctrl_threads_cpuset``).  A busy-polling
lcore is then never interrupted by its own process's housekeeping.

pktbuf does the same when one of the two options is given: the calling thread takes the
control CPU set before the ports open (:func:`control_cpus`), so every thread a port starts
then -- memif's control loop, which wakes every few milliseconds -- inherits it; each lcore's
forwarding thread is pinned to its CPU when it starts forwarding (:func:`pin`).  Without
either option nothing is pinned (the threads keep the process's affinity, as before).
``--lcores`` is accepted and ignored.

:func:`parse_corelist` and :func:`parse_coremask` read the option values as EAL does
(``eal_parse_corelist``: numbers and ranges ``a-b`` separated by commas; ``eal_parse_coremask``:
hex, optional ``0x``); :class:`~pktbuf.apps.l3fwd.options.UsageError` on a bad value.
"""
from __future__ import annotations

import os

MAX_CPU = 128        # RTE_MAX_LCORE: an lcore id, and so with -l / -c its CPU, is below it


def parse_corelist(s: str) -> list[int]:
    """``-l``: ``"1"``, ``"0-3"``, ``"0,2-3"`` -> sorted CPU ids; ValueError when malformed."""
    out = set()
    for part in s.replace(" ", "").split(","):
        a, dash, b = part.partition("-")
        if not a.isdigit() or (dash and not b.isdigit()):
            raise ValueError(f"invalid core list syntax: {s!r}")
        lo, hi = int(a), int(b) if dash else int(a)
        if lo > hi or hi >= MAX_CPU:
            raise ValueError(f"invalid core list: {s!r}")
        out.update(range(lo, hi + 1))
    return sorted(out)


def parse_coremask(s: str) -> list[int]:
    """``-c``: hex mask (``0x`` optional), bit N = CPU N -> sorted CPU ids."""
    h = s.strip()
    if h[:2].lower() == "0x":
        h = h[2:]
    if not h or any(c not in "0123456789abcdefABCDEF" for c in h):
        raise ValueError(f"invalid coremask syntax: {s!r}")
    v = int(h, 16)
    cpus = [i for i in range(v.bit_length()) if v >> i & 1]
    if not cpus or cpus[-1] >= MAX_CPU:
        raise ValueError(f"invalid coremask: {s!r}")
    return cpus


def control_cpus(lcore_cpus, allowed) -> set:
    """The control threads' CPUs: ``allowed`` minus the lcores' CPUs, or the first lcore's
    CPU when that leaves none (DPDK: the main lcore's)."""
    rest = set(allowed) - set(lcore_cpus)
    return rest or {min(lcore_cpus)}


def unavailable(lcore_cpus, allowed) -> list[int]:
    """The CPUs of ``lcore_cpus`` this process may not run on."""
    return [c for c in lcore_cpus if c not in allowed]


def pin(cpu: int) -> None:
    """Run the calling thread on ``cpu`` only."""
    os.sched_setaffinity(0, {cpu})
