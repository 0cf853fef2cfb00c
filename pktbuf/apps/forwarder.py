"""The demo's forwarder: two memif server ports, MAC swap or l2fwd-style port forwarding.

* ``macswap``: receive on port 0, swap source and destination MAC, send back out of port 0;
* ``l2fwd``: port 0 <-> port 1, destination MAC ``02:00:00:00:00:<out port>``, source = the
  out port's MAC, as DPDK's l2fwd sample does -- testpmd's ``mac`` mode with each port's MAC
  set to ``02:00:00:00:00:<port>`` and the default peers.

It is ``pktbuf fwd`` 's :class:`~pktbuf.apps.fwd.forwarder.Forwarder` over two ``net_memif`` ports (the
port model's ``rx_burst``/``tx_burst`` loop in :mod:`pktbuf.apps.fwd.loop`), printing the
demo's JSON counter lines.  ``examples/memif_forwarder.py`` runs :func:`forwarder_main`;
``pktbuf demo`` starts it.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ..errors import cli_number
from .counters import CNT_BYTES, CNT_DROPS, CNT_RX, CNT_TX, counters, emit
from .fwd.loop import F_RX, F_RX_BYTES, F_TX, F_TX_DROP, R_PORT_ERROR

MODES = ("macswap", "l2fwd")


def port_mac(port: int) -> bytes:
    """The MAC of port ``port`` (and of the station behind it): 02:00:00:00:00:<port>."""
    return bytes([0x02, 0, 0, 0, 0, port])


def _vdev(port: int, sock: str) -> str:
    mac = ":".join(f"{b:02x}" for b in port_mac(port))
    return f"net_memif{port},role=server,socket={sock},id=0,mac={mac}"


def make_forwarder(mode: str, sock0: str, sock1: str):
    """The Forwarder of the demo: ``macswap`` on one port, or ``l2fwd`` (mac mode) on two."""
    from .fwd.forwarder import Forwarder
    if mode == "l2fwd":
        return Forwarder([_vdev(0, sock0), _vdev(1, sock1)], "mac")
    return Forwarder([_vdev(0, sock0)], "macswap")


def _counters(fw) -> np.ndarray:
    c = fw.cnt
    cnt = counters()
    cnt[CNT_RX] = c[:, F_RX].sum()
    cnt[CNT_TX] = c[:, F_TX].sum()
    cnt[CNT_BYTES] = c[:, F_RX_BYTES].sum()
    cnt[CNT_DROPS] = c[:, F_TX_DROP].sum()
    return cnt


def forwarder_main(argv=None) -> int:
    """The forwarder process: two memif server ports (one in macswap mode)."""
    ap = argparse.ArgumentParser(prog="memif_forwarder", description=forwarder_main.__doc__)
    ap.add_argument("--sock0", default="/run/pktbuf-demo-0.sock")
    ap.add_argument("--sock1", default="/run/pktbuf-demo-1.sock")
    ap.add_argument("--mode", choices=MODES, default="macswap")
    ap.add_argument("--seconds", type=cli_number(float, 0, 1e9), default=10.0)
    ap.add_argument("--wait", type=cli_number(float, 0, 3600), default=30.0,
                    help="seconds to wait for the client")
    a = ap.parse_args(argv)
    fw = make_forwarder(a.mode, a.sock0, a.sock1)
    status = 0
    try:
        fw.warm()
        print("READY", flush=True)
        for p in fw.ports:
            if not p.memif.wait_connected(a.wait):
                print(json.dumps({"role": "fwd", "error": "client did not connect"}), flush=True)
                return 1
        t0 = time.monotonic()
        end = t0 + a.seconds
        while time.monotonic() < end:
            r = fw.run_slice(min(0.25, end - time.monotonic()))
            emit("fwd", _counters(fw), t0)
            if r == R_PORT_ERROR:         # a port stopped for good: not a normal end
                for e in fw.failures():
                    print(json.dumps({"role": "fwd", "error": e["line"]}), flush=True)
                status = 1
                break
            if not any(p.memif.connected for p in fw.ports):
                break                     # the traffic side is done and gone: so are we
        emit("fwd", _counters(fw), t0, final=True)
        # the traffic side stops first; keep serving until it has gone
        fw.ports[0].memif.wait_disconnected(5)
    finally:
        in_use = fw.close()
    if in_use:
        print(json.dumps({"role": "fwd", "error": f"{in_use} mbufs were not returned"}),
              flush=True)
        status = 1
    return status


def warm() -> None:
    """Compile (or load) the loop for memif ports (the forwarder's) here, before child
    processes would compile it at once."""
    from ..drivers.common.kinds import K_MEMIF
    from ..drivers.ring.api import RingPort
    from ..ethdev.burst import kinds_mask
    from .fwd.forwarder import Forwarder
    fw = Forwarder([lambda pool, pid: RingPort(pool=pool, port_id=pid)], "mac", nb_mbufs=256)
    try:
        fw.warm(kinds_mask([K_MEMIF]))
    finally:
        fw.close()
