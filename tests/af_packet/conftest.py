import os

import pytest

from ..netns import Netns


def _need_root():
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the AF_PACKET tests need root (network namespaces, CAP_NET_RAW)",
                        pytrace=False)
        pytest.skip("the AF_PACKET tests need root")


@pytest.fixture
def ns():
    """A fresh network namespace with a veth pair veth0 <-> veth1, removed after the test."""
    _need_root()
    with Netns() as n:
        n.veth()
        yield n


@pytest.fixture
def pool():
    import pktbuf
    p = pktbuf.PktmbufPool(8192, 64)
    yield p
    p.close(force=True)
