"""pktbuf's replies against a live DPDK 22.11 ``dpdk-testpmd`` (a ``net_null`` port): the
same greeting and key sets, the same key order and JSON types, and the same bytes where the
content does not depend on the application (help texts, null and empty replies).

In CI these tests must run: ``.ci/run`` installs dpdk; without it they fail there.
"""
import json
import os
import signal
import subprocess

import pytest

from pktbuf import PktmbufPool
from pktbuf.apps import testpmd as T
from pktbuf.telemetry.encode import reply
from pktbuf.telemetry.runtime import runtime_dir
from pktbuf.telemetry.server import Telemetry

from .helpers import Client, StubPort, remove_prefix_dir, unique_prefix, wait_for

if not T.available():
    if os.environ.get("CI"):
        pytest.fail("dpdk-testpmd is not installed (apt-get install dpdk)", pytrace=False)
    pytest.skip("dpdk-testpmd is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def dpdk():
    tp = T.Testpmd(vdevs=["net_null0"], fwd="io")
    tp.start()
    path = os.path.join(tp.runtime_dir, "dpdk_telemetry.v2")
    try:
        def ready():
            try:
                Client(path, timeout=5).close()
                return True
            except OSError:
                return False
        assert wait_for(ready, 60, 0.1) and tp.wait_log(r"testpmd> ", 60), tp.log()[-2000:]
        c = Client(path)
        yield c
        c.close()
    finally:
        tp.cleanup()


@pytest.fixture
def ours(tel, domain):
    tel.add_port(StubPort(0, "net_null0", "net_null", nb_queues=1))
    pool = PktmbufPool(512, 32, domain=domain, name="mb_pool_0")
    tel.add_mempool(pool)
    c = Client(tel.path)
    yield c
    c.close()
    pool.close()


def shape(v):
    """Keys in order with their JSON types, recursively (values left out)."""
    if isinstance(v, dict):
        return [(k, shape(x)) for k, x in v.items()]
    if isinstance(v, list):
        return ["list", sorted({json.dumps(shape(x)) for x in v})]
    return type(v).__name__


def test_greeting_and_info(dpdk, ours):
    assert shape(ours.greeting) == shape(dpdk.greeting)
    assert shape(ours.query("/info")) == shape(dpdk.query("/info"))
    assert dpdk.greeting["max_output_len"] == ours.greeting["max_output_len"] == 16384


@pytest.mark.parametrize("cmd", ["/ethdev/list", "/ethdev/stats,0", "/ethdev/info,0",
                                 "/ethdev/link_status,0", "/mempool/list",
                                 "/mempool/info,mb_pool_0", "/"])
def test_same_keys_order_and_types(dpdk, ours, cmd):
    assert shape(ours.query(cmd)) == shape(dpdk.query(cmd))


def test_stats_queue_arrays(dpdk, ours):
    for c in (dpdk, ours):
        s = c.query("/ethdev/stats,0")["/ethdev/stats"]
        assert all(len(s[k]) == 16 for k in ("q_ipackets", "q_opackets", "q_ibytes",
                                             "q_obytes", "q_errors"))


def test_xstats_is_an_object_of_numbers(dpdk, ours):
    for c in (dpdk, ours):
        x = c.query("/ethdev/xstats,0")["/ethdev/xstats"]
        assert x and all(isinstance(v, int) for v in x.values())


def test_help_texts_are_dpdks(dpdk, ours):
    shared = set(dpdk.query("/")["/"]) & set(ours.query("/")["/"])
    assert {"/", "/info", "/help", "/ethdev/list", "/ethdev/stats", "/ethdev/xstats",
            "/ethdev/link_status", "/ethdev/info", "/mempool/list", "/mempool/info"} <= shared
    for cmd in sorted(shared) + [""]:
        req = f"/help,{cmd}".rstrip(",").encode()
        assert ours.raw(req) == dpdk.raw(req), cmd


@pytest.mark.parametrize("req", [b"/nope", b"/nope,1", b"/ethdev/stats,9", b"/ethdev/stats",
                                 b"/ethdev/info,x", b"/ethdev/link_status,", b"/mempool/info",
                                 b"/mempool/info,nope", b"/help,/nope", b"\0/info", b",,,",
                                 b",/ethdev/list", b"/" + b"z" * 70,
                                 b"/ethdev/stats,0,extra", b"/ethdev/info,0 "])
def test_same_bytes_for_application_independent_replies(dpdk, ours, req):
    a, b = ours.raw(req), dpdk.raw(req)
    if req.startswith((b"/ethdev/stats,0", b"/ethdev/info,0")):
        assert shape(json.loads(a)) == shape(json.loads(b))
    else:
        assert a == b


def test_unknown_command_keys_are_escaped_where_dpdk_prints_them_raw(dpdk, ours):
    # DPDK copies an unknown command into the key unescaped, which can break the JSON; pktbuf
    # escapes it (the one intended difference in these replies)
    for req, key in ((b"/info\n", "/info\n"), (b'/a"b', '/a"b'), (b"/a\\b", "/a\\b")):
        assert dpdk.raw(req) == b'{"' + req + b'":null}'
        assert json.loads(ours.raw(req)) == {key: None}


def test_a_second_instance_next_to_dpdk(dpdk):
    # a pktbuf server sharing a live DPDK's prefix takes the :1 suffix, as a second DPDK would
    dpdk_path = dpdk.sock.getpeername()
    directory = os.path.dirname(dpdk_path)
    base = os.path.dirname(os.path.dirname(directory))          # <base>/dpdk/<prefix>
    with Telemetry(os.path.basename(directory), runtime_dir=base) as t:
        assert t.path == dpdk_path + ":1" and t.instance == 1
        assert dpdk.query("/info")["/info"]["version"].startswith("DPDK 22.11")
    assert os.path.exists(dpdk_path)


def test_encoder_matches_dpdk_byte_for_byte_past_the_limit():
    # /eal/params is EAL's argv as an array of strings: with 200 long arguments it is far over
    # 16 KiB, so DPDK cuts each string to 127 bytes, escapes quotes, backslashes and tabs, drops
    # other control characters and leaves out what does not fit.  pktbuf's encoder, given the
    # same argv, must produce the same bytes.
    prefix = unique_prefix("eal")
    args = [f"--log-level=pktbuf{i:03d}" + "x" * (i % 150)
            + ('"q\\b\t\x01' if i % 7 == 0 else "") + ":info" for i in range(200)]
    argv = ["dpdk-testpmd", "--no-huge", "-m", "256", "--no-pci", f"--file-prefix={prefix}",
            "--vdev", "net_null0"] + args
    proc = subprocess.Popen(["timeout", "--kill-after=5", "120"] + argv
                            + ["--", "-i", "--no-mlockall", "--total-num-mbufs=8192"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    path = os.path.join(runtime_dir(prefix), "dpdk_telemetry.v2")
    try:
        def ready():
            try:
                Client(path, timeout=5).close()
                return True
            except OSError:
                return False
        assert wait_for(lambda: proc.poll() is None and ready(), 60, 0.1)
        with Client(path) as c:
            got = c.raw(b"/eal/params")
        want = reply(b"/eal/params", argv)
        assert len(want) > 16000 and len(json.loads(want)["/eal/params"]) < len(argv)
        assert got == want
    finally:
        proc.stdin.close()                 # EOF on its prompt: testpmd quits
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)    # its own session: timeout + testpmd
            proc.wait()
        remove_prefix_dir(runtime_dir(prefix))
