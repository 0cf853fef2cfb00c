"""The real client: DPDK 22.11's ``dpdk-telemetry.py`` (Debian's ``dpdk-dev``), run as a
subprocess against pktbuf's server -- with commands on stdin, with ``-i`` for a second
instance, with ``-l``, and interactively on a pseudo-terminal.

In CI these tests must run: ``.ci/run`` installs dpdk-dev; without it they fail there.
"""
import json
import os
import pty
import shutil
import subprocess
import time

import pytest

from pktbuf import PktmbufPool
from pktbuf.fdwait import readable
from pktbuf.telemetry.server import Telemetry

from .helpers import INFO_KEYS, MEMPOOL_KEYS, STATS_KEYS, StubPort

TOOL = shutil.which("dpdk-telemetry.py")
if TOOL is None:
    if os.environ.get("CI"):
        pytest.fail("dpdk-telemetry.py is not installed (apt-get install dpdk-dev)", pytrace=False)
    pytest.skip("dpdk-telemetry.py is not installed", allow_module_level=True)


def run_tool(args, stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["python3", TOOL, *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def replies(prefix: str, commands, extra=()) -> list:
    """Each command's reply as dpdk-telemetry.py prints it (one JSON document a line)."""
    r = run_tool(["-f", prefix, *extra], "".join(c + "\n" for c in commands))
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert len(lines) == len([c for c in commands if c.startswith("/")]), r.stdout
    return [json.loads(ln) for ln in lines]


@pytest.fixture
def app(tel, domain):
    tel.add_port(StubPort(0, "net_stub0"))
    tel.add_port(StubPort(1, "net_stub1", nb_queues=1))
    pool = PktmbufPool(256, 16, domain=domain, name="mb_pool_0")
    tel.add_mempool(pool)
    yield tel
    pool.close()


def test_every_documented_command(app, prefix):
    cmds = ["/", "/info", "/help", "/help,/ethdev/stats", "/ethdev/list", "/ethdev/stats,0",
            "/ethdev/xstats,0", "/ethdev/link_status,1", "/ethdev/info,1", "/mempool/list",
            "/mempool/info,mb_pool_0", "/pktbuf/version", "/pktbuf/domain", "/nope"]
    out = replies(prefix, cmds)
    by = {c: o for c, o in zip(cmds, out)}
    assert "/ethdev/stats" in by["/"]["/"]
    assert by["/info"]["/info"]["pid"] == os.getpid()
    assert by["/help"] == {"/help": "Returns help text for a command. Parameters: string command"}
    assert by["/help,/ethdev/stats"]["/help"]["/ethdev/stats"].startswith("Returns the common")
    assert by["/ethdev/list"] == {"/ethdev/list": [0, 1]}
    assert list(by["/ethdev/stats,0"]["/ethdev/stats"]) == STATS_KEYS
    assert by["/ethdev/xstats,0"]["/ethdev/xstats"]["rx_good_packets"] == 10
    assert by["/ethdev/link_status,1"] == {"/ethdev/link_status": {
        "status": "UP", "speed": 10000, "duplex": "full-duplex"}}
    assert list(by["/ethdev/info,1"]["/ethdev/info"]) == INFO_KEYS
    assert by["/mempool/list"] == {"/mempool/list": ["mb_pool_0"]}
    assert list(by["/mempool/info,mb_pool_0"]["/mempool/info"]) == MEMPOOL_KEYS
    assert by["/pktbuf/version"]["/pktbuf/version"]["pktbuf"]
    assert "pools" in by["/pktbuf/domain"]["/pktbuf/domain"]
    assert by["/nope"] == {"/nope": None}


def test_lines_not_starting_with_slash_are_ignored_and_quit_stops(app, prefix):
    r = run_tool(["-f", prefix], "hello\n/ethdev/list\nquit\n/info\n")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.splitlines()] == [{"/ethdev/list": [0, 1]}]


def test_biggest_reply_is_read_whole(tel, prefix):
    # xstats of 256 long names: far more than 16 KiB of JSON, so the server leaves entries out
    # and the client, reading max_output_len bytes, still gets one complete document
    p = StubPort(0)
    p.extended = {f"rx_q{i}_{'x' * 100}": i for i in range(300)}
    tel.add_port(p)
    (out,) = replies(prefix, ["/ethdev/xstats,0"])
    x = out["/ethdev/xstats"]
    assert 100 < len(x) < 256
    assert list(x.values()) == list(range(len(x)))


def test_second_instance_with_dash_i(prefix):
    a, b = Telemetry(prefix), Telemetry(prefix)
    try:
        a.register("/which", lambda p: "first", "Which server")
        b.register("/which", lambda p: "second", "Which server")
        assert replies(prefix, ["/which"]) == [{"/which": "first"}]
        assert replies(prefix, ["/which"], ["-i", "1"]) == [{"/which": "second"}]
    finally:
        a.close()
        b.close()


def test_list_prefixes(tel, prefix):
    r = run_tool(["-l"])
    assert r.returncode == 0, r.stderr
    assert prefix in r.stdout.split()


def test_no_server(prefix):
    r = run_tool(["-f", prefix], "/info\n")
    assert "Error connecting to" in r.stdout
    assert prefix in r.stdout


def test_interactive_on_a_terminal(app, prefix):
    pid, fd = pty.fork()
    if pid == 0:                                     # the child: the tool on a terminal
        os.execvp("python3", ["python3", TOOL, "-f", prefix])
    out = b""

    def read_until(token: bytes, timeout: float = 30) -> bool:
        nonlocal out
        end = time.monotonic() + timeout
        while token not in out and time.monotonic() < end:
            r = readable([fd], 0.2)
            if r:
                try:
                    out += os.read(fd, 65536)
                except OSError:
                    break
        return token in out

    try:
        assert read_until(b"--> "), out
        assert b"Connected to application" in out   # it read our pid from the greeting
        os.write(fd, b"/ethdev/list\n")
        assert read_until(b"}\r\n--> "), out     # pretty-printed (indent 2) on a terminal
        text = out.decode()
        body = text[text.index("/ethdev/list\r\n") + len("/ethdev/list\r\n"):].split("-->")[0]
        assert body.startswith('{\r\n  "/ethdev/list": [\r\n')
        assert json.loads(body.replace("\r\n", "\n")) == {"/ethdev/list": [0, 1]}
        os.write(fd, b"quit\n")
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)


def test_runtime_directory_variable(tmp_path):
    # EAL and the tool both take the base from $RUNTIME_DIRECTORY (systemd's RuntimeDirectory=)
    with Telemetry("svc", runtime_dir=str(tmp_path)) as t:
        assert t.path == str(tmp_path / "dpdk" / "svc" / "dpdk_telemetry.v2")
        env = dict(os.environ, RUNTIME_DIRECTORY=str(tmp_path))
        r = subprocess.run(["python3", TOOL, "-f", "svc"], input="/info\n", env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["/info"]["pid"] == os.getpid()
