"""The telemetry server over real SEQPACKET sockets: where the socket is and how it is bound,
the greeting, request parsing, the client limit, misbehaving clients, and shutting down."""
import errno
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading

import pytest

from pktbuf.telemetry.runtime import runtime_base
from pktbuf.telemetry.server import MAX_CLIENTS, Telemetry
from pktbuf.errors import InvalidArgument, TelemetryError

from .helpers import Client, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- location -------------------------------------------------------------------------------
def test_socket_at_eals_runtime_path(tel, prefix):
    base = runtime_base()
    if os.getuid() == 0 and not os.environ.get("RUNTIME_DIRECTORY"):
        assert base == "/var/run"
    assert tel.path == os.path.join(base, "dpdk", prefix, "dpdk_telemetry.v2")
    assert tel.instance == 0
    st = os.lstat(tel.path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(os.stat(tel.runtime_dir).st_mode) == 0o700


def test_runtime_dirs_created_0700_level_by_level(tmp_path):
    t = Telemetry("p1", runtime_dir=str(tmp_path))
    try:
        for d in (tmp_path / "dpdk", tmp_path / "dpdk" / "p1"):
            assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
        assert t.path == str(tmp_path / "dpdk" / "p1" / "dpdk_telemetry.v2")
    finally:
        t.close()
    assert not os.path.exists(t.path)
    # the base itself is not created (EAL makes <base>/dpdk and the prefix only)
    with pytest.raises(TelemetryError) as e:
        Telemetry("p1", runtime_dir=str(tmp_path / "missing"))
    assert e.value.errno == errno.ENOENT


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "50%", "a\0b", 3, None])
def test_bad_file_prefix(bad):
    with pytest.raises(InvalidArgument):
        Telemetry(bad)


def test_socket_path_too_long(tmp_path):
    with pytest.raises(TelemetryError) as e:
        Telemetry("p" * 100, runtime_dir=str(tmp_path))
    assert e.value.errno == errno.ENAMETOOLONG


def test_only_seqpacket_clients(tel):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_UNIX, kind)
        with pytest.raises(OSError) as e:
            s.connect(tel.path)
        assert e.value.errno == errno.EPROTOTYPE
        s.close()


def test_stale_socket_file_is_replaced(prefix):
    from pktbuf.telemetry.runtime import create_runtime_dir, runtime_dir
    d = runtime_dir(prefix)
    create_runtime_dir(d)
    path = os.path.join(d, "dpdk_telemetry.v2")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    dead.bind(path)                       # a socket file nobody listens on: a crashed server's
    dead.close()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    with Telemetry(prefix) as t:
        assert t.path == path and t.instance == 0
        with Client(t.path) as c:
            assert c.greeting["pid"] == os.getpid()


def test_second_server_takes_the_next_suffix(prefix):
    a = Telemetry(prefix)
    b = Telemetry(prefix)
    c = Telemetry(prefix)
    try:
        assert (a.instance, b.instance, c.instance) == (0, 1, 2)
        assert b.path == a.path + ":1" and c.path == a.path + ":2"
        b.register("/who", lambda p: "b", "Which server")
        with Client(b.path) as cl:
            assert cl.query("/who") == {"/who": "b"}
        with Client(a.path) as cl:
            assert cl.query("/who") == {"/who": None}
        a.close()
        assert not os.path.exists(a.path) and os.path.exists(b.path)
        d = Telemetry(prefix)             # the base name is free again
        assert d.instance == 0
        d.close()
    finally:
        for t in (a, b, c):
            t.close()
    assert not any(os.path.exists(t.path) for t in (a, b, c))


def test_close_is_idempotent_and_keeps_a_foreign_socket(tmp_path):
    t = Telemetry("p", runtime_dir=str(tmp_path))
    path = t.path
    os.unlink(path)                        # someone else took the path meanwhile
    other = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    other.bind(path)
    try:
        t.close()
        t.close()
        assert t.closed and os.path.exists(path)      # not ours: left alone
    finally:
        other.close()


# -- protocol -------------------------------------------------------------------------------
def test_greeting(tel):
    with Client(tel.path) as c:
        assert c.greeting_raw == (b'{"version":"pktbuf %s","pid":%d,"max_output_len":16384}'
                                  % (c.greeting["version"].split()[1].encode(), os.getpid()))
        assert list(c.greeting) == ["version", "pid", "max_output_len"]


