"""examples/flow_counter.py against the model in naive.py: counters, per-flow packets and
bytes, every frame forwarded unchanged, every mbuf back in the pool."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .frames import all_back, example, frame, make_ports, run, splits
from .naive import flow_model

flow_counter = example("flow_counter")


@pytest.fixture(scope="module")
def wire():
    pool, ports = make_ports()
    yield pool, ports
    ports.close()


@given(data=st.data(), frames=st.lists(frame(), min_size=1, max_size=40),
       entries=st.sampled_from([8, 1024]))
def test_flow_counter_matches_model(wire, data, frames, entries):
    pool, ports = wire
    stg = flow_counter.stage(entries)
    out, r = run(stg, frames, data.draw(splits(len(frames))), pool, ports)
    counters, flows = flow_model(frames, entries)   # 8 entries: one bucket, room for 8 keys
    assert out == frames                            # counted, not changed, all forwarded
    assert r.counters() == counters
    assert flow_counter.flows(stg) == {k: tuple(v) for k, v in flows.items()}
    assert all_back(pool)


def test_top_flows_orders_and_decodes(wire):
    import dpkt

    from .frames import ether
    pool, ports = wire
    mk = lambda sport, n: ether(0x0800, bytes(dpkt.ip.IP(
        src=bytes([10, 0, 0, 1]), dst=bytes([192, 0, 2, 1]), p=17,
        data=dpkt.udp.UDP(sport=sport, dport=53, data=bytes(n)))))
    frames = [mk(1, 10)] * 5 + [mk(2, 500)] * 2 + [mk(3, 0)]
    stg = flow_counter.stage()
    run(stg, frames, [[]] * len(frames), pool, ports)
    top = flow_counter.top_flows(stg, 2)
    assert [(k[2], p, b) for k, p, b in top] == [(2, 2, 2 * len(frames[5])),
                                                 (1, 5, 5 * len(frames[0]))]
    assert str(top[0][0][1]) == "10.0.0.1" and top[0][0][0] == 17 and top[0][0][4] == 53
    assert [(k[2], p) for k, p, _ in flow_counter.top_flows(stg, 1, by="packets")] == [(1, 5)]
    assert all_back(pool)
