"""pktbuf.fdwait.readable: select()'s read set through poll, for descriptors above FD_SETSIZE."""
from __future__ import annotations

import os
import resource
import select
import socket
import time

import pytest

from pktbuf.fdwait import readable

HIGH = 1500         # above FD_SETSIZE (1024): select.select refuses it


@pytest.fixture
def high_pair():
    """A connected socket pair whose first end is descriptor HIGH (the open-file limit raised for
    the test if need be, and restored)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= HIGH:
        if hard != resource.RLIM_INFINITY and hard <= HIGH:
            pytest.fail(f"the hard open-file limit {hard} is below {HIGH + 1}: cannot test")
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH + 1, hard))
    a, b = socket.socketpair()
    os.dup2(a.fileno(), HIGH)
    a.close()
    hi = socket.socket(fileno=HIGH)
    try:
        yield hi, b
    finally:
        hi.close()
        b.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_select_refuses_the_high_descriptor(high_pair):
    """The defect the helper exists for: select() cannot take it."""
    hi, _ = high_pair
    with pytest.raises(ValueError):
        select.select([hi], [], [], 0)


def test_high_descriptor_readable_only_when_data_waits(high_pair):
    hi, b = high_pair
    assert readable([hi], 0) == []
    t0 = time.monotonic()
    assert readable([hi, b], 0.05) == []
    assert time.monotonic() - t0 >= 0.045          # it waited the timeout out
    b.send(b"x")
    assert readable([b, hi], 1.0) == [hi]
    assert hi.recv(1) == b"x"
    assert readable([hi.fileno()], 0) == []       # integer descriptors too


def test_order_and_hang_up(high_pair):
    """Ready members come back in their order in the argument; a closed peer counts as ready
    (the read that follows sees the end), as with select()."""
    hi, b = high_pair
    c, d = socket.socketpair()
    try:
        d.send(b"y")
        b.close()
        assert readable([c, hi], 0) == [c, hi]
        assert hi.recv(1) == b""
    finally:
        c.close()
        d.close()


def test_closed_socket_raises_value_error():
    a, b = socket.socketpair()
    a.close()
    b.close()
    with pytest.raises(ValueError):
        readable([a], 0)
