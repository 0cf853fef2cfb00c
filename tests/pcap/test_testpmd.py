"""Interop with DPDK 22.11's own pcap PMD, ``net_pcap`` in ``dpdk-testpmd`` (io forwarding,
``--no-flush-rx``): it replays the file we write and writes what it forwards to a file we then
read -- both directions, payloads compared byte for byte (timestamps are testpmd's clock).
In CI these tests must run: ``.ci/run`` installs DPDK; without it they fail there."""
import os
import time

import numpy as np
import pytest

from pktbuf import PcapPort
from pktbuf.apps import testpmd as T

from .helpers import frames, make_packet, read_port

if not T.available():
    if os.environ.get("CI"):
        pytest.fail("dpdk-testpmd is not installed (apt-get install dpdk)", pytrace=False)
    pytest.skip("dpdk-testpmd is not installed", allow_module_level=True)

SIZES = [60, 64, 65, 128, 0, 512, 1000, 1500, 1514, 2048, 3000, 9000] * 20


def _through_testpmd(src, dst, n, timeout=30):
    tp = T.Testpmd(vdevs=[f"net_pcap0,rx_pcap={src},tx_pcap={dst}"], fwd="io")
    try:
        tp.start()
        assert tp.wait_log(r"testpmd> ", 30), tp.log()[-2000:]
        tp.cmd("start")
        assert tp.wait_log(r"packet forwarding - ports=", 10), tp.log()[-2000:]
        end = time.monotonic() + timeout
        st = {}
        while time.monotonic() < end:
            st = tp.port_stats()
            if st.get("tx_packets", 0) >= n:
                break
            time.sleep(0.2)
        assert st.get("rx_packets") == n and st.get("tx_packets") == n, st
    finally:
        tp.cleanup()                 # stop, quit: net_pcap closes its dumper at port stop
    assert tp.proc.returncode == 0, tp.log()[-2000:]


@pytest.mark.parametrize("name,nano", [("in_us.pcap", False), ("in_ns.pcap", True),
                                       ("in.pcapng", True)])
def test_testpmd_replays_ours_we_read_its_output(pool, tmp_path, name, nano):
    fr = frames(SIZES, seed=9)
    src = tmp_path / name
    with PcapPort(pool, tx_pcap=str(src), nano=nano) as port:
        hs = np.array([make_packet(pool, f, seg=700 if i % 3 == 0 else None)
                       for i, f in enumerate(fr)], np.int32)
        assert port.tx_burst(hs) == hs.size
    dst = tmp_path / "testpmd_out.pcap"
    _through_testpmd(src, dst, len(fr))
    with open(dst, "rb") as f:
        assert f.read(4) == b"\x4d\x3c\xb2\xa1"              # DPDK writes ns pcap
    with PcapPort(pool, rx_pcap=str(dst)) as port:
        got = read_port(port, pool, with_ts=True)
    assert [g[0] for g in got] == fr
    ts = [g[1] for g in got]
    assert ts == sorted(ts) and abs(ts[0] / 1e9 - time.time()) < 600
