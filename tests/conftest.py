import os
import sys
import threading

import pytest
from hypothesis import HealthCheck, settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run against the checkout even when not installed
    sys.path.insert(0, ROOT)

settings.register_profile("ci", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture])
settings.register_profile("thorough", deadline=None, max_examples=500,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def domain():
    """A private domain per test, so pool ids and handles never leak between tests."""
    from pktbuf import Domain
    return Domain(max_objects=1 << 18, max_ring_slots=1 << 19)


# -- pools a test leaves open --------------------------------------------------------------------
# A pool's memory is a memfd that stays registered in its domain until the pool is closed (the
# library's lifetime rule, as DPDK's: dropping the last reference does not destroy a pool), and
# most unit tests never close theirs: one process running a few hundred of them piled up
# hundreds of descriptors (and pool ids of the default domain).  In these directories every
# pool a test creates is closed once the test and its own fixtures are done.  Left alone: pools
# of module/session fixtures and of module import (made before the test started); everything of
# a test that leaves a thread it started running (the thread may still use its pools); pools a
# close refuses (a shared domain's with peers attached, mbufs chained across pools).  Only the
# directories below, where it was run and checked: the other unit directories leave few
# descriptors, and the other system ones run threads, processes and peers over their pools.
CLOSE_POOLS_DIRS = {"core", "heap", "ethdev", "pcap"}


@pytest.fixture(autouse=True)
def _close_pools_left_open(request):
    rel = os.path.relpath(str(request.node.fspath), _TESTS).split(os.sep)
    if len(rel) < 2 or rel[0] not in CLOSE_POOLS_DIRS:
        yield
        return
    from pktbuf.buf.domain.domain import Domain
    from pktbuf.errors import PktbufError
    made = []
    register = Domain._register

    def recording(self, pool, n, ring_size):
        out = register(self, pool, n, ring_size)
        made.append(pool)          # a strong reference: a pool collected unclosed keeps its fd
        return out

    threads = set(threading.enumerate())
    Domain._register = recording
    try:
        yield
    finally:
        Domain._register = register
    if any(t.is_alive() for t in threading.enumerate() if t not in threads):
        return
    left = [p for p in made if not p.closed]
    while left:                    # mbufs chained across pools: another pass may close more
        for p in left:
            try:
                p.close(force=True)
            except PktbufError:
                pass
        still = [p for p in left if not p.closed]
        if len(still) == len(left):
            break
        left = still


# -- groups and the checked build (.ci/run) ------------------------------------------------------
# CI runs the suite in two pytest processes side by side, one per group: "system" tests use
# network namespaces and interfaces, real peers (testpmd, tcpdump, dpdk-telemetry.py), worker
# processes and pinned CPUs; "unit" tests are self-contained (kernels against their models, the
# facade fuzz, tables, parsers).  Both groups may make namespaces: their names are unique per
# process (tests/netns.py).
SYSTEM_DIRS = {"af_packet", "af_xdp", "apps", "bench", "distrib", "l3fwd", "memif", "multiproc",
               "pcap", "telemetry", "vhost", "virtio_user"}
SYSTEM_FILES = {"test_docs.py", "test_options.py", "test_examples.py", "test_examples_run.py"}
# ... and, in those directories, the files that are self-contained after all (their peers are
# pktbuf processes or threads over shared memory and sockets, none pins a CPU or uses an
# interface): they run in the unit group, which keeps the two slots' lengths close
UNIT_FILES = {"memif/test_facade.py", "memif/test_hostile.py", "memif/test_loopback.py",
              "memif/test_peermem.py", "memif/test_poll.py", "memif/test_proto.py",
              "memif/test_validate.py", "memif/test_variants.py", "apps/test_compile.py",
              "pcap/test_ngcall.py", "vhost/test_front_end.py", "vhost/test_kernels.py",
              "vhost/test_packed.py", "virtio_user/test_big_ring.py",
              "virtio_user/test_event_idx.py", "virtio_user/test_indirect.py",
              "virtio_user/test_kernels.py", "virtio_user/test_kernels_packed.py",
              "virtio_user/test_pair.py", "virtio_user/test_pair_packed.py",
              "l3fwd/test_naive.py", "l3fwd/test_placement.py"}
# The checked build (PKTBUF_CHECKED=1 NUMBA_BOUNDSCHECK=1) asserts every raw copy against its
# buffers and every array index inside the kernels.  CI runs it over the tests that drive the
# kernels which copy packet data or index with computed offsets -- mbufs and the mempool
# (core), the facade fuzz, every driver's Rx/Tx copies (memif, pcap, af_packet, af_xdp,
# vhost), the heap and the page pool, RSS's parsers, the distributor's rings, the port table,
# the packet libraries and the example stages (they rewrite headers at computed offsets) --
# and not over the command-line, benchmark, telemetry and multi-process tests, nor the interop
# runs against testpmd, tcpdump and tshark (in those directories too): they run the same
# kernels through processes and peers and add no kernel paths of their own.
CHECKED_DIRS = {"core", "fuzz", "memif", "pcap", "af_packet", "af_xdp", "heap", "pagepool", "rss",
                "distrib", "ethdev", "net", "vhost", "virtio_user", "examples"}
NOT_CHECKED_FILES = {"test_testpmd.py", "test_processes.py", "test_tools.py", "test_demo_bench.py",
                     "test_ptype_tshark.py", "test_lpm_bench.py", "test_hash_bench.py",
                     "test_net_ptype_bench.py",
                     "test_jit_cache.py", "test_examples.py"}
# Tests that measure how much CPU a thread gets (a busy-polling forwarder must use most of a
# second): CI runs them alone, after the two groups, so the other group cannot take the core.
ALONE = {"apps/test_fwd.py::test_idle_backoff_sleeps_and_no_idle_backoff_keeps_polling"}
_TESTS = os.path.dirname(os.path.abspath(__file__))


def pytest_configure(config):
    config.addinivalue_line("markers", "group_system: run in CI's system group (see conftest)")
    config.addinivalue_line("markers", "group_unit: run in CI's unit group (see conftest)")
    config.addinivalue_line("markers", "checked: run again under the checked build in CI")
    config.addinivalue_line("markers", "alone: run by CI on its own, after the groups")


def pytest_collection_modifyitems(config, items):
    for it in items:
        rel = os.path.relpath(str(it.fspath), _TESTS).split(os.sep)
        top = rel[0] if len(rel) > 1 else ""
        system = ((top in SYSTEM_DIRS or rel[-1] in SYSTEM_FILES)
                  and "/".join(rel) not in UNIT_FILES)
        it.add_marker(pytest.mark.group_system if system else pytest.mark.group_unit)
        if "/".join(rel) + "::" + it.name in ALONE:
            it.add_marker(pytest.mark.alone)
        if top in CHECKED_DIRS and rel[-1] not in NOT_CHECKED_FILES:
            it.add_marker(pytest.mark.checked)
