"""Route adds from Python while l3fwd forwards over a shared LPM table, every packet checked.

A :class:`~pktbuf.SharedDomain` holds the mbufs, five rings and the IPv4 table
(``pktbuf.Lpm(..., domain=)``).  A forwarding process attaches and runs pktbuf's l3fwd stage
(:func:`pktbuf.apps.l3fwd.kernels.l3fwd_stage` through
:class:`~pktbuf.apps.stage.api.StageRunner`, its state built as
:func:`pktbuf.apps.l3fwd.app.make_state` builds it, with the shared table as ``lpm4``) over four
``net_ring`` ports: port 0 receives, ports 0-3 send.  In this process:

* the main thread adds ``--adds`` routes of depth 24..32 inside 10.0.0.0/12 (next hops 1-3),
  ``--batch`` at a time through :meth:`pktbuf.Lpm.add_bulk`, which raises a progress counter
  after each add with a release store; adds/s is over the whole loop, Python included;
* a thread runs a compiled pump: it takes every packet the forwarder sent, checks the port it
  left by against the model, then rewrites its destination (the next of ``--addrs`` addresses
  inside the routes' prefixes), stamps it with the progress counter read (acquire) just before
  it is sent to the forwarder again, and sends it.

The model: adds only, so an address's next hop changes exactly at the adds that cover it with a
longer prefix than the one in force; its history is computed before the run.  A packet stamped
at progress ``s0`` and taken back at ``s1`` may have been looked up in any state ``s0 ..
s1 + 1`` (the add after the last one published may be under way): its port must be the next
hop of one of them.  Everything else is an error, and so is a packet lost or dropped.

``python -m pktbuf.bench.lpm_update [--quick] [--adds N] [--batch N] [--json]``
"""
from __future__ import annotations

import argparse
import json
import os
import threading
import time

import numpy as np

from .._jit import kernel
from ..atomics import load_acquire, store_release
from ..buf.ring.kernels import ring_sc_dequeue_burst, ring_sp_enqueue_burst
from ..rawmem import addr_u8

NET, NET_BITS = 0x0A000000, 12        # routes inside 10.0.0.0/12
BASE_PORT = 1                         # 10.0.0.0/8 -> port 1 before any add
N_PORTS = 4
S_STOP, S_READY = 0, 8                # words of the control region
P_CHECKED, P_ERRORS, P_CHANGED, P_SENT, P_ROUNDS = range(5)
STAMP = 42                            # payload offset of the 8-byte progress stamp
FRAME = 60


def make_routes(n: int, seed: int):
    """``n`` distinct routes ``(prefix, depth, port)``: depth 24..32 inside the /12."""
    rng = np.random.default_rng(seed)
    seen = set()
    ips = np.empty(n, np.int64)
    depths = np.empty(n, np.int64)
    k = 0
    while k < n:
        m = 2 * (n - k) + 16
        a = NET | rng.integers(0, 1 << (32 - NET_BITS), m)
        d = rng.integers(24, 33, m)
        for x, y in zip(a.tolist(), d.tolist()):
            x &= ((1 << y) - 1) << (32 - y)
            if (x, y) not in seen and k < n:
                seen.add((x, y))
                ips[k], depths[k] = x, y
                k += 1
    ports = rng.integers(1, N_PORTS, n).astype(np.int64)
    return ips, depths, ports


def make_addrs(ips, depths, count: int, seed: int) -> np.ndarray:
    """``count`` distinct addresses, each inside a route taken evenly along the script (so
    every one changes route during the run)."""
    rng = np.random.default_rng(seed + 1)
    out = set()
    for j in np.linspace(0, ips.size - 1, count * 2).astype(np.int64).tolist():
        span = 1 << (32 - int(depths[j]))
        out.add(int(ips[j]) + int(rng.integers(0, span)))
        if len(out) == count:
            break
    return np.array(sorted(out), np.int64)


def histories(ips, depths, ports, addrs):
    """Per address ``i``: ``(seq, port)`` entries ``off[i]:off[i + 1]`` in seq order -- the
    port in force from progress ``seq`` on (seq 0: the /8's)."""
    best = np.full(addrs.size, 8, np.int64)
    ent: list[list] = [[(0, BASE_PORT)] for _ in range(addrs.size)]
    lo = np.searchsorted(addrs, ips)
    hi = np.searchsorted(addrs, ips + (np.int64(1) << (32 - depths)))
    for k in np.nonzero(hi > lo)[0].tolist():
        d = int(depths[k])
        for i in range(int(lo[k]), int(hi[k])):
            if d > best[i]:
                best[i] = d
                ent[i].append((k + 1, int(ports[k])))
    off = np.zeros(addrs.size + 1, np.int64)
    off[1:] = np.cumsum([len(e) for e in ent])
    flat = np.array([x for e in ent for x in e], np.int64).reshape(-1, 2)
    return off, flat[:, 0].copy(), flat[:, 1].copy()


