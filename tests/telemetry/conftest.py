import os

import pytest

from pktbuf.telemetry.server import Telemetry

from .helpers import remove_prefix_dir, unique_prefix


@pytest.fixture
def prefix():
    """A unique file prefix; its runtime directory (EAL's default place) is removed after."""
    from pktbuf.telemetry.runtime import runtime_dir
    p = unique_prefix()
    yield p
    remove_prefix_dir(runtime_dir(p))


@pytest.fixture
def tel(prefix):
    """A server at the default runtime location of a unique prefix."""
    t = Telemetry(prefix)
    yield t
    t.close()
    assert not os.path.exists(t.path)
