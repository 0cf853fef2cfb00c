"""``pktbuf bench heap`` runs and prints its table (figures are not asserted: no timing in tests)."""
from __future__ import annotations

import pytest

from pktbuf.bench import heap as B


def test_bench_heap_quick(capsys):
    assert B.main(["--quick", "--sizes", "64,65536"]) == 0
    out = capsys.readouterr().out
    assert "zero outside / inside the lock" in out and "1 MiB pair" in out
    assert out.count("outside") >= 4


def test_bench_heap_rejects_bad_sizes():
    with pytest.raises(SystemExit):
        B.main(["--sizes", "0"])
