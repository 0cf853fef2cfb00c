"""An LPM table in a SharedDomain: reader processes look it up in compiled loops while this
process adds, re-points and deletes routes from Python; every lookup must return the model's
next hop for a state between the writer's sequence number before it and one past the number
after it (the ops done, and the one that may be under way)."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest
from numba import njit

import pktbuf
from pktbuf.atomics import store_release
from pktbuf.errors import InvalidArgument
from pktbuf.net.lpm import layout as L
from pktbuf.net.lpm.api import Lpm
from pktbuf.shm import Region

from . import lpm_readers as R

N_OPS = 6000
N_READERS = 2


@njit(cache=True)
def _publish(seq, w, v):
    store_release(seq, w, v)


def _reader(sd, seed, M, q):
    """A worker: attach the table and the sequence words by name, say ready, check lookups."""
    try:
        lpm = Lpm.attach(sd, "routes")
        seq = sd.region("seq").view(np.int64, 0, 64)
        bad = np.zeros((16, 4), np.int64)
        _publish(seq, R.W_READY + seed, 1)
        n, errors, overlap = R.read_and_check(lpm.block, seq, M, seed, 1 << 40, bad)
        q.put(("done", n, errors, overlap, bad[:min(errors, 16)].tolist()))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put(("error", repr(e), 0, 0, []))


def _warm(M):
    """Compile the readers' kernels here first (concurrent compiles corrupt the cache)."""
    lpm = Lpm(16, 4)
    lpm.add(*R.BASE_RULE)
    seq = np.zeros(64, np.int64)
    R.read_and_check(lpm.block, seq, M, 1, 64, np.zeros((4, 4), np.int64))
    _publish(seq, 0, 0)


def _apply(lpm, seq, ops):
    for k in range(ops.shape[0]):
        i, d, nh = (int(x) for x in ops[k])
        if nh >= 0:
            lpm.add(R.BASE + i, d, nh)
        else:
            lpm.delete(R.BASE + i, d)
        _publish(seq, R.W_SEQ, k + 1)


def test_model_states_agree_with_the_naive_model():
    ops = R.make_ops(600, 5)
    R.naive_check(ops, R.model_states(ops), 50)


def test_the_check_catches_a_table_that_lags_behind():
    """A table left at state 0 while the sequence says every op is done: the readers' check
    reports errors (it can fail)."""
    ops = R.make_ops(400, 6)
    M = R.model_states(ops)
    lpm = Lpm(1024, 64)
    lpm.add(*R.BASE_RULE)
    seq = np.zeros(64, np.int64)
    seq[R.W_SEQ] = ops.shape[0] - 1
    bad = np.zeros((4, 4), np.int64)
    n, errors, _ = R.read_and_check(lpm.block, seq, M, 3, 20_000, bad)
    stale = int((M[0] != M[-1]).sum())
    assert stale > 0 and n >= 20_000
    assert errors > 0 and (bad[0, 0] == bad[0, 3] == ops.shape[0] - 1)


def test_readers_in_other_processes_see_old_or_new_never_wrong():
    ops = R.make_ops(N_OPS, 7)
    M = R.model_states(ops)
    R.naive_check(ops, M, 1000)
    name = f"lpmsh{os.getpid()}"
    with pktbuf.SharedDomain.create(name) as sd:
        lpm = Lpm(4096, 64, domain=sd, name="routes")
        lpm.add(*R.BASE_RULE)
        seqr = Region(4096, f"pktbuf-seq-{os.getpid()}")
        sd.add_region("seq", seqr)
        seq = seqr.view(np.int64, 0, 64)
        assert sd.names()["regions"] == ["routes", "seq"]
        ctx_q = __import__("multiprocessing").get_context("spawn").Queue()
        procs = [sd.spawn(_reader, args=(s, M, ctx_q), warm=lambda: _warm(M))
                 for s in range(N_READERS)]
        try:
            t0 = time.monotonic()
            while not all(seq[R.W_READY + s] for s in range(N_READERS)):
                assert time.monotonic() - t0 < 120, "readers did not start"
                assert all(p.is_alive() for p in procs), "a reader died"
                time.sleep(0.01)
            freed0 = int(lpm.block.meta[L.M_FREE_EPOCH])
            _apply(lpm, seq, ops)
            _apply(lpm, seq, np.zeros((0, 3), np.int64))
            time.sleep(0.05)
            _publish(seq, R.W_STOP, 1)
            res = [ctx_q.get(timeout=60) for _ in procs]
        finally:
            _publish(seq, R.W_STOP, 1)
            for p in procs:
                p.join(30)
                if p.is_alive():                # pragma: no cover
                    p.kill()
        for kind, n, errors, overlap, bad in res:
            assert kind == "done", n
            assert errors == 0, (n, errors, bad)
            assert n > N_OPS
        # the run did exercise the races: lookups overlapped ops, groups were freed and reused
        assert sum(r[3] for r in res) > 0
        assert int(lpm.block.meta[L.M_FREE_EPOCH]) - freed0 > 100
        # and the shared table ends as the model's last state
        got = lpm.lookup_bulk(np.arange(R.BASE, R.BASE + R.SPACE, dtype=np.uint32))
        assert ((got & 0xFFFFFF).astype(np.int64) == M[-1]).all()


def test_attach_checks_what_it_maps():
    name = f"lpmat{os.getpid()}"
    with pktbuf.SharedDomain.create(name) as sd:
        lpm = Lpm(64, 4, domain=sd, name="t")
        lpm.add("10.0.0.0", 8, 3)
        other = Lpm.attach(sd, "t")
        assert other.lookup("10.2.3.4") == 3 and other.number_tbl8s == 4
        with pytest.raises(InvalidArgument):
            Lpm(64, 4, domain=sd, name="t")            # the name is taken
        with pytest.raises(InvalidArgument):
            Lpm(64, 4, name="x")                       # a name without a domain
        with pytest.raises(InvalidArgument):
            Lpm.attach(sd, "nothing")
        junk = Region(1 << 16, "pktbuf-junk")
        sd.add_region("junk", junk)
        with pytest.raises(InvalidArgument):
            Lpm.attach(sd, "junk")
        # a header whose counters lie about the sizes is refused
        lpm.block.meta[L.M_NTBL8] = 1 << 20
        with pytest.raises(InvalidArgument):
            Lpm.attach(sd, "t")
        lpm.block.meta[L.M_NTBL8] = 4
