"""memif's general and zero-copy loops are called through addresses a device writes into its
queues (``pktbuf.drivers.memif.variants``).

A process whose devices copy compiles or loads none of the zero-copy loops, whatever the size
relation; a zero-copy device loads them when it is created, and its packets arrive
byte-exact.  A queue whose path has no address moves nothing and goes down with a reason.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np

from pktbuf.drivers.memif import validate as V
from pktbuf.drivers.memif.datapath import memif_rx_burst, memif_tx_burst
from pktbuf.drivers.memif.queue import (K_SERVER_RX, K_SERVER_TX, P_GENERAL, Q_FN_GENERAL, QS_ERR,
                                        QS_UP)
from pktbuf.drivers.memif.variants import BURST_PATHS, burst_address, queue_paths
from pktbuf.lcore import LCORE_ANY

from .test_validate import _queue, regions  # noqa: F401  (regions: the peer's memory, a fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import json
    import sys
    sys.path.insert(0, sys.argv[1])
    import pktbuf
    from pktbuf import Memif
    from pktbuf.drivers.memif.variants import BURST_PATHS
    from tests.memif.helpers import exchange, payloads, sock_name

    def loaded():
        return sorted(n for n, d in BURST_PATHS.items() if d.overloads)

    pool = pktbuf.PktmbufPool(4096, name="variants-child")
    out = {}
    for tag, kw in (("eq", {}), ("gt", {"buffer_size": 4096}), ("zc", {"zero_copy": True})):
        name = sock_name("var")
        s = Memif.server(name, pool=pool, **{k: v for k, v in kw.items() if k != "zero_copy"})
        c = Memif.client(name, pool=pool, ring_size_log2=6, **kw)
        assert c.wait_connected(10) and s.wait_connected(10)
        pays = payloads([60, 1500, 3000, 9000], seed=5)
        ok = True
        for tx, rx in ((c, s), (s, c)):
            got, sent = exchange(tx, rx, pool, pays, [None, None, 1000, 2000])
            ok = ok and sent == len(pays) and [g[0] for g in got] == pays
        c.close()
        s.close()
        out[tag] = [ok, loaded()]
    out["leaked"] = pool.n - pool.avail_count
    pool.close()
    print(json.dumps(out))
""")


def test_a_process_loads_only_the_loops_its_devices_run():
    p = subprocess.run([sys.executable, "-c", CHILD, ROOT], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    import json
    out = json.loads(p.stdout.strip().splitlines()[-1])
    # copy mode, either relation: the general loops only (every copy queue may fall back to
    # them; the fast loops are the bursts' own)
    assert out["eq"] == [True, ["rx_general", "tx_general"]]
    assert out["gt"] == [True, ["rx_general", "tx_general"]]
    # a zero-copy client: its zero-copy loops (the server still copies)
    assert out["zc"] == [True, ["rx_general", "rx_zerocopy", "tx_general", "tx_zerocopy"]]
    assert out["leaked"] == 0


def test_queue_paths_follow_the_mode():
    assert queue_paths(True, False) == (burst_address("rx_general"), 0)
    assert queue_paths(False, False) == (burst_address("tx_general"), 0)
    assert queue_paths(True, True) == (0, burst_address("rx_zerocopy"))
    assert queue_paths(False, True) == (0, burst_address("tx_zerocopy"))
    assert len({burst_address(n) for n in BURST_PATHS}) == len(BURST_PATHS)


def test_a_path_without_an_address_takes_the_queue_down(pool, regions):  # noqa: F811
    dom = pool.domain.state
    for kind in (K_SERVER_RX, K_SERVER_TX):
        q = _queue(pool, regions, kind, P_GENERAL)
        assert q.cfg[Q_FN_GENERAL] != 0
        q.cfg[Q_FN_GENERAL] = 0
        before = pool.avail_count
        tx = kind == K_SERVER_TX
        hs = np.asarray(pool.alloc_bulk(4), dtype=np.int32) if tx else np.zeros(4, np.int32)
        burst = memif_tx_burst if tx else memif_rx_burst
        assert burst(dom, q, LCORE_ANY, hs, 4) == 0
        assert q.st[QS_UP] == 0
        assert q.st[QS_ERR] == V.V_NO_PATH
        assert V.reason(q.st[QS_ERR]) == "Burst path not loaded in this process"
        if tx:
            pool.free_bulk(hs)                   # still ours: nothing was sent
        assert pool.avail_count == before
