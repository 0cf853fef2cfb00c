"""The pcap benchmark runs and reports what it says (its figures are not asserted)."""
from pktbuf.bench.pcap import compare


def test_compare_runs(warm, tmp_path):
    r = compare(n=2000, size=64, repeat=1, dir=str(tmp_path))
    for k in ("dpkt_write", "dpkt_read", "pktbuf_write", "pktbuf_read"):
        assert r[k] > 0
    assert r["write_ratio"] == r["pktbuf_write"] / r["dpkt_write"]
    assert r["read_ratio"] == r["pktbuf_read"] / r["dpkt_read"]
    assert list(tmp_path.iterdir()) == []