def test_builtin_commands(tel):
    with Client(tel.path) as c:
        cmds = c.query("/")["/"]
        assert cmds == sorted(cmds)
        assert {"/", "/info", "/help", "/ethdev/list", "/ethdev/stats", "/ethdev/xstats",
                "/ethdev/link_status", "/ethdev/info", "/mempool/list", "/mempool/info",
                "/pktbuf/version", "/pktbuf/domain"} <= set(cmds)
        assert c.query("/,ignored") == c.query("/")
        assert c.query("/info") == {"/info": c.greeting}
        assert c.raw(b"/help") == \
            b'{"/help":"Returns help text for a command. Parameters: string command"}'
        assert c.raw(b"/help,/info") == \
            b'{"/help":{"/info":"Returns DPDK Telemetry information. Takes no parameters"}}'
        assert c.raw(b"/help,/nope") == b'{"/help":null}'
        assert c.raw(b"/help,") == c.raw(b"/help")    # strtok: an empty tail is no params
        for cmd in cmds:
            assert json.loads(c.raw(f"/help,{cmd}".encode()))["/help"][cmd]
        v = c.query("/pktbuf/version")["/pktbuf/version"]
        assert set(v) == {"pktbuf", "numba", "numpy", "python"}


def test_unknown_and_malformed_requests(tel):
    with Client(tel.path) as c:
        assert c.raw(b"/nope") == b'{"/nope":null}'
        assert c.raw(b"/nope,1,2") == b'{"/nope":null}'
        assert c.raw(b"/info\n") == b'{"/info\\n":null}'       # no trimming, as DPDK
        assert c.raw(b",,/info") == c.raw(b"/info")            # leading commas are skipped
        assert c.raw(b"/info\0garbage") == c.raw(b"/info")     # a C string ends at NUL
        assert c.raw(b"\0/info") == b'{"(null)":null}'         # DPDK prints NULL so
        assert c.raw(b",,,") == b'{"(null)":null}'
        # a command of 56 characters or more is unknown, its key cut to 56
        long = b"/" + b"a" * 60
        assert c.raw(long) == b'{"' + long[:56] + b'":null}'
        # quotes, backslashes and bytes that are not UTF-8: still one valid JSON reply
        for junk in (b'/a"b', b"/a\\b", b"/\xff\xfe", b"/\x01\x02", b'"}{"'):
            assert json.loads(c.raw(junk))
        # an overlong request: only its first 1023 bytes are read, the rest is dropped
        assert c.raw(b"/info," + b"x" * 3000) == c.raw(b"/info")
        assert json.loads(c.raw(b"/" + b"y" * 5000)) == {"/" + "y" * 55: None}
        assert c.query("/info")["/info"]["pid"] == os.getpid()   # the connection still works


def test_empty_message_closes_the_connection(tel):
    with Client(tel.path) as c:
        c.sock.send(b"")
        assert c.sock.recv(100) == b""
    assert wait_for(lambda: tel.client_count == 0)


def test_register_validation(tel):
    ok = lambda p: 1  # noqa: E731
    for bad in ("noslash", "/has-dash", "/has.dot", "/sp ace", "/é", "/" + "a" * 55, "", 7):
        with pytest.raises(InvalidArgument):
            tel.register(bad, ok, "help")
    with pytest.raises(InvalidArgument):
        tel.register("/x", "not callable", "help")
    with pytest.raises(InvalidArgument):
        tel.register("/x", ok, "h" * 128)
    tel.register("/" + "a" * 54, ok, "h" * 127)          # the longest DPDK accepts
    with pytest.raises(InvalidArgument):
        tel.register("/info", ok, "again")
    assert "/" + "a" * 54 in tel.commands


def test_callbacks_get_params_and_failures_reply_null(tel):
    seen = []

    def echo(params):
        seen.append(params)
        return {"params": params}

    def boom(params):
        raise RuntimeError("handler bug")

    tel.register("/app/echo", echo, "Echo the params")
    tel.register("/app/boom", boom, "Raises")
    tel.register("/app/float", lambda p: {"x": 1.5}, "Not encodable")
    tel.register("/app/int", lambda p: 42, "A number")
    with Client(tel.path) as c:
        assert c.query("/app/echo") == {"/app/echo": {"params": ""}}
        assert c.query("/app/echo,a,b,,c") == {"/app/echo": {"params": "a,b,,c"}}
        assert c.raw(b"/app/boom") == b'{"/app/boom":null}'
        assert c.raw(b"/app/float") == b'{"/app/float":null}'
        assert c.raw(b"/app/int") == b'{"/app/int":42}'
        assert c.query("/info")["/info"]["pid"] == os.getpid()
    assert seen == ["", "a,b,,c"]


def test_client_limit(tel):
    clients = [Client(tel.path) for _ in range(MAX_CLIENTS)]
    try:
        assert wait_for(lambda: tel.client_count == MAX_CLIENTS)
        extra = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        extra.connect(tel.path)           # accepted, then closed before any greeting
        extra.settimeout(20)
        assert extra.recv(1024) == b""
        extra.close()
        for c in clients:                 # the others are served as before
            assert c.query("/info")["/info"]["pid"] == os.getpid()
        clients.pop().close()
        assert wait_for(lambda: tel.client_count == MAX_CLIENTS - 1)
        with Client(tel.path) as again:
            assert again.query("/info")["/info"]["max_output_len"] == 16384
    finally:
        for c in clients:
            c.close()
    assert wait_for(lambda: tel.client_count == 0)


