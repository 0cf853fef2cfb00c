"""The counters an app loop fills, and the JSON line its process prints.

A loop gets an ``int64[CNT_WORDS]`` array and adds to it; the process prints one JSON line of
the counters after each timed step (:func:`run_timed`), which the orchestrator (``pktbuf
demo``, the memif benchmark) reads from the child's stdout.
"""
from __future__ import annotations

import json
import time

import numpy as np

CNT_RX = 0          # packets received
CNT_TX = 1          # packets the Tx ring took
CNT_BYTES = 2       # bytes received
CNT_DROPS = 3       # packets the Tx ring did not take (freed)
CNT_BAD = 4         # received frames that failed the app's check (wrong MACs)
CNT_WORDS = 8


def counters() -> np.ndarray:
    """A zeroed counter array."""
    return np.zeros(CNT_WORDS, np.int64)


def emit(role: str, cnt: np.ndarray, t0: float, final: bool = False, **extra) -> None:
    """Print one JSON line: the role, seconds since ``t0``, and the counters."""
    rec = {"role": role, "t": round(time.monotonic() - t0, 6), "final": final,
           "rx": int(cnt[CNT_RX]), "tx": int(cnt[CNT_TX]), "bytes": int(cnt[CNT_BYTES]),
           "drops": int(cnt[CNT_DROPS]), "bad": int(cnt[CNT_BAD])}
    rec.update(extra)
    print(json.dumps(rec), flush=True)


def run_timed(role: str, seconds: float, step, interval: float = 0.5) -> np.ndarray:
    """Call ``step(cnt, deadline_ns)`` -- a jitted loop that runs until ``deadline_ns``
    (``time.monotonic_ns()`` clock) -- in slices of ``interval`` seconds for ``seconds``,
    printing the counters after each slice and a final line."""
    cnt = counters()
    t0 = time.monotonic()
    end = t0 + seconds
    while True:
        now = time.monotonic()
        if now >= end:
            break
        step(cnt, time.monotonic_ns() + int(min(interval, end - now) * 1e9))
        emit(role, cnt, t0)
    emit(role, cnt, t0, final=True)
    return cnt
