"""python -m pktbuf.bench.vhost_cpu: the one-thread pktbuf virtio_user -> pktbuf vhost loop
moves every packet it sends, leaks no mbuf, and reports a per-packet CPU time."""
import pytest

from pktbuf.bench.vhost_cpu import main, run


@pytest.mark.parametrize("size,packed", [(64, False), (1500, True)])
def test_every_packet_arrives_and_every_mbuf_comes_back(size, packed):
    r = run(size=size, packed=packed, rounds=2, bursts=300)
    assert r["sent"] >= 2 * 300 * 32 * 0.5 and r["received"] == r["sent"]
    assert r["in_use_after"] == 0
    assert len(r["samples"]) == 2 and 0 < r["min"] <= r["ns_per_packet"]


def test_a_size_past_the_data_room_is_refused():
    with pytest.raises(SystemExit):
        main(["--size", "70000"])
    with pytest.raises(ValueError):
        run(size=9000, rounds=1, bursts=1)
