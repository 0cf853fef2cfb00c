"""The lcore table of a :class:`~pktbuf.SharedDomain`: lcore ids unique across processes.

Each lcore id has a slot in the header: the pid of the process that holds it (0 when free,
``-pid`` while a reaper works on it) and that process's start time.  A process claims an id
with a compare-and-swap of 0 to its pid, so no two attached processes hold the same id.  It
also claims the ids its threads already use and binds the attaching thread to its id; its
other threads get ``LCORE_ANY`` from then on (no automatic ids).  Claiming an id starts the
"held" accounting of that lcore (the baselines :meth:`~pktbuf.SharedDomain.reap` counts
from).  These are methods :class:`~pktbuf.SharedDomain` inherits (:class:`_LcoreTable`).
"""
from __future__ import annotations

from ...errors import LcoreBusy, PeerDied
from ...lcore import MAX_LCORE, bind, held_lcores, set_auto_floor
from ..mempool.layout import MAX_POOLS, STAT_GET_SUCCESS_OBJS, STAT_PUT_OBJS, STAT_WORDS
from ..mempool.peers import slot_cas, slot_load
from .shared_header import LC_OWNER, LC_START, LC_WORDS
from .shared_peers import _alive, _starttime


class _LcoreTable:
    """Claiming and releasing lcore ids of a :class:`~pktbuf.SharedDomain` (a mixin: it uses
    the header's lcore table, ``_lct``, and the "held" baselines, ``_base``)."""

    def _owners(self) -> list[tuple[int, int]]:
        """(pid, lcore) of every claimed lcore (a pid < 0 is being reaped)."""
        out = []
        for lc in range(MAX_LCORE):
            o = int(slot_load(self._lct, lc * LC_WORDS + LC_OWNER))
            if o:
                out.append((o, lc))
        return out

    def _claim_one(self, lc: int) -> bool:
        """Claim ``lc`` for this process; False if taken (raises for a dead owner only
        when asked for ``lc`` explicitly, by the caller)."""
        idx = lc * LC_WORDS + LC_OWNER
        old = int(slot_cas(self._lct, idx, 0, self.pid))
        if old == 0:
            self._lct[lc * LC_WORDS + LC_START] = _starttime(self.pid) or 0
            self._lcores.append(lc)
            # the "held" accounting counts from here: gets minus puts of this row now
            st = self.domain.state.stats.reshape(MAX_POOLS, MAX_LCORE + 1, STAT_WORDS)
            self._base[lc, :, 0] = st[:, lc, STAT_GET_SUCCESS_OBJS]
            self._base[lc, :, 1] = st[:, lc, STAT_PUT_OBJS]
            return True
        return old == self.pid

    def _refuse(self, lc: int):
        o = int(slot_load(self._lct, lc * LC_WORDS + LC_OWNER))
        if o < 0:
            raise LcoreBusy(f"lcore {lc} is being reclaimed from dead process {-o}")
        if o and not _alive(o, int(self._lct[lc * LC_WORDS + LC_START])):
            raise PeerDied(f"lcore {lc} is held by process {o}, which died without detaching: "
                           "reap it first (SharedDomain.reap)", pids=[o])
        raise LcoreBusy(f"lcore {lc} is held by process {o}")

    def _claim_lcores(self, lcore) -> None:
        try:
            for lc in held_lcores():          # ids this process's threads use already
                if not self._claim_one(lc):
                    self._refuse(lc)
            if lcore is None:
                lcore = next((lc for lc in range(MAX_LCORE) if self._claim_one(lc)), None)
                if lcore is None:
                    raise LcoreBusy(f"all {MAX_LCORE} lcores of the domain are held")
            elif not self._claim_one(lcore):
                self._refuse(lcore)
            self._floor = set_auto_floor(MAX_LCORE)   # no more automatic ids here
            self._binding = bind(lcore)
            self.lcore = lcore
        except BaseException:
            self._release_lcores()
            raise

    def _release_lcores(self) -> None:
        for lc in self._lcores:
            slot_cas(self._lct, lc * LC_WORDS + LC_OWNER, self.pid, 0)
        self._lcores = []

    def lcores(self) -> dict:
        """``{lcore: pid}`` of every claimed lcore id (a negative pid is being reaped)."""
        return {lc: p for p, lc in self._owners()}
