"""memif forwarding demo: a traffic (generator + sink) process and a forwarder process.

``pktbuf demo`` (``main``) runs it on built-in defaults for a few seconds: it starts

* a **forwarder** (two memif server ports): receives on a port, rewrites MAC addresses and sends
  the packet out -- ``macswap`` (swap source and destination, back out the same port) or
  ``l2fwd`` (port 0 <-> port 1, destination MAC ``02:00:00:00:00:<out port>``, source = the
  out port's MAC, as DPDK's l2fwd sample);
* a **traffic** process (memif clients): generates 64-byte UDP frames as fast as the ring
  takes them on port 0 and counts what comes back (macswap: port 0; l2fwd: port 1),
  checking the frames' MACs;

and prints live statistics (pps, bytes, drops) once a second and a summary table at the end.
Both loops are plain ``@njit`` code calling the memif kernels, as an application would write
them; they back off when idle (``backoff_idle``) so an idle port costs almost no CPU.
``examples/memif_forwarder.py`` and ``examples/memif_traffic.py`` run each side on its own.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from .._jit import kernel
from ..mbuf.free import pktmbuf_free_bulk
from ..mbuf.raw import pktmbuf_alloc_bulk
from ..rawmem import addr_u8, memcpy, stack_i32
from ._sys import now_ns
from .datapath import memif_rx_burst, memif_tx_burst
from .poll import backoff_idle, backoff_new, backoff_reset

BURST = 32

# stats words
F_RX = 0
F_TX = 1
F_BYTES = 2
F_DROPS = 3        # forwarder: Tx ring full; traffic: Tx ring full (offered but not taken)
F_BAD = 4          # traffic: frames with the wrong MACs
F_IDLE_US = 5
F_WORDS = 8

MODES = ("macswap", "l2fwd")


def port_mac(port: int) -> bytes:
    return bytes([0x02, 0, 0, 0, 0, port])


def udp_frame(size: int, src_mac: bytes, dst_mac: bytes) -> np.ndarray:
    """A ``size``-byte Ethernet/IPv4/UDP frame (as testpmd's txonly sends)."""
    size = max(60, size)
    f = bytearray(size)
    f[0:6] = dst_mac
    f[6:12] = src_mac
    f[12:14] = b"\x08\x00"
    ip_len = size - 14
    f[14:34] = bytes([0x45, 0, ip_len >> 8, ip_len & 0xFF, 0, 0, 0, 0, 64, 17, 0, 0,
                      198, 18, 0, 1, 198, 18, 0, 2])
    udp_len = ip_len - 20
    f[34:42] = bytes([0x04, 0xD2, 0x16, 0x2E, udp_len >> 8, udp_len & 0xFF, 0, 0])
    for i in range(42, size):
        f[i] = i & 0xFF
    return np.frombuffer(bytes(f), np.uint8).copy()


@kernel(inline="always")
def alloc_fill(dom, pid, lcore, pkts, n, frame):
    """Allocate ``n`` mbufs into ``pkts`` and copy ``frame`` into each (a traffic generator's
    inner step).  0, or -ENOENT with nothing allocated."""
    rc = pktmbuf_alloc_bulk(dom, pid, lcore, pkts, n)
    if rc != 0:
        return rc
    mb = dom.mb
    flen = frame.size
    src = frame.ctypes.data
    for i in range(n):
        m = mb[pkts[i]]
        memcpy(np.int64(m.buf_addr) + np.int64(m.data_off), src, flen)
        m.data_len = flen
        m.pkt_len = flen
    return 0


@kernel(inline="always")
def _macswap(dom, h):
    m = dom.mb[h]
    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 12)
    for i in range(6):
        t = p[i]
        p[i] = p[6 + i]
        p[6 + i] = t


@kernel(inline="always")
def _l2fwd_rewrite(dom, h, out_port):
    m = dom.mb[h]
    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 12)
    p[0] = 2
    p[6] = 2
    for i in range(1, 5):
        p[i] = 0
        p[6 + i] = 0
    p[5] = out_port          # destination: the station behind the out port
    p[11] = out_port         # source: the out port's own MAC


