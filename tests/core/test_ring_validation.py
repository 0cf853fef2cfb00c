"""The Ring facade validates every argument before a kernel runs: bad types and ranges raise
from the PktbufError hierarchy with the ring unchanged, and never compile new kernels."""
from __future__ import annotations

import os

import numpy as np
import pytest

from pktbuf import InvalidArgument, InvalidHandle, PktbufError, Ring
from pktbuf.shm import Region

from ..sigs import run_battery_without_new_specialisations


def battery(r):
    r.enqueue_bulk([1, 2, 3])

    def refused(fn, exc):
        before = (r.hdr.copy(), r.slots.copy())
        with pytest.raises(exc) as ei:
            fn()
        assert isinstance(ei.value, PktbufError)
        assert np.array_equal(before[0], r.hdr) and np.array_equal(before[1], r.slots)

    for bad, exc in ((1.5, InvalidHandle), ("1", InvalidHandle), (None, InvalidHandle),
                     (True, InvalidHandle), (2 ** 31, InvalidHandle), (-2 ** 31 - 1, InvalidHandle)):
        refused(lambda: r.enqueue(bad), exc)
    for bad, exc in (([1.5], InvalidHandle), ([2 ** 40], InvalidHandle), ("abc", InvalidArgument),
                     ([[1]], InvalidArgument), (None, InvalidArgument), ([True], InvalidHandle),
                     (np.zeros(3, np.float32), InvalidHandle)):
        refused(lambda: r.enqueue_bulk(bad), exc)
        refused(lambda: r.enqueue_burst(bad), exc)
    for bad in (-1, 1.0, "2", None, True):
        refused(lambda: r.dequeue_bulk(bad), InvalidArgument)
        refused(lambda: r.dequeue_burst(bad), InvalidArgument)
    # odd arrays of good values are normalised (and the caller's array is not modified)
    for a in (np.array([4, 5], np.int64), np.array([6, 7, 8, 9], np.int32)[::2],
              np.array([10, 11], ">i4"), np.array([12], np.uint8)):
        if a.flags.owndata:
            a.flags.writeable = False
        assert r.enqueue_bulk(a) == a.size
    assert r.dequeue_burst(100).tolist() == [1, 2, 3, 4, 5, 6, 8, 10, 11, 12]


def test_garbage_arguments():
    battery(Ring(64))


def test_no_new_specialisations():
    r = Ring(64)
    run_battery_without_new_specialisations(lambda: battery(r))


@pytest.mark.parametrize("kw", [dict(sp="yes"), dict(sc=2), dict(exact=None), dict(shared=1.0),
                                dict(name=5)])
def test_bad_flags(kw):
    with pytest.raises(InvalidArgument):
        Ring(8, **kw)


def test_closed_ring_refuses_every_call():
    r = Ring(8, shared=True)
    r.close()
    for fn in (lambda: r.enqueue(1), lambda: r.enqueue_bulk([1]), lambda: r.dequeue_bulk(1),
               lambda: r.dequeue_burst(1), lambda: len(r), lambda: r.free_count,
               lambda: r.capacity, lambda: r.fd, r.dequeue):
        with pytest.raises(InvalidArgument):
            fn()
    r.close()
    assert repr(r) == "Ring(closed)"


def test_attach_checks_the_memory_before_using_it():
    good = Ring(16, shared=True)
    for fd, size in ((-1, good.nbytes), (1.5, good.nbytes), (good.fd, 3), (good.fd, "64"),
                     (good.fd, good.nbytes + 2)):
        with pytest.raises(InvalidArgument):
            Ring.attach(fd, size)
    fd = os.dup(good.fd)
    with pytest.raises(InvalidArgument):          # bigger than the file: would SIGBUS
        Ring.attach(fd, good.nbytes + 4096)
    os.close(fd)                                  # refused before it was adopted: still ours
    unsealed = Region(good.nbytes, "unsealed", seal=False)
    unsealed.array[:] = good.region.array
    fd = os.dup(unsealed.fd)
    with pytest.raises(InvalidArgument):          # a peer could shrink it under us
        Ring.attach(fd, good.nbytes)
    os.close(fd)
    reg = Region(good.nbytes, "bad-mask")
    reg.array[:] = good.region.array
    from pktbuf.buf.ring import kernels as K
    reg.array[:64].view(np.uint32)[K.H_MASK] = 0xFFFF     # a mask larger than the slots
    with pytest.raises(InvalidArgument):
        Ring.attach(os.dup(reg.fd), good.nbytes)
    peer = Ring.attach(os.dup(good.fd), good.nbytes)
    assert good.enqueue(5) and peer.dequeue() == 5
    peer.close()
    good.close()
    unsealed.close()
    reg.close()
