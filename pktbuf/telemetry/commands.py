"""pktbuf's own commands, under ``/pktbuf/``: ``/pktbuf/version``, ``/pktbuf/domain`` and
``/pktbuf/ports``.

Replies follow DPDK's shapes (objects of numbers and strings, keys in ``[0-9A-Za-z_/]``) so
Telegraf's dpdk input can collect them as ``additional_commands``.
"""
from __future__ import annotations

import platform

import numba
import numpy as np

from ..buf.domain.pools import PktmbufPool

HELP = {
    "/pktbuf/version": "Returns the versions of pktbuf, Numba, NumPy and Python. "
                       "Takes no parameters",
    "/pktbuf/domain": "Returns the pool table of pktbuf's domain: per pool id its name, "
                      "size and counts. Takes no parameters",
    "/pktbuf/ports": "Returns the ports: per port id its name and driver. Takes no parameters",
}


def version() -> dict:
    from .. import __version__
    return {"pktbuf": __version__, "numba": numba.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def _pool_row(pool) -> dict:
    return {"name": pool.name, "mbuf": int(isinstance(pool, PktmbufPool)),
            "size": pool.n, "cache_size": pool.cache_size, "elt_size": pool.elt_size,
            "avail": pool.avail_count, "in_use": pool.in_use_count}


def domain(dom) -> dict:
    """``{"pool_count": N, "pools": {"<id>": {name, mbuf, size, cache_size, elt_size, avail,
    in_use}}}`` for domain ``dom`` (None: no domain yet, nothing to show).

    ``avail`` and ``in_use`` are snapshots read without stopping anyone (ring and cache
    counters, as ``rte_mempool_avail_count`` reads them)."""
    pools = {}
    if dom is not None:
        for _ in range(3):            # the pool dict may change size under us: read again
            try:
                live = list(dom.pools)
                break
            except RuntimeError:
                continue
        else:
            live = []
        for p in live:
            if not p.closed:
                try:
                    pools[str(p.id)] = _pool_row(p)
                except Exception:     # closed between the check and the read
                    continue
    return {"pool_count": len(pools), "pools": pools}


def ports(shown: dict) -> dict:
    """``{"<port id>": {"name": .., "driver": ..}}`` for the ports shown, by id (the driver is
    not part of DPDK 22.11's ``/ethdev/info``)."""
    return {str(pid): {"name": str(p.name), "driver": str(getattr(p, "driver", ""))}
            for pid, p in sorted(shown.items())}
