"""Peers of a :class:`~pktbuf.SharedDomain`: who is attached, who died, and what a dead one left.

A process is named by its pid and its start time (``/proc/<pid>/stat``), so a reused pid is
not taken for the process that held it; it is alive while its pidfd does not poll readable.
:meth:`~pktbuf.SharedDomain.reap` takes a dead process's lcores (owner pid -> ``-pid``, so two
reapers do not both work on them), puts back what its mempool caches provably held, counts
the rest and what it held as lost (:class:`PeerReport`), lists the rings it left broken and
frees the lcores.  See ``docs/multiprocess.md`` for what is reclaimed and what cannot be.
These are methods :class:`~pktbuf.SharedDomain` inherits (:class:`_PeerWatch`).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from ...errors import InvalidArgument, PeerDied, check_count, check_timeout
from ...fdwait import readable
from ...lcore import MAX_LCORE
from ..mempool import kernels as MK
from ..mempool.layout import (CACHE_BUSY_FLUSH, CACHE_BUSY_FLUSH_HALF, CACHE_LINE_WORDS,
                              CACHE_MAX_SIZE, CACHE_W_BUSY, MAX_POOLS, OBJ_FREE, POOL_F_USED,
                              STAT_GET_SUCCESS_OBJS, STAT_PUT_OBJS, STAT_WORDS)
from ..mempool.peers import slot_cas, slot_store
from ..ring.kernels import CONS_HEAD, CONS_TAIL, H_MASK, PROD_HEAD, PROD_TAIL, RING_HDR_WORDS
from .shared_header import (E_LIVE, K_POOL, K_RING, LC_OWNER, LC_START, LC_WORDS, MAX_ENTRIES,
                            W_PRIMARY, W_PRIMARY_START)

_BROKEN_WAIT_S = 0.05        # a ring whose head and tail differ this long, unchanged, is broken


def _starttime(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot), None if it is gone (or a
    zombie): with the pid, it names one process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rindex(b")") + 2:].split()
    if rest[0] in (b"Z", b"X"):
        return None
    return int(rest[19])


def _alive(pid: int, start: int = 0) -> bool:
    """Is the process ``pid`` (started at ``start``, 0 = unknown) still running?  A pidfd
    that polls readable means it has exited; a different start time means the pid was
    reused by another process."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except PermissionError:       # pragma: no cover - not ours to open: ask /proc only
        fd = None
    if fd is not None:
        try:
            if readable([fd], 0):
                return False
        finally:
            os.close(fd)
    st = _starttime(pid)
    return st is not None and (start == 0 or st == start)


@dataclass
class PeerReport:
    """What :meth:`SharedDomain.reap` found of one dead process.

    * ``cache_reclaimed`` -- per pool name, the free objects that were in its lcores' caches
      and went back to the pool (safe: nobody else can reach a cache of a dead lcore).
    * ``cache_dropped`` -- per pool, the length of a cache that cannot be trusted (it died
      inside a refill, or the cache fails the check: an object outside the pool, twice, not
      free, or also in the ring): the cache is emptied without flushing and that many
      objects are counted lost.  (Killed inside a put's flush or a cache flush, the cache's
      busy word says which slots are still its own: those are reclaimed, nothing dropped.)
    * ``held`` -- per pool, objects its lcores took out of the pool and did not put back
      (gets minus puts since it claimed the lcore): the mbufs it held when it died, counted
      as lost.  Exact when each lcore frees what it allocates; negative when it freed mbufs
      other lcores had allocated.
    * ``broken_rings`` -- rings (``"pool:<name>"`` for a pool's own ring) whose head and tail
      differ and do not move: a producer or consumer died between its two updates, and every
      multi-producer/-consumer call on that ring will wait forever.
    """

    pid: int
    lcores: list
    cache_reclaimed: dict = field(default_factory=dict)
    cache_dropped: dict = field(default_factory=dict)
    held: dict = field(default_factory=dict)
    broken_rings: list = field(default_factory=list)

    @property
    def lost(self) -> dict:
        """Per pool: objects counted lost because of this process (held + dropped)."""
        out = {}
        for k in set(self.held) | set(self.cache_dropped):
            n = max(self.held.get(k, 0), 0) + self.cache_dropped.get(k, 0)
            if n:
                out[k] = n
        return out


