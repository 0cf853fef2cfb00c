"""Routes added from Python while pktbuf's l3fwd stage forwards in another process over a
shared table (pktbuf.bench.lpm_update): every packet leaves by a route in force while it was
in flight, none is lost; and the check itself is the model's."""
from __future__ import annotations

import numpy as np

from pktbuf.bench import lpm_update as U
from pktbuf.net.lpm.naive import NaiveLpm


def test_histories_are_the_naive_models():
    ips, depths, ports = U.make_routes(3000, 4)
    addrs = U.make_addrs(ips, depths, 300, 4)
    off, hseq, hport = U.histories(ips, depths, ports, addrs)
    nv = NaiveLpm(1 << 14, 1 << 12)
    nv.add(U.NET, 8, U.BASE_PORT)
    checkpoints = {0, 1, 17, 500, 1999, 3000}
    for k in range(ips.size + 1):
        if k in checkpoints:
            for i, a in enumerate(addrs.tolist()):
                # the history's entry in force at progress k
                j = int(off[i])
                while j + 1 < off[i + 1] and hseq[j + 1] <= k:
                    j += 1
                assert hport[j] == nv.lookup(a), (k, i)
        if k < ips.size:
            nv.add(int(ips[k]), int(depths[k]), int(ports[k]))


def test_the_port_check_can_fail():
    # one address: port 1 from 0, port 2 from progress 5, port 3 from 9
    off = np.array([0, 3], np.int64)
    hseq = np.array([0, 5, 9], np.int64)
    hport = np.array([1, 2, 3], np.int64)
    assert U.port_ok(off, hseq, hport, 0, 0, 3, 1)
    assert U.port_ok(off, hseq, hport, 0, 0, 4, 2)        # add 5 may be under way
    assert not U.port_ok(off, hseq, hport, 0, 0, 3, 2)    # not before add 5 started
    assert not U.port_ok(off, hseq, hport, 0, 5, 8, 1)    # the old route after add 5
    assert U.port_ok(off, hseq, hport, 0, 6, 20, 3)
    assert not U.port_ok(off, hseq, hport, 0, 6, 20, 0)


def test_adds_while_forwarding_leave_every_packet_on_a_route_in_force():
    r = U.run(adds=20_000, batch=128, n_addrs=2048, pkts=256)
    assert r["errors"] == 0, r["first_errors"]
    assert r["lost"] == 0 and r["tx_dropped"] == 0
    assert r["progress"] == 20_000 and r["rules"] == 20_001
    assert r["checked_during_adds"] > 0 and r["changed_port"] > 0