@kernel
def forward_loop(dom, lcore, rx0, tx0, rx1, tx1, l2fwd, deadline_ns, stats, boff):
    """Forward until ``deadline_ns``: port 0 (and 1 in l2fwd) Rx -> rewrite -> Tx.

    ``macswap``: rx0 -> tx0 with source/destination swapped.  ``l2fwd``: rx0 -> tx1 and
    rx1 -> tx0 with l2fwd's MAC rewrite.  Packets the Tx ring does not take are freed and
    counted as drops (a forwarder must not hold them).
    """
    pk = stack_i32(32)
    mb = dom.mb
    while now_ns() < deadline_ns:
        work = 0
        for side in range(2 if l2fwd else 1):
            rq = rx0 if side == 0 else rx1
            tq = tx0 if (side == 1 or not l2fwd) else tx1
            out_port = 0 if (side == 1 or not l2fwd) else 1
            r = memif_rx_burst(dom, rq, lcore, pk, BURST)
            if r == 0:
                continue
            work += r
            nbytes = 0
            for i in range(r):
                nbytes += np.int64(mb[pk[i]].pkt_len)
                if l2fwd:
                    _l2fwd_rewrite(dom, pk[i], out_port)
                else:
                    _macswap(dom, pk[i])
            k = memif_tx_burst(dom, tq, lcore, pk, r)
            if k < r:
                pktmbuf_free_bulk(dom, lcore, pk[k:], r - k)
                stats[F_DROPS] += r - k
            stats[F_RX] += r
            stats[F_TX] += k
            stats[F_BYTES] += nbytes
        if work == 0:
            backoff_idle(boff)
        else:
            backoff_reset(boff)


@kernel
def traffic_loop(dom, pid, lcore, txq, rxq, frame, expect_dst, expect_src, deadline_ns,
                 stats, boff):
    """Generate ``frame`` copies on ``txq`` and sink what arrives on ``rxq`` until the deadline.

    Every received frame's MACs are checked against ``expect_dst``/``expect_src`` (6-byte
    arrays); mismatches count in ``stats[F_BAD]``.
    """
    tx = stack_i32(32)
    rx = stack_i32(32)
    mb = dom.mb
    while now_ns() < deadline_ns:
        k = 0
        if alloc_fill(dom, pid, lcore, tx, BURST, frame) == 0:
            k = memif_tx_burst(dom, txq, lcore, tx, BURST)
            if k < BURST:
                pktmbuf_free_bulk(dom, lcore, tx[k:], BURST - k)
                stats[F_DROPS] += BURST - k
            stats[F_TX] += k
        r = memif_rx_burst(dom, rxq, lcore, rx, BURST)
        if r > 0:
            for i in range(r):
                m = mb[rx[i]]
                stats[F_BYTES] += np.int64(m.pkt_len)
                p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), 12)
                bad = False
                for j in range(6):
                    if p[j] != expect_dst[j] or p[6 + j] != expect_src[j]:
                        bad = True
                if bad:
                    stats[F_BAD] += 1
            pktmbuf_free_bulk(dom, lcore, rx, r)
            stats[F_RX] += r
        if k == 0 and r == 0:
            backoff_idle(boff)
        else:
            backoff_reset(boff)


# -- process mains ------------------------------------------------------------------------------
def _emit(role, stats, t0, final=False):
    print(json.dumps({"role": role, "t": round(time.monotonic() - t0, 3), "final": final,
                      "rx": int(stats[F_RX]), "tx": int(stats[F_TX]), "bytes": int(stats[F_BYTES]),
                      "drops": int(stats[F_DROPS]), "bad": int(stats[F_BAD])}), flush=True)


def _run_timed(role, seconds, step, t0):
    stats = np.zeros(F_WORDS, np.int64)
    end = time.monotonic() + seconds
    while True:
        now = time.monotonic()
        if now >= end:
            break
        step(stats, time.monotonic_ns() + int(min(0.5, end - now) * 1e9))
        _emit(role, stats, t0)
    _emit(role, stats, t0, final=True)
    return stats