class _PeerWatch:
    """Peer liveness, reaping and reclaim of a :class:`~pktbuf.SharedDomain` (a mixin: it
    reads the header's views and uses the domain's lcore table and registry)."""

    def peers(self) -> dict:
        """``{pid: {"lcores": [...], "alive": bool}}`` of every attached process but this
        one (the primary included, seen from a secondary)."""
        out = {}
        for p, lc in self._owners():
            if p == self.pid:
                continue
            d = out.setdefault(p, {"lcores": [], "alive": True})
            d["lcores"].append(lc)
            if p > 0:
                d["alive"] = d["alive"] and _alive(p, int(self._lct[lc * LC_WORDS + LC_START]))
        prim = int(self._hdr[W_PRIMARY])
        if prim != self.pid and prim not in out:
            out[prim] = {"lcores": [], "alive": _alive(prim, int(self._hdr[W_PRIMARY_START]))}
        return out

    def dead_peers(self) -> list[int]:
        """Pids of attached processes that died without detaching (not reaped yet)."""
        return sorted(p for p, d in self.peers().items() if p > 0 and not d["alive"])

    def check_peers(self) -> None:
        """Raise :class:`~pktbuf.errors.PeerDied` if an attached process has died."""
        dead = self.dead_peers()
        if dead:
            raise PeerDied(f"processes {dead} attached to shared domain {self.name!r} died "
                           "without detaching", pids=dead)

    def wait_peer_death(self, timeout: float | None = None) -> list[int]:
        """Block (on the peers' pidfds) until an attached process dies or ``timeout`` seconds
        pass; returns the dead pids (empty on timeout).  ``timeout``: None (or ``inf``) waits
        for ever, 0 only looks; a negative number, NaN or a non-number raises InvalidArgument.
        With no live peer to watch it sleeps ``timeout`` (None: returns at once, as no death
        can come).  Processes that attach while this waits are not watched."""
        timeout = check_timeout(timeout)
        dead = self.dead_peers()
        if dead:
            return dead
        fds = []
        try:
            for pid, d in self.peers().items():
                if pid > 0 and d["alive"]:
                    try:
                        fds.append(os.pidfd_open(pid))
                    except ProcessLookupError:
                        return self.dead_peers()
            if fds:
                readable(fds, timeout)
            elif timeout:
                time.sleep(timeout)
        finally:
            for fd in fds:
                os.close(fd)
        return self.dead_peers()

    def reap(self, pid: int | None = None) -> list[PeerReport]:
        """Reclaim what dead attached processes left (``pid``: that one only) and free their
        lcore ids; returns one :class:`PeerReport` each.  Any attached process may call it;
        a live ``pid`` raises InvalidArgument.  See docs/multiprocess.md for what is
        reclaimed and what is counted lost."""
        self._open()
        owners = self._owners()
        if pid is not None:
            pid = check_count(pid, "pid", lo=1)
            lcs = [lc for p, lc in owners if p == pid]
            if not lcs:
                raise InvalidArgument(f"process {pid} holds no lcore of this domain")
            if any(_alive(pid, int(self._lct[lc * LC_WORDS + LC_START])) for lc in lcs):
                raise InvalidArgument(f"process {pid} is alive")
            dead = [pid]
        else:
            dead = [p for p in self.dead_peers() if p != self.pid]
        reports = []
        for p in dead:
            mine = []
            for q, lc in owners:          # make the reclaim ours: owner pid -> -pid
                if q == p and int(slot_cas(self._lct, lc * LC_WORDS + LC_OWNER, p, -p)) == p:
                    mine.append(lc)
            if not mine:
                continue                    # another process reaps it
            try:
                reports.append(self._reclaim(p, mine))
            finally:
                for lc in mine:
                    self._lct[lc * LC_WORDS + LC_START] = 0
                    slot_store(self._lct, lc * LC_WORDS + LC_OWNER, 0)
        return reports

    def _pool_names(self) -> dict:
        names = {}
        for i in range(1, MAX_ENTRIES):
            e = self._ent[i]
            if int(e["state"]) == E_LIVE and int(e["kind"]) == K_POOL:
                names[int(e["pool"])] = self._entry_name(i)
        return names

    def _reclaim(self, pid: int, lcs: list[int]) -> PeerReport:
        st = self.domain.state
        rep = PeerReport(pid, sorted(lcs))
        stats = st.stats.reshape(MAX_POOLS, MAX_LCORE + 1, STAT_WORDS)
        names = self._pool_names()
        pid_of = {}
        for p in range(MAX_POOLS):
            P = st.pools[p]
            if not int(P["flags"]) & POOL_F_USED:
                continue
            pname = names.get(p, f"#{p}")
            pid_of[pname] = p
            base, size, cs = int(P["obj_base"]), int(P["size"]), int(P["cache_size"])
            in_ring = self._pool_ring_contents(p)
            for lc in lcs:
                if cs:
                    self._reclaim_cache(rep, pname, p, lc, base, size, cs, in_ring)
                got = int(stats[p, lc, STAT_GET_SUCCESS_OBJS]) - int(self._base[lc, p, 0])
                put = int(stats[p, lc, STAT_PUT_OBJS]) - int(self._base[lc, p, 1])
                if got - put:
                    rep.held[pname] = rep.held.get(pname, 0) + got - put
        for k, n in rep.lost.items():
            self._lost[pid_of[k]] += n
        rep.broken_rings = self.broken_rings()
        return rep

    def _reclaim_cache(self, rep, pname, p, lc, base, size, cs, in_ring) -> None:
        """Lcore ``lc``'s cache of pool ``p``, its owner dead: flush what is provably its own
        to the ring; empty the rest and count it in ``cache_dropped``."""
        st = self.domain.state
        line = (p * MAX_LCORE + lc) * CACHE_LINE_WORDS
        clen = int(st.cache_len[line])
        busy = int(st.cache_len[line + CACHE_W_BUSY])
        c0 = (p * MAX_LCORE + lc) * CACHE_MAX_SIZE
        if not 0 <= clen <= cs:
            busy = -1                        # garbage: trust nothing
        if busy == CACHE_BUSY_FLUSH_HALF:
            # killed inside a put's flush: the bottom half went (or was going) to the ring and
            # the length was not stored yet; the top [half, clen) is untouched and only ours
            half = cs >> 1
            top = st.cache_objs[c0 + half:c0 + clen].copy()
            st.cache_objs[c0:c0 + top.size] = top
            clen, busy = top.size, 0
            st.cache_len[line] = clen
            st.cache_len[line + CACHE_W_BUSY] = 0
        elif busy == CACHE_BUSY_FLUSH:       # everything went (was going) to the ring
            clen, busy = 0, 0
            st.cache_len[line] = 0
            st.cache_len[line + CACHE_W_BUSY] = 0
        objs = st.cache_objs[c0:c0 + max(clen, 0)].astype(np.int64)
        ok = busy == 0
        if ok and clen:
            inside = (objs >= base) & (objs < base + size)
            ok = (bool(inside.all()) and np.unique(objs).size == objs.size
                  and bool((st.obj[objs]["state"] == OBJ_FREE).all())
                  and not np.isin(objs, in_ring).any())
        if ok:
            if clen:
                MK.mempool_cache_flush(st, p, lc)
                rep.cache_reclaimed[pname] = rep.cache_reclaimed.get(pname, 0) + clen
            return
        # killed inside a refill (CACHE_BUSY_REFILL), or the cache is not consistent: which
        # slots hold objects nobody else has cannot be told, so none goes back (a double in
        # the ring would corrupt the pool); the old length is what is counted lost
        st.cache_len[line] = 0
        st.cache_len[line + CACHE_W_BUSY] = 0
        rep.cache_dropped[pname] = rep.cache_dropped.get(pname, 0) + max(clen, 0)

    def _pool_ring_contents(self, p: int) -> np.ndarray:
        st = self.domain.state
        ho = p * RING_HDR_WORDS
        hdr = st.ring_hdr
        mask = int(hdr[ho + H_MASK])
        cons, prod = int(hdr[ho + CONS_TAIL]), int(hdr[ho + PROD_TAIL])
        n = (prod - cons) & 0xFFFFFFFF
        rb = int(st.pools[p]["ring_base"])
        idx = (cons + np.arange(min(n, mask + 1), dtype=np.int64)) & mask
        return st.ring_slots[rb + idx].astype(np.int64)

    def broken_rings(self) -> list[str]:
        """Rings of the domain (``"pool:<name>"`` for a pool's own ring) whose producer or
        consumer head and tail differ and stay so: someone died between its two updates."""
        self._open()
        st = self.domain.state
        cands = []
        names = self._pool_names()
        for p in range(MAX_POOLS):
            if int(st.pools[p]["flags"]) & POOL_F_USED:
                cands.append((f"pool:{names.get(p, '#%d' % p)}",
                              st.ring_hdr[p * RING_HDR_WORDS:(p + 1) * RING_HDR_WORDS]))
        for i in range(1, MAX_ENTRIES):
            e = self._ent[i]
            if int(e["state"]) == E_LIVE and int(e["kind"]) == K_RING:
                nm = self._entry_name(i)
                cands.append((nm, self.ring(nm).hdr))

        def snap(h):
            return (int(h[PROD_HEAD]), int(h[PROD_TAIL]), int(h[CONS_HEAD]), int(h[CONS_TAIL]))

        first = [(nm, h, snap(h)) for nm, h in cands]
        first = [(nm, h, s) for nm, h, s in first if s[0] != s[1] or s[2] != s[3]]
        if not first:
            return []
        # in flight or broken: an operation in progress finishes within microseconds; one
        # whose owner died never does.  Re-read until every candidate has moved or the wait
        # is over.
        deadline = time.monotonic() + _BROKEN_WAIT_S
        while first and time.monotonic() < deadline:
            time.sleep(0.001)
            first = [(nm, h, s) for nm, h, s in first if snap(h) == s]
        return [nm for nm, h, s in first]

    def lost(self, name: str) -> int:
        """Objects of pool ``name`` counted lost by :meth:`reap` (held by, or stranded in a
        cache of, processes that died)."""
        return int(self._lost[self.pool(name).id])