@kernel
def publish(a, i, v):
    """``a[i] = v`` with a release store (from Python)."""
    store_release(a, i, v)


@kernel
def port_ok(off, hseq, hport, i, s0, s1, port):
    """Whether ``port`` is the next hop of address ``i`` in some state ``s0 .. s1 + 1``."""
    j = off[i]
    end = off[i + 1]
    while j + 1 < end and hseq[j + 1] <= s0:
        j += 1
    while j < end and hseq[j] <= s1 + 1:
        if hport[j] == port:
            return True
        j += 1
    return False


@kernel
def _write(mb, h, addr, stamp):
    m = mb[h]
    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), FRAME)
    p[22] = 64
    p[30] = (addr >> 24) & 0xFF
    p[31] = (addr >> 16) & 0xFF
    p[32] = (addr >> 8) & 0xFF
    p[33] = addr & 0xFF
    p[24] = 0
    p[25] = 0
    s = 0
    for k in range(14, 34, 2):
        s += (np.int64(p[k]) << 8) | np.int64(p[k + 1])
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    c = (~s) & 0xFFFF
    p[24] = c >> 8
    p[25] = c & 0xFF
    for k in range(8):
        p[STAMP + k] = (stamp >> (8 * k)) & 0xFF


@kernel
def _read(mb, h):
    m = mb[h]
    p = addr_u8(np.int64(m.buf_addr) + np.int64(m.data_off), FRAME)
    a = (np.int64(p[30]) << 24) | (np.int64(p[31]) << 16) | (np.int64(p[32]) << 8) \
        | np.int64(p[33])
    s = np.int64(0)
    for k in range(8):
        s |= np.int64(p[STAMP + k]) << (8 * k)
    return a, s


@kernel
def _find(addrs, a):
    lo = 0
    hi = addrs.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if addrs[mid] < a:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < addrs.shape[0] and addrs[lo] == a else -1


@kernel
def pump(dom, rxh, rxs, txh, txs, ctl, progress, addrs, off, hseq, hport, stats, bad, buf):
    """Until ``ctl[S_STOP]``: take what the forwarder sent on ports 0..3 (``txh[k]``,
    ``txs[k]``), check each packet's port, re-address, stamp and send it to port 0's Rx ring.
    ``stats``: checked, errors, packets whose port was not the /8's, sent, rounds; ``bad``:
    the first errors as (address, s0, s1, port); ``buf``: int32 scratch of 64."""
    mb = dom.mb
    nxt = 0
    na = addrs.shape[0]
    while load_acquire(ctl, S_STOP) == 0:
        stats[P_ROUNDS] += 1
        for k in range(N_PORTS):
            n = ring_sc_dequeue_burst(txh[k], txs[k], buf, 64)
            if n <= 0:
                continue
            s1 = load_acquire(progress, 0)
            for j in range(n):
                a, s0 = _read(mb, buf[j])
                i = _find(addrs, a)
                if i < 0 or not port_ok(off, hseq, hport, i, s0, s1, k):
                    e = stats[P_ERRORS]
                    if e < bad.shape[0]:
                        bad[e, 0] = a
                        bad[e, 1] = s0
                        bad[e, 2] = s1
                        bad[e, 3] = k
                    stats[P_ERRORS] += 1
                elif k != BASE_PORT:
                    stats[P_CHANGED] += 1
                stats[P_CHECKED] += 1
                s = load_acquire(progress, 0)
                _write(mb, buf[j], addrs[nxt], s)
                nxt += 1
                if nxt == na:
                    nxt = 0
            sent = 0
            while sent < n:           # room for every packet: the ring holds them all
                sent += ring_sp_enqueue_burst(rxh, rxs, buf[sent:], n - sent)
            stats[P_SENT] += sent
    return 0


def _frame(addr: int) -> bytes:
    eth = bytes((2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2)) + b"\x08\x00"
    ip = bytes((0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 192, 168, 0, 1)) + \
        addr.to_bytes(4, "big")
    return (eth + ip + bytes(8) + bytes(8)).ljust(FRAME, b"\0")


