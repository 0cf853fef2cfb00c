"""The ``/mempool/*`` commands: DPDK 22.11's replies (``mempool_handle_list`` and
``mempool_handle_info`` in ``lib/mempool/rte_mempool.c``) for pktbuf pools.

DPDK's fields describe its own memory layout; for a pktbuf pool they mean:

=====================  ======================================================================
``pool_id``            the pool's id in its domain's pool table (DPDK: the handler's pool)
``flags``              ``RTE_MEMPOOL_F_POOL_CREATED`` plus ``_SP_PUT``/``_SC_GET`` as set
``socket_id``          -1 (``SOCKET_ID_ANY``): pktbuf does not place pools on a NUMA node
``size``, ``cache_size``, ``populated_size``   the object count, the per-lcore cache size,
                       and the object count again (pools are populated when created)
``elt_size``           an mbuf pool: 128 + ``priv_size`` + ``data_room``, DPDK's formula; a
                       plain pool: its object stride
``header_size``,       0: pktbuf keeps each object's header in the domain's object table, and
``trailer_size``,      the mbuf pool's parameters in its pool table, not in the pool's memory
``private_data_size``
``ops_index``          0: there is one set of pool operations (a ring with per-lcore caches)
``mz_name``            ``"MP_" + name``, DPDK's memzone name
``mz_len``             the bytes of the pool's data region
``mz_hugepage_sz``     the page size backing it
``mz_socket_id``       -1; ``mz_flags``: 0
=====================  ======================================================================
"""
from __future__ import annotations

from ..buf.mbuf.layout import MBUF_DTYPE
from ..buf.mempool.layout import POOL_F_SC_GET, POOL_F_SP_PUT
from ..shm import PAGE
from ..buf.domain.pools import PktmbufPool

MBUF_SIZE = MBUF_DTYPE.itemsize   # sizeof(struct rte_mbuf)
NAME_MAX = 31                       # RTE_MEMZONE_NAMESIZE - 1: what /mempool/info matches
F_SP_PUT, F_SC_GET, F_POOL_CREATED = 0x4, 0x8, 0x10      # RTE_MEMPOOL_F_*
SOCKET_ID_ANY = -1

HELP = {
    "/mempool/list": "Returns list of available mempool. Takes no parameters",
    "/mempool/info": "Returns mempool info. Parameters: pool_name",
}


def pool_flags(pool) -> int:
    raw = int(pool.domain.state.pools[pool.id]["flags"])
    return (F_POOL_CREATED | (F_SP_PUT if raw & POOL_F_SP_PUT else 0)
            | (F_SC_GET if raw & POOL_F_SC_GET else 0))


def info(pool) -> dict:
    """``/mempool/info`` for one pool: DPDK 22.11's keys in its order."""
    if isinstance(pool, PktmbufPool):
        elt_size = MBUF_SIZE + pool.priv_size + pool.data_room
    else:
        elt_size = pool.elt_size
    return {
        "name": pool.name,
        "pool_id": pool.id,
        "flags": pool_flags(pool),
        "socket_id": SOCKET_ID_ANY,
        "size": pool.n,
        "cache_size": pool.cache_size,
        "elt_size": elt_size,
        "header_size": 0,
        "trailer_size": 0,
        "private_data_size": 0,
        "ops_index": 0,
        "populated_size": pool.n,
        "mz_name": "MP_" + pool.name,
        "mz_len": pool.region.size,
        "mz_hugepage_sz": PAGE,
        "mz_socket_id": SOCKET_ID_ANY,
        "mz_flags": 0,
    }


def lookup_name(params: str) -> str:
    """The pool name a request asks for: its first 31 bytes, as DPDK copies it."""
    return params.encode("utf-8", "replace")[:NAME_MAX].decode("utf-8", "ignore")
