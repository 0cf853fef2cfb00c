"""``pktbuf bench pagepool`` runs and prints its table (figures are not asserted: no timing in tests)."""
from __future__ import annotations

from pktbuf.bench import pagepool as B


def test_bench_pagepool_quick(capsys):
    assert B.main(["--quick", "--workloads", "release,direct"]) == 0
    out = capsys.readouterr().out
    assert "bulk/single" in out and "release" in out and "direct" in out
    assert "non-recycling (release) gain" in out


def test_bench_pagepool_rejects_unknown_workload(capsys):
    import pytest
    with pytest.raises(SystemExit):
        B.main(["--workloads", "bogus"])
