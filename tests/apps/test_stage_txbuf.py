"""The stage loop's per-port Tx buffers (l3fwd's ``tx_mbufs``): a port's packets wait in its
buffer until it holds a burst, and leave -- in their received order -- on the timed drain, when
an idle loop is about to yield or sleep (a busy-polling one leaves it to the timer, as l3fwd
does), and before every return of the loop (deadline, end of input, port error), so nothing
stays behind; what a Tx queue does not take is freed and counted."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import pktbuf
from pktbuf import PcapPort
from pktbuf.apps.fwd.forwarder import Forwarder
from pktbuf.apps.stage.abi import R_ALL_EOF, R_DEADLINE, R_PORT_ERROR
from pktbuf.apps.stage.api import StageRunner
from pktbuf.drivers.pcap import layout as L
from pktbuf.errors import InvalidArgument

from ..pcap import naive
from . import fwd_stages as S
from .test_fwd_stage import drain, frame, inject, wired

NEVER = 3_600_000_000          # a timed drain that never comes within a test (us)


def marked(i: int) -> bytes:
    """A frame the parity stage reroutes to ``state[0]`` (byte 4 0xEE, byte 5 even)."""
    f = bytearray(frame(2 * i))
    f[4] = 0xEE
    f[6] = i & 0xFF
    return bytes(f)


def plain(i: int) -> bytes:
    """A frame the parity stage leaves on its stream's default port."""
    f = bytearray(frame(2 * i))
    f[4] = 0
    f[6] = i & 0xFF
    return bytes(f)


def busy_board(drain_us):
    """Port 0: a loopback ring with 64 plain frames circulating (stream 0 -> 0: every poll gets
    packets, so the loop never has an idle round); port 1: Tx into ``out``.  The marked frames
    injected with them go to port 1, 3 of them: never a full burst."""
    loop, out = pktbuf.Ring(1024), pktbuf.Ring(1024)
    st = S.make()
    st.state[0] = 1
    fw = Forwarder([wired(loop, loop), wired(pktbuf.Ring(64), out)], stage=st)
    run = StageRunner(fw.ports, st, [(0, 0, 0)], idle_backoff=False, tx_drain_us=drain_us)
    inject(fw, loop, [plain(i) for i in range(30)] + [marked(i) for i in range(3)]
           + [plain(i) for i in range(30, 64)])
    return fw, run, loop, out


# a run the test must see still going when the packets it waits for (within milliseconds)
# have arrived: wait_for's limit, counted from before the loop is loaded, is longer
LONG = 8.0


def in_thread(run, seconds):
    rc = []
    t = threading.Thread(target=lambda: rc.append(run.run(seconds)), daemon=True)
    t.start()
    return t, rc