def _state(lpm4):
    """The l3fwd stage's state as ``make_state`` builds it, with ``lpm4`` the shared table."""
    from types import SimpleNamespace

    from ..apps.l3fwd import kernels as K
    from ..apps.l3fwd.app import make_state
    from ..drivers.common.kinds import MAX_PORTS
    from ..net.hash.api import Hash
    from ..net.lpm.api import Lpm6
    tables = SimpleNamespace(lpm4=lpm4, lpm6=Lpm6(8, 1), em4=Hash(8, 16), em6=Hash(8, 48))
    cfg = np.zeros(K.CFG_WORDS, np.int64)
    cfg[K.C_LOOKUP] = K.LOOKUPS.index("lpm")
    cfg[K.C_PORTMASK] = (1 << N_PORTS) - 1
    eth = np.zeros((MAX_PORTS, 12), np.uint8)
    for p in range(N_PORTS):
        eth[p, :6] = (2, 0, 0, 0, 0, p)
        eth[p, 6:12] = (2, 0x70, 0x6B, 0x74, 0, p)
    return make_state(tables, cfg, eth)


def _ports(pool, rx, txs):
    import pktbuf

    from ..drivers.ring.api import RingPort
    ports = pktbuf.Ports(pool)
    ports.add(RingPort([rx], [txs[0]], pool=pool, name="net_ring0", port_id=0))
    for k in range(1, N_PORTS):
        ports.add(RingPort([], [txs[k]], pool=pool, name=f"net_ring{k}", port_id=k))
    return ports


def _stage(lpm4):
    from ..apps.l3fwd import kernels as K
    from ..apps.stage.api import Stage
    return Stage(K.l3fwd_stage, _state(lpm4), counters=K.COUNTERS,
                 drop_reasons=K.DROP_REASONS)


def forwarder(sd, q):
    """The forwarding process: l3fwd's stage on port 0's Rx queue until told to stop."""
    from ..apps.stage.api import StageRunner
    from ..net.lpm.api import Lpm
    try:
        pool = sd.pool("mbufs")
        txs = [sd.ring(f"tx{k}") for k in range(N_PORTS)]
        ports = _ports(pool, sd.ring("rx0"), txs)
        ctl = sd.region("ctl").view(np.int64, 0, 64)
        st = _stage(Lpm.attach(sd, "routes"))
        st.check(ports)
        run = StageRunner(ports, st, [(0, 0, 0)], lcore=sd.lcore, burst=32)
        publish(ctl, S_READY, 1)
        while ctl[S_STOP] == 0:
            run.run(0.05)
        counts = {p: run.port_counts(p) for p in range(N_PORTS)}
        q.put(("done", counts, run.drop_counts()))
        ports.close()
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put(("error", repr(e), None))


def _warm(pool, lpm_cls):
    """Compile the forwarder's stage loop here first (concurrent compiles corrupt caches)."""
    from ..buf.ring.api import Ring
    publish(np.zeros(64, np.int64), 0, 0)
    lpm = lpm_cls(16, 4)
    r = [Ring(64, sp=True, sc=True) for _ in range(N_PORTS + 1)]
    ports = _ports(pool, r[0], r[1:])
    try:
        _stage(lpm).check(ports)
    finally:
        ports.close()


