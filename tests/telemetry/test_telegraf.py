"""Telegraf's dpdk input (plugins/inputs/dpdk, Telegraf 1.3x), replayed over a raw SEQPACKET
socket: its socket discovery, its connection handshake and its per-gather request sequence,
with its checks on every reply (docs/telemetry.md has the sequence).

Telegraf is not packaged in Debian, so this is a faithful replay of what the plugin sends and
how it reads, not the Go binary itself.
"""
import glob
import json
import os
import socket
import stat

import pytest

from pktbuf.telemetry.server import Telemetry

from .helpers import StubPort

ETHDEV_COMMANDS = ["/ethdev/stats", "/ethdev/xstats", "/ethdev/info", "/ethdev/link_status"]
MAX_INIT_MESSAGE = 1024
TIMEOUT = 2.0          # Telegraf's socket_access_timeout defaults to 200 ms per request


class TelegrafConnector:
    """One of the plugin's dpdkConnectors: a persistent connection to one socket."""

    def __init__(self, path: str):
        self.path = path
        self.sock = None
        self.init = None

    def connect(self):
        st = os.lstat(self.path)                            # isSocket
        assert stat.S_ISSOCK(st.st_mode), self.path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)   # "unixpacket"
        self.sock.connect(self.path)
        self.sock.settimeout(TIMEOUT)
        init = json.loads(self.sock.recv(MAX_INIT_MESSAGE))
        # the initMessage struct: version string, pid int, max_output_len uint32 (not 0)
        assert isinstance(init["version"], str) and isinstance(init["pid"], int)
        assert 0 < init["max_output_len"] < 1 << 32
        self.init = init

    def response(self, command: str) -> bytes:
        if self.sock is None:
            self.connect()
        self.sock.send(command.encode())
        buf = self.sock.recv(self.init["max_output_len"])
        assert len(buf) > 0, f"got empty response during execution of {command!r}"
        return buf

    def list_params(self, list_command: str) -> list:
        """appendCommandsWithParamsFromList: the ids, as []int64 -> strings."""
        ids = json.loads(self.response(list_command))[list_command]
        assert isinstance(ids, list) and all(isinstance(i, int) for i in ids)
        return [str(i) for i in ids]

    def process(self, command_with_params: str) -> dict | None:
        """processCommand: one metric (fields + tags) or None for an empty reply."""
        parsed = json.loads(self.response(command_with_params))
        command, _, params = command_with_params.partition(",")
        value = parsed[command]
        if value is None:
            return None                                     # "got empty json" warning
        fields = {}
        flatten("", value, fields)
        if command == "/ethdev/link_status":                # processLinkStatusCmd
            status = fields["status"]
            fields["link_status"] = {"down": 0, "up": 1}[status.lower()]
        fields["pid"] = self.init["pid"]                    # metadata_fields default
        fields["version"] = self.init["version"]
        return {"fields": fields, "tags": {"command": command, "params": params}}


def flatten(prefix: str, v, out: dict) -> None:
    """Telegraf's JSONFlattener.FullFlattenJSON with strings and bools kept."""
    if isinstance(v, dict):
        for k, x in v.items():
            flatten(f"{prefix}_{k}" if prefix else k, x, out)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            flatten(f"{prefix}_{i}" if prefix else str(i), x, out)
    elif isinstance(v, bool):
        out[prefix] = v
    elif isinstance(v, (int, float)):
        out[prefix] = float(v)
    elif isinstance(v, str):
        out[prefix] = v
    elif v is not None:
        raise AssertionError(f"unexpected JSON value {v!r}")


def discover(socket_path: str) -> list:
    """The in_memory plugin option (on by default): socket_path and socket_path:N, N > 0."""
    found = []
    for p in glob.glob(socket_path + "*"):
        if os.path.isdir(p) or "dpdk_telemetry" not in p:
            continue
        if p == socket_path:
            found.append(p)
        elif p.startswith(socket_path + ":"):
            suffix = p[len(socket_path) + 1:]
            if suffix.isdigit() and int(suffix) > 0:
                found.append(p)
    return sorted(found)


def gather(conn: TelegrafConnector, additional=()) -> list:
    """One Gather: /ethdev/list, then every ethdev command for every port, then the
    additional commands; each command once."""
    commands = [f"{c},{p}" for c in ETHDEV_COMMANDS for p in conn.list_params("/ethdev/list")]
    commands += [c for c in additional if c not in commands]
    return [m for m in (conn.process(c) for c in commands) if m is not None]


@pytest.fixture
def app(tel):
    tel.ports = [StubPort(0, "net_stub0"), StubPort(1, "net_stub1", nb_queues=1)]
    for p in tel.ports:
        tel.add_port(p)
    return tel


def test_default_gather(app):
    (path,) = discover(app.path)
    conn = TelegrafConnector(path)
    metrics = gather(conn, additional=["/pktbuf/domain", "/pktbuf/version"])
    by = {(m["tags"]["command"], m["tags"]["params"]): m["fields"] for m in metrics}
    assert set(by) == {(c, p) for c in ETHDEV_COMMANDS for p in "01"} | {
        ("/pktbuf/domain", ""), ("/pktbuf/version", "")}
    stats = by[("/ethdev/stats", "0")]
    assert stats["ipackets"] == 10 and stats["q_ipackets_0"] == 6 and stats["q_errors_15"] == 0
    assert by[("/ethdev/xstats", "1")]["rx_good_packets"] == 10
    info = by[("/ethdev/info", "1")]
    assert info["name"] == "net_stub1" and info["rxq_state_0"] == 1 and "rxq_state_1" not in info
    assert by[("/ethdev/link_status", "0")]["link_status"] == 1
    assert by[("/ethdev/link_status", "0")]["speed"] == 10000
    assert all(f["pid"] == os.getpid() for f in by.values())
    assert "pool_count" in by[("/pktbuf/domain", "")]
    # the connection stays open between gathers, and counters are read anew
    app.ports[0].counters["ipackets"] = 99
    again = {(m["tags"]["command"], m["tags"]["params"]): m["fields"] for m in gather(conn)}
    assert again[("/ethdev/stats", "0")]["ipackets"] == 99
    assert app.client_count == 1
    conn.sock.close()


def test_link_down_and_removed_port(app):
    app.ports[1].link_state = {"status": "DOWN"}
    conn = TelegrafConnector(app.path)
    metrics = gather(conn)
    link1 = [m for m in metrics if m["tags"] == {"command": "/ethdev/link_status", "params": "1"}]
    assert link1[0]["fields"]["link_status"] == 0 and "speed" not in link1[0]["fields"]
    # a port that goes away between /ethdev/list and its commands: null, skipped by Telegraf
    assert conn.list_params("/ethdev/list") == ["0", "1"]
    app.remove_port(1)
    assert conn.process("/ethdev/stats,1") is None
    assert conn.process("/ethdev/stats,0") is not None
    conn.sock.close()


def test_in_memory_discovery_finds_every_instance(prefix):
    a, b = Telemetry(prefix), Telemetry(prefix)
    try:
        a.add_port(StubPort(0))
        b.add_port(StubPort(5))
        paths = discover(a.path)
        assert paths == [a.path, b.path]
        conns = [TelegrafConnector(p) for p in paths]
        assert [c.list_params("/ethdev/list") for c in conns] == [["0"], ["5"]]
        for c in conns:
            c.sock.close()
    finally:
        a.close()
        b.close()
