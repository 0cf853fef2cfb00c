import pytest

from ..netns import Netns
from ..netns import need_root as _need_root


def need_root():
    _need_root("AF_XDP (network namespaces, CAP_NET_RAW, CAP_BPF, CAP_NET_ADMIN)")


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
