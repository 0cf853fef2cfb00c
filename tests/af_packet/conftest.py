import pytest

from ..netns import Netns, need_root


def _need_root():
    need_root("AF_PACKET (network namespaces, CAP_NET_RAW)")


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
