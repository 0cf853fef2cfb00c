"""Shared helpers of the telemetry tests: a stub port, raw SEQPACKET clients, waiting."""
from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import time

_seq = itertools.count()

# DPDK 22.11's key lists, as captured from a live dpdk-testpmd (they are also checked against
# one in test_testpmd.py)
STATS_KEYS = ["ipackets", "opackets", "ibytes", "obytes", "imissed", "ierrors", "oerrors",
              "rx_nombuf", "q_ipackets", "q_opackets", "q_ibytes", "q_obytes", "q_errors"]
INFO_KEYS = ["name", "state", "nb_rx_queues", "nb_tx_queues", "port_id", "mtu",
             "rx_mbuf_size_min", "mac_addr", "promiscuous", "scattered_rx", "all_multicast",
             "dev_started", "lro", "dev_configured", "rxq_state", "txq_state", "numa_node",
             "dev_flags", "rx_offloads", "tx_offloads", "ethdev_rss_hf"]
MEMPOOL_KEYS = ["name", "pool_id", "flags", "socket_id", "size", "cache_size", "elt_size",
                "header_size", "trailer_size", "private_data_size", "ops_index",
                "populated_size", "mz_name", "mz_len", "mz_hugepage_sz", "mz_socket_id",
                "mz_flags"]


def unique_prefix(tag: str = "t") -> str:
    """A file prefix no other test (or process) uses."""
    return f"pktbuf_tel{os.getpid()}_{tag}{next(_seq)}"


def remove_prefix_dir(directory: str) -> None:
    """Remove a test's runtime directory (only ever one of ours: pktbuf_tel<pid>_...)."""
    assert os.path.basename(directory).startswith(f"pktbuf_tel{os.getpid()}_"), directory
    shutil.rmtree(directory, ignore_errors=True)


def wait_for(pred, timeout: float = 20.0, step: float = 0.01) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


class Client:
    """A raw telemetry client: one SEQPACKET connection, one request -> one reply."""

    def __init__(self, path: str, timeout: float = 20.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)           # blocking: waits while the backlog (1) is full
        self.sock.settimeout(timeout)
        self.greeting_raw = self.sock.recv(1024)
        self.greeting = json.loads(self.greeting_raw)

    def raw(self, request: bytes, bufsize: int = 16384) -> bytes:
        self.sock.send(request)
        return self.sock.recv(bufsize)

    def query(self, request: str):
        return json.loads(self.raw(request.encode()))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class StubPort:
    """A port with exactly the members the telemetry server relies on; counters are plain
    attributes the test changes between queries."""

    def __init__(self, port_id: int = 0, name: str = "net_stub0", driver: str = "net_stub",
                 nb_queues: int = 2):
        self.port_id = port_id
        self.name = name
        self.driver = driver
        self.counters = {"ipackets": 10, "opackets": 20, "ibytes": 640, "obytes": 1280,
                         "imissed": 1, "ierrors": 2, "oerrors": 3, "rx_nombuf": 4}
        self.queues = {"q_ipackets": [6, 4][:nb_queues], "q_opackets": [15, 5][:nb_queues],
                       "q_ibytes": [384, 256][:nb_queues], "q_obytes": [960, 320][:nb_queues],
                       "q_errors": [0, 2][:nb_queues]}
        self.extended = {"rx_good_packets": 10, "tx_good_packets": 20, "rx_q0_packets": 6,
                         "driver.specific-name": 7, "tx_q1_bytes": 320}
        self.link_state = {"status": "UP", "speed": 10000, "duplex": "full-duplex"}
        self.known = {"name": name, "mtu": 9000, "mac_addr": "02:0a:bc:de:f0:01",
                      "nb_rx_queues": nb_queues, "nb_tx_queues": nb_queues,
                      "driver_name": driver}

    def stats(self) -> dict:
        return {**self.counters, **{k: list(v) for k, v in self.queues.items()}}

    def xstats(self) -> dict:
        return dict(self.extended)

    def link(self) -> dict:
        return dict(self.link_state)

    def info(self) -> dict:
        return dict(self.known)
