import numpy as np
import pytest

import pktbuf
from pktbuf import PcapPort

from . import naive
from .helpers import frames, read_port


@pytest.fixture(scope="session")
def warm(tmp_path_factory):
    """Compile (or load) the pcap kernels once per session, both formats and directions."""
    d = tmp_path_factory.mktemp("warm")
    pool = pktbuf.PktmbufPool(1024, name="pcap-warm")
    pk = [(i * 1000, f) for i, f in enumerate(frames([60, 3000], seed=0))]
    for name, data in (("a.pcap", naive.write_pcap(pk)),
                       ("b.pcapng", naive.shb() + naive.idb() + naive.epb(0, 1, pk[0][1]))):
        p = d / name
        p.write_bytes(data)
        with PcapPort(pool, rx_pcap=str(p), tx_pcap=[str(d / "o.pcap"), str(d / "o.pcapng")]) as port:
            got = port.rx_burst(32)
            port.tx_burst(got[:1], 0)
            port.tx_burst(got[1:], 1)
    yield
    pool.close(force=True)


@pytest.fixture
def pool(warm):
    p = pktbuf.PktmbufPool(8192, name="pcap-test")
    yield p
    assert p.in_use_count == 0, "mbufs leaked"
    p.close(force=True)