def wait_for(ring, n, t, limit):
    """Seconds until ``ring`` holds ``n`` packets while thread ``t`` runs (None if it ended or
    ``limit`` passed first)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit and t.is_alive():
        if len(ring) >= n:
            return time.monotonic() - t0
        time.sleep(0.001)
    return None


def close_all(fw, *rings):
    for r in rings:
        drain(fw, r)
    assert fw.close() == 0                          # every mbuf back in its pool


def test_the_timed_drain_sends_what_never_fills_a_burst_while_the_loop_runs():
    fw, run, loop, out = busy_board(100)
    try:
        t, rc = in_thread(run, LONG)
        took = wait_for(out, 3, t, 10.0)
        assert took is not None, "the buffered packets stayed in the buffer"
        assert t.is_alive()                         # left while the loop ran, not at its end
        fw_rx = run.port_counts(0)["rx"]
        t.join()
        assert rc == [R_DEADLINE]
        assert drain(fw, out) == [marked(i) for i in range(3)]
        assert fw_rx > 0 and not run._txn.any()
    finally:
        close_all(fw, loop)


def test_a_busy_loop_holds_a_partial_burst_until_the_deadline_then_sends_it():
    fw, run, loop, out = busy_board(NEVER)
    try:
        t, rc = in_thread(run, 1.5)
        time.sleep(0.5)
        assert len(out) == 0 and t.is_alive()      # buffered: no idle round, no timer
        t.join()
        assert rc == [R_DEADLINE]
        assert drain(fw, out) == [marked(i) for i in range(3)]   # the deadline drained it
        c = run.port_counts(1)
        assert c["tx"] == 3 and c["tx_dropped"] == 0
        assert not run._txn.any()
    finally:
        close_all(fw, loop)


def test_an_idle_loop_drains_the_buffers_before_it_backs_off():
    rx, out = pktbuf.Ring(1024), pktbuf.Ring(1024)
    fw = Forwarder([wired(rx, pktbuf.Ring(64)), wired(pktbuf.Ring(64), out)], stage=S.make())
    run = StageRunner(fw.ports, fw.stage, [(0, 0, 1)], tx_drain_us=NEVER)
    try:
        t, rc = in_thread(run, LONG)
        a = [plain(i) for i in range(5)]
        inject(fw, rx, a)
        took = wait_for(out, 5, t, 10.0)
        assert took is not None and t.is_alive()   # no timer: the back-off's drain sent them
        t.join()
        assert rc == [R_DEADLINE]
        assert drain(fw, out) == a
    finally:
        close_all(fw)


def test_a_busy_polling_idle_loop_leaves_the_drain_to_the_timer():
    """With the back-off off (``--no-idle-backoff``, DPDK's polling) empty rounds do not drain:
    a partial burst waits for the timer -- or, with no timer, for the deadline."""
    rx, out = pktbuf.Ring(1024), pktbuf.Ring(1024)
    fw = Forwarder([wired(rx, pktbuf.Ring(64)), wired(pktbuf.Ring(64), out)], stage=S.make())
    run = StageRunner(fw.ports, fw.stage, [(0, 0, 1)], idle_backoff=False, tx_drain_us=NEVER)
    try:
        t, rc = in_thread(run, 1.5)
        a = [plain(i) for i in range(5)]
        inject(fw, rx, a)
        time.sleep(0.5)
        assert len(out) == 0 and t.is_alive() and len(rx) == 0   # received, held
        t.join()
        assert rc == [R_DEADLINE]
        assert drain(fw, out) == a                  # the deadline drained them
        assert not run._txn.any()
    finally:
        close_all(fw)


def test_the_end_of_the_input_leaves_nothing_buffered(tmp_path):
    src = tmp_path / "in.pcap"
    a = [plain(i) for i in range(5)]
    src.write_bytes(naive.write_pcap([(1_000_000_000 + i, f) for i, f in enumerate(a)]))
    out = pktbuf.Ring(1024)
    fw = Forwarder([f"net_pcap0,rx_pcap={src}", wired(pktbuf.Ring(64), out)], stage=S.make())
    run = StageRunner(fw.ports, fw.stage, [(0, 0, 1)], tx_drain_us=NEVER)
    try:
        rc = R_DEADLINE
        for _ in range(100):
            rc = run.run(0.1)
            if rc != R_DEADLINE:
                break
        assert rc == R_ALL_EOF
        assert drain(fw, out) == a and not run._txn.any()
    finally:
        close_all(fw)


def test_a_port_error_leaves_nothing_buffered(tmp_path):
    """Port 0's capture is damaged after 3 frames: the loop stops with R_PORT_ERROR, and the 3
    frames it buffered for port 1 were sent first."""
    a = [plain(i) for i in range(3)]
    src = tmp_path / "in.pcap"
    src.write_bytes(naive.write_pcap([(1_000_000_000 + i, f) for i, f in enumerate(a)])
                    + np.array([1, 0, 0xFFFFFFF0, 0xFFFFFFF0], "<u4").tobytes())
    out = pktbuf.Ring(1024)
    fw = Forwarder([f"net_pcap0,rx_pcap={src}", wired(pktbuf.Ring(64), out)], stage=S.make())
    run = StageRunner(fw.ports, fw.stage, [(0, 0, 1)], tx_drain_us=NEVER)
    try:
        rc = R_DEADLINE
        for _ in range(100):
            rc = run.run(0.1)
            if rc != R_DEADLINE:
                break
        assert rc == R_PORT_ERROR
        assert drain(fw, out) == a and not run._txn.any()
    finally:
        close_all(fw)


def test_what_a_full_tx_ring_refuses_at_a_drain_is_freed_and_counted():
    rx, out = pktbuf.Ring(1024), pktbuf.Ring(8)
    cap = out.capacity
    fw = Forwarder([wired(rx, pktbuf.Ring(64)), wired(pktbuf.Ring(64), out)], stage=S.make())
    run = StageRunner(fw.ports, fw.stage, [(0, 0, 1)], tx_drain_us=NEVER)
    try:
        a = [plain(i) for i in range(20)]          # fewer than a burst: held, then drained
        inject(fw, rx, a)
        assert run.run(0.2) == R_DEADLINE
        c = run.port_counts(1)
        assert c["tx"] == cap and c["tx_dropped"] == 20 - cap
        assert c["tx_bytes"] == sum(len(f) for f in a[:cap])
        assert drain(fw, out) == a[:cap]           # the queue took the first ones, in order
        assert not run._txn.any()
    finally:
        close_all(fw)


def test_a_tx_error_at_a_drain_frees_the_buffer_and_stops_the_loop(tmp_path):
    """Port 1 writes into /dev/full: the drain's burst fails, and the loop says R_PORT_ERROR
    with every packet counted (sent or refused) and back in the pool."""
    rx = pktbuf.Ring(1024)

    def port(pool, pid):
        p = PcapPort(pool, tx_pcap=str(tmp_path / "out.pcap"), flush_every_burst=True,
                     port_id=pid)
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, int(p.tx_queue(0).cfg[L.T_FD]))
        os.close(full)
        return p
    fw = Forwarder([wired(rx, pktbuf.Ring(64)), port], stage=S.make())
    run = StageRunner(fw.ports, fw.stage, [(0, 0, 1)], tx_drain_us=NEVER)
    try:
        inject(fw, rx, [plain(i) for i in range(5)])
        rc = R_DEADLINE
        for _ in range(20):
            rc = run.run(0.1)
            if rc != R_DEADLINE:
                break
        assert rc == R_PORT_ERROR
        c = run.port_counts(1)
        assert c["tx"] + c["tx_dropped"] == 5
        assert not run._txn.any()
    finally:
        close_all(fw)


def test_full_bursts_and_buffered_packets_keep_each_ports_order():
    """Bursts that all go one way (sent from the Rx array when the buffer is empty) and mixed
    ones (buffered) interleave; every port still gets its packets in received order."""
    rx, out0, out1 = pktbuf.Ring(1024), pktbuf.Ring(1024), pktbuf.Ring(1024)
    st = S.make()
    st.state[0] = 0
    fw = Forwarder([wired(pktbuf.Ring(64), out0), wired(rx, out1)], stage=st)
    run = StageRunner(fw.ports, st, [(1, 0, 1)], tx_drain_us=NEVER)
    try:
        a = []
        for b in range(12):                         # bursts of 32: plain, or with marks
            for i in range(32):
                k = 32 * b + i
                a.append(marked(k) if b % 3 == 1 and i % 7 == 0 else plain(k))
        inject(fw, rx, a)
        assert run.run(0.3) == R_DEADLINE
        assert drain(fw, out1) == [f for f in a if f[4] != 0xEE]
        assert drain(fw, out0) == [f for f in a if f[4] == 0xEE]
        assert not run._txn.any()
    finally:
        close_all(fw)


def test_the_drain_period_is_checked():
    fw = Forwarder([wired(pktbuf.Ring(64), pktbuf.Ring(64))], stage=S.make())
    try:
        for bad in (-1, NEVER + 1):
            with pytest.raises(InvalidArgument, match="tx_drain_us"):
                StageRunner(fw.ports, fw.stage, [(0, 0, 0)], tx_drain_us=bad)
    finally:
        assert fw.close() == 0