def forwarder_main(argv=None) -> int:
    """The forwarder process: two memif server ports."""
    ap = argparse.ArgumentParser(prog="memif_forwarder", description=forwarder_main.__doc__)
    ap.add_argument("--sock0", default="/run/pktbuf-demo-0.sock")
    ap.add_argument("--sock1", default="/run/pktbuf-demo-1.sock")
    ap.add_argument("--mode", choices=MODES, default="macswap")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the client")
    a = ap.parse_args(argv)
    from ..api.pools import PktmbufPool
    from ..api.memif import Memif
    pool = PktmbufPool(16384, 256, name="fwd")
    l2 = a.mode == "l2fwd"
    p0 = Memif.server(a.sock0, pool=pool, name="pktbuf-fwd-p0", port=0)
    p1 = Memif.server(a.sock1, pool=pool, name="pktbuf-fwd-p1", port=1) if l2 else p0
    try:
        print("READY", flush=True)
        if not (p0.wait_connected(a.wait) and p1.wait_connected(a.wait)):
            print(json.dumps({"role": "fwd", "error": "client did not connect"}), flush=True)
            return 1
        dom = pool.domain.state
        boff = backoff_new()
        t0 = time.monotonic()
        _run_timed("fwd", a.seconds, lambda st, dl: forward_loop(
            dom, 0, p0.rx_queue(0), p0.tx_queue(0), p1.rx_queue(0), p1.tx_queue(0), l2, dl, st,
            boff), t0)
        # the traffic side stops first; keep serving until it has gone
        p0.wait_disconnected(5)
    finally:
        if l2:
            p1.close()
        p0.close()
    return 0


def traffic_main(argv=None) -> int:
    """The generator + sink process: memif clients of the forwarder."""
    ap = argparse.ArgumentParser(prog="memif_traffic", description=traffic_main.__doc__)
    ap.add_argument("--sock0", default="/run/pktbuf-demo-0.sock")
    ap.add_argument("--sock1", default="/run/pktbuf-demo-1.sock")
    ap.add_argument("--mode", choices=MODES, default="macswap")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=64)
    a = ap.parse_args(argv)
    from ..api.pools import PktmbufPool
    from ..api.memif import Memif
    pool = PktmbufPool(16384, 256, name="traffic")
    l2 = a.mode == "l2fwd"
    me, peer = port_mac(0x10), port_mac(0x20)
    frame = udp_frame(a.size, me, peer)
    if l2:   # out of forwarder port 1: dst = station behind port 1, src = port 1
        exp_dst, exp_src = port_mac(1), port_mac(1)
    else:    # swapped back to us
        exp_dst, exp_src = me, peer
    c0 = Memif.client(a.sock0, pool=pool, name="pktbuf-traffic-0")
    c1 = Memif.client(a.sock1, pool=pool, name="pktbuf-traffic-1") if l2 else c0
    try:
        if not (c0.wait_connected(30) and c1.wait_connected(30)):
            print(json.dumps({"role": "traffic", "error": "could not connect"}), flush=True)
            return 1
        dom = pool.domain.state
        boff = backoff_new()
        ed = np.frombuffer(exp_dst, np.uint8).copy()
        es = np.frombuffer(exp_src, np.uint8).copy()
        t0 = time.monotonic()
        _run_timed("traffic", a.seconds, lambda st, dl: traffic_loop(
            dom, pool.id, 0, c0.tx_queue(0), c1.rx_queue(0), frame, ed, es, dl, st, boff), t0)
    finally:
        if l2:
            c1.close()
        c0.close()
    return 0


def warm() -> None:
    """Compile (or load) both loops in this process, before children compile them at once."""
    from ..api.pools import PktmbufPool
    from .queue import queue_alloc
    pool = PktmbufPool(64, 0, name="warm-demo")
    q = queue_alloc()
    st = np.zeros(F_WORDS, np.int64)
    forward_loop(pool.domain.state, 0, q, q, q, q, False, 0, st, backoff_new())
    six = np.zeros(6, np.uint8)
    traffic_loop(pool.domain.state, pool.id, 0, q, q, udp_frame(64, bytes(6), bytes(6)), six, six,
                 0, st, backoff_new())
    pool.close()


# -- the orchestrator: `pktbuf demo` --------------------------------------------------------------
def _fmt_rate(x: float) -> str:
    return f"{x / 1e6:6.2f} M" if x >= 1e5 else f"{x / 1e3:6.1f} k"


