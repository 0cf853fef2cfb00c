import os

import pytest

from ..netns import Netns


def need_root():
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the AF_XDP tests need root (network namespaces, CAP_NET_RAW, "
                        "CAP_BPF, CAP_NET_ADMIN)", pytrace=False)
        pytest.skip("the AF_XDP tests need root")


@pytest.fixture
def ns():
    """A fresh namespace with a veth pair veth0 <-> veth1, one queue each (so every frame
    arrives on queue 0, whatever CPU sent it), removed after the test."""
    need_root()
    with Netns() as n:
        n.veth(queues=1)
        yield n


@pytest.fixture
def pool():
    import pktbuf
    p = pktbuf.PktmbufPool(8192, 64)
    yield p
    p.close(force=True)