def test_a_client_that_never_reads_does_not_stop_the_others(tel):
    hog = Client(tel.path)
    hog.sock.setblocking(False)
    sent = 0
    try:
        while sent < 100000:              # until its socket buffers are full
            hog.sock.send(b"/")
            sent += 1
    except BlockingIOError:
        pass
    assert sent < 100000
    with Client(tel.path) as c:
        for _ in range(20):
            assert c.query("/info")["/info"]["pid"] == os.getpid()
    hog.close()
    assert wait_for(lambda: tel.client_count == 0)


def test_concurrent_clients(tel):
    errors = []

    def worker():
        try:
            with Client(tel.path) as c:
                for i in range(50):
                    assert c.query(f"/help,/info")["/help"]["/info"]
        except Exception as e:            # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors


def test_close_disconnects_clients_and_removes_the_socket(prefix):
    t = Telemetry(prefix)
    c = Client(t.path)
    assert wait_for(lambda: t.client_count == 1)
    t.close()
    assert c.sock.recv(100) == b""
    assert not os.path.exists(t.path)
    with pytest.raises(OSError):
        Client(t.path)
    c.close()


def _run(code: str, prefix: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), prefix], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_socket_removed_at_interpreter_exit_not_by_forked_children(prefix):
    r = _run("""
        import os, sys
        from pktbuf.telemetry.server import Telemetry
        t = Telemetry(sys.argv[1])
        pid = os.fork()
        if pid == 0:
            sys.exit(0)                   # runs the child's atexit handlers
        os.waitpid(pid, 0)
        print(t.path, os.path.exists(t.path))
        # no close(): the atexit handler removes the socket, as DPDK's does
    """, prefix)
    assert r.returncode == 0, r.stderr
    path, alive_after_child = r.stdout.split()
    assert alive_after_child == "True"
    assert not os.path.exists(path)


def test_default_prefix_is_rte():
    # only inspected, never bound: another DPDK process may own the rte prefix
    import inspect
    assert inspect.signature(Telemetry).parameters["file_prefix"].default == "rte"



def test_runtime_base_follows_eal(monkeypatch):
    from pktbuf.telemetry import runtime as RT
    monkeypatch.setenv("RUNTIME_DIRECTORY", "/run/svc")
    assert RT.runtime_base() == "/run/svc"
    monkeypatch.delenv("RUNTIME_DIRECTORY")
    monkeypatch.setattr(RT.os, "getuid", lambda: 0)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert RT.runtime_base() == "/var/run"                 # root ignores XDG_RUNTIME_DIR
    monkeypatch.setattr(RT.os, "getuid", lambda: 1000)
    assert RT.runtime_base() == "/run/user/1000"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert RT.runtime_base() == "/tmp"
    assert RT.runtime_dir("app") == "/tmp/dpdk/app"


def test_handlers_never_wait_for_the_domain_lock(prefix, domain):
    # pool creation and closing hold the domain's lock; telemetry must answer meanwhile
    from pktbuf import PktmbufPool
    pool = PktmbufPool(64, 8, domain=domain, name="held")
    with Telemetry(prefix, domain=domain) as t, Client(t.path, timeout=20) as c:
        t.add_mempool(pool)
        with domain._lock:
            assert c.query("/pktbuf/domain")["/pktbuf/domain"]["pool_count"] == 1
            assert c.query("/mempool/info,held")["/mempool/info"]["size"] == 64
    pool.close()


def test_any_request_gets_one_valid_reply(tel):
    # whatever bytes a client sends, the reply is one JSON object with one key, within
    # max_output_len, and the server keeps serving
    from hypothesis import given, settings
    from hypothesis import strategies as st

    tel.register("/app/echo", lambda p: {"p": p}, "Echo the params")
    cmds = st.sampled_from([b"/", b"/info", b"/help", b"/ethdev/stats", b"/ethdev/info",
                            b"/mempool/info", b"/app/echo", b"/pktbuf/domain", b""])

    @settings(max_examples=300, deadline=None)
    @given(cmds, st.binary(max_size=1200), st.booleans())
    def check(cmd, tail, comma):
        out = tel.handle(cmd + (b"," if comma else b"") + tail)
        assert len(out) < 16384
        v = json.loads(out)
        assert isinstance(v, dict) and len(v) == 1

    check()
    with Client(tel.path) as c:
        assert c.query("/app/echo,\x7fé")["/app/echo"]["p"] == "\x7fé"
