"""``pktbuf bench heap`` runs and prints its table (figures are not asserted: no timing in tests)."""
from __future__ import annotations

import pytest

from pktbuf.bench import heap as B


def test_bench_heap_quick(capsys):
    assert B.main(["--quick", "--sizes", "64,65536"]) == 0
    out = capsys.readouterr().out
    assert "outside / inside" in out and "nocache / inside" in out and "1 MiB pair" in out
    assert out.count(" outside ") >= 4 and out.count(" nocache ") >= 4
    assert out.count(" inside ") >= 4


def test_bench_heap_lock_profile(capsys):
    assert B.main(["--quick", "--sizes", "1024", "--locks"]) == 0
    out = capsys.readouterr().out
    assert "handoff/s" in out and "hold" in out
    # one profile line per heap kind and thread count
    assert sum(1 for line in out.splitlines() if line.split()[:2] == ["1024", "2"]) >= 6


def test_bench_heap_rejects_bad_sizes():
    with pytest.raises(SystemExit):
        B.main(["--sizes", "0"])