def main(argv=None) -> int:
    """Run the forwarding demo: spawn forwarder + traffic processes, print live stats."""
    ap = argparse.ArgumentParser(prog="pktbuf demo", description=main.__doc__)
    ap.add_argument("--mode", choices=MODES, default="l2fwd")
    ap.add_argument("--seconds", type=float, default=6.0, help="traffic duration")
    ap.add_argument("--size", type=int, default=64, help="frame size in bytes")
    a = ap.parse_args(argv)
    print(f"pktbuf memif demo: {a.mode}, {a.size}-byte frames, {a.seconds:g} s "
          f"(compiling on first run)...", flush=True)
    warm()
    tmp = tempfile.mkdtemp(prefix="pktbuf-demo-")
    tag = f"pktbuf-demo-{os.getpid()}"
    common = ["--sock0", f"/{tag}-0", "--sock1", f"/{tag}-1", "--mode", a.mode]
    py = [sys.executable, "-c", "import sys; from pktbuf.memif import demo; "
          "sys.exit(getattr(demo, sys.argv[1])(sys.argv[2:]))"]
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    procs = []
    last: dict[str, dict] = {}
    prev: dict[str, dict] = {}
    try:
        fwd = subprocess.Popen(py + ["forwarder_main"] + common + ["--seconds", str(a.seconds + 1)],
                               stdout=subprocess.PIPE, text=True, env=env, cwd=tmp)
        procs.append(fwd)
        if fwd.stdout.readline().strip() != "READY":
            print("forwarder failed to start", file=sys.stderr)
            return 1
        gen = subprocess.Popen(py + ["traffic_main"] + common + ["--seconds", str(a.seconds),
                                                                  "--size", str(a.size)],
                               stdout=subprocess.PIPE, text=True, env=env, cwd=tmp)
        procs.append(gen)
        print(f"{'time':>6} | {'generated':>10} {'received':>10} {'Gbit/s':>7} | "
              f"{'fwd rx':>10} {'fwd tx':>10} {'fwd drops':>9}", flush=True)
        import selectors
        sel = selectors.DefaultSelector()
        for p, role in ((fwd, "fwd"), (gen, "traffic")):
            sel.register(p.stdout, selectors.EVENT_READ, role)
        open_streams = 2
        deadline = time.monotonic() + a.seconds + 60
        next_print = time.monotonic() + 1.0
        while open_streams and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.2):
                line = key.fileobj.readline()
                if not line:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if "error" in rec:
                    print(f"{rec['role']}: {rec['error']}", file=sys.stderr)
                    continue
                last[rec["role"]] = rec
            if (time.monotonic() >= next_print and "traffic" in last
                    and last["traffic"]["t"] > prev.get("traffic", {}).get("t", 0.0)):
                next_print += 1.0
                g, f = last["traffic"], last.get("fwd", {})
                pg, pf = prev.get("traffic", {}), prev.get("fwd", {})

                def rate(cur, old, k):      # per second over that process's own interval
                    dt = max(1e-3, cur.get("t", 0.0) - old.get("t", 0.0))
                    return (cur.get(k, 0) - old.get(k, 0)) / dt
                print(f"{g['t']:5.1f}s | {_fmt_rate(rate(g, pg, 'tx'))}pps {_fmt_rate(rate(g, pg, 'rx'))}pps "
                      f"{rate(g, pg, 'bytes') * 8 / 1e9:7.2f} | {_fmt_rate(rate(f, pf, 'rx'))}pps "
                      f"{_fmt_rate(rate(f, pf, 'tx'))}pps {f.get('drops', 0) - pf.get('drops', 0):9d}",
                      flush=True)
                prev = {k: dict(v) for k, v in last.items()}
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    g, f = last.get("traffic"), last.get("fwd")
    if not g or not f:
        print("demo failed: a process reported nothing", file=sys.stderr)
        return 1
    secs = max(1e-3, g["t"])
    rows = [("generated (sent into port 0)", g["tx"], g["tx"] / secs),
            ("not taken by the ring (freed)", g["drops"], None),
            ("forwarder received", f["rx"], f["rx"] / secs),
            ("forwarder sent", f["tx"], f["tx"] / secs),
            ("forwarder drops (Tx ring full)", f["drops"], None),
            ("received back" + (" on port 1" if a.mode == "l2fwd" else ""), g["rx"], g["rx"] / secs),
            ("received with wrong MACs", g["bad"], None)]
    print(f"\nsummary ({a.mode}, {a.size} B frames, {secs:.1f} s)")
    print(f"  {'counter':<34} {'packets':>12} {'pps':>12}")
    for name, n, pps in rows:
        print(f"  {name:<34} {n:>12,} {('%.2f M' % (pps / 1e6)) if pps is not None else '':>12}")
    ok = g["rx"] > 0 and g["bad"] == 0 and all(p.returncode == 0 for p in procs)
    print(f"  {'throughput':<34} {g['bytes'] * 8 / secs / 1e9:>11.2f} Gbit/s received")
    print("result:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