def run(quick: bool = False, adds: int | None = None, batch: int = 256, n_addrs: int = 4096,
        pkts: int = 512, seed: int = 1) -> dict:
    import multiprocessing as mp

    import pktbuf

    from ..errors import PktbufError
    from ..net.lpm.api import Lpm
    from ..shm import Region
    adds = adds or (20_000 if quick else 200_000)
    ips, depths, ports = make_routes(adds, seed)
    addrs = make_addrs(ips, depths, min(n_addrs, adds), seed)
    off, hseq, hport = histories(ips, depths, ports, addrs)
    name = f"lpmupd{os.getpid()}"
    sd = pktbuf.SharedDomain.create(name, max_objects=1 << 14, max_ring_slots=1 << 14,
                                    max_data_bytes=1 << 26)
    fwd = None
    try:
        pool = sd.pktmbuf_pool("mbufs", 2 * pkts + 64, 0)
        rx = sd.create_ring("rx0", 1024, sp=True, sc=True)
        txs = [sd.create_ring(f"tx{k}", 1024, sp=True, sc=True) for k in range(N_PORTS)]
        lpm = Lpm(adds + 16, 1 << (32 - NET_BITS - 8), domain=sd, name="routes")
        lpm.add(NET, 8, BASE_PORT)
        ctlr = Region(4096, f"pktbuf-lpmupd-{os.getpid()}")
        sd.add_region("ctl", ctlr)
        ctl = ctlr.view(np.int64, 0, 64)
        progress = np.zeros(8, np.int64)
        q = mp.get_context("spawn").Queue()
        fwd = sd.spawn(forwarder, args=(q,), warm=lambda: _warm(pool, Lpm))
        t0 = time.monotonic()
        while not ctl[S_READY]:
            if not fwd.is_alive() or time.monotonic() - t0 > 300:
                raise PktbufError("the forwarding process did not start: "
                                  f"{q.get(timeout=1) if not q.empty() else 'no word'}")
            time.sleep(0.01)
        # the first packets, then the pump
        hs = []
        for j in range(pkts):
            m = pool.alloc()
            m.append_bytes(_frame(int(addrs[j % addrs.size])))
            hs.append(m.handle)
        rx.enqueue_bulk(np.array(hs, np.int32))
        stats = np.zeros(8, np.int64)
        bad = np.zeros((16, 4), np.int64)
        pump(pool.domain.state, rx.hdr, rx.slots, tuple(t.hdr for t in txs),
             tuple(t.slots for t in txs), np.ones(64, np.int64), progress, addrs, off, hseq,
             hport, np.zeros(8, np.int64), bad, np.zeros(64, np.int32))  # compiled first
        th = threading.Thread(target=pump, args=(
            pool.domain.state, rx.hdr, rx.slots, tuple(t.hdr for t in txs),
            tuple(t.slots for t in txs), ctl, progress, addrs, off, hseq, hport, stats, bad,
            np.zeros(64, np.int32)), daemon=True)
        th.start()
        # add_bulk compiled (or loaded) before the clock starts: no adds, no progress
        lpm.add_bulk(ips[:0], depths[:0], ports[:0], progress=np.zeros(1, np.int64))
        time.sleep(0.2)
        before = int(stats[P_CHECKED])
        t1 = time.perf_counter()
        for b in range(0, adds, batch):
            lpm.add_bulk(ips[b:b + batch], depths[b:b + batch], ports[b:b + batch],
                         progress=progress)
        t_add = time.perf_counter() - t1
        during = int(stats[P_CHECKED]) - before
        time.sleep(0.2)
        publish(ctl, S_STOP, 1)
        th.join(30)
        kind, counts, drops = q.get(timeout=60)
        if kind != "done":
            raise PktbufError(f"the forwarding process failed: {counts}")
        fwd.join(30)
        # every packet is in a ring or was checked: none lost
        in_rings = len(rx) + sum(len(t) for t in txs)
        lost = pkts - in_rings
        tx_dropped = sum(c["tx_dropped"] for c in counts.values())
        return {
            "adds": adds, "batch": batch, "add_seconds": t_add, "adds_per_s": adds / t_add,
            "checked": int(stats[P_CHECKED]), "checked_during_adds": during,
            "pkts_per_s_during_adds": during / t_add, "errors": int(stats[P_ERRORS]),
            "changed_port": int(stats[P_CHANGED]), "first_errors": bad[:min(16, int(
                stats[P_ERRORS]))].tolist(), "tx_dropped": tx_dropped,
            "stage_drops": drops, "in_rings_at_end": in_rings, "pkts": pkts,
            "lost": lost, "progress": int(progress[0]), "rules": len(lpm),
            "addresses": int(addrs.size), "quick": quick,
        }
    finally:
        if fwd is not None and fwd.is_alive():
            fwd.join(10)
            if fwd.is_alive():
                fwd.kill()
        sd.close(force=True)


def print_report(r: dict, out=None) -> None:
    p = print if out is None else (lambda *a: print(*a, file=out))
    p(f"lpm_update: {r['adds']} adds of /24-/32 routes from Python, {r['batch']} per add_bulk "
      f"call, while l3fwd forwards in another process")
    p(f"  adds/s            {r['adds_per_s']:,.0f}  ({r['add_seconds']:.3f} s)")
    p(f"  packets checked   {r['checked']:,} ({r['checked_during_adds']:,} during the adds, "
      f"{r['pkts_per_s_during_adds']:,.0f}/s); left by a new route {r['changed_port']:,}")
    p(f"  wrong port        {r['errors']}   lost {r['lost']}   tx dropped "
      f"{r['tx_dropped']}   stage drops {r['stage_drops']}")
    if r["errors"]:
        p(f"  first errors (address, s0, s1, port): {r['first_errors']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pktbuf bench lpm_update", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20,000 adds")
    ap.add_argument("--adds", type=int, default=None)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.adds is not None and not 1 <= a.adds <= 1 << 22:
        ap.error("--adds must be in 1..4194304")
    if not 1 <= a.batch <= 1 << 20:
        ap.error("--batch must be in 1..1048576")
    r = run(a.quick, a.adds, a.batch)
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        print_report(r)
    ok = r["errors"] == 0 and r["lost"] == 0 and r["checked_during_adds"] > 0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
