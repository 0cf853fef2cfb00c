"""Software RSS for plain Python: :class:`Rss`, a key, its lookup table and a redirection table.

    rss = Rss(queues=4)                       # DPDK's common default key, 128-entry RETA
    rss.hash_bulk(pool.domain, mbufs)         # hash.rss + RTE_MBUF_F_RX_RSS_HASH, as a NIC
    q = rss.queues(pool.domain, mbufs)        # the Rx queue of each packet

Every argument is checked here and bad ones raise from :mod:`pktbuf.errors`; the work is done
by the kernels of :mod:`pktbuf.net.rss` (callable from ``@njit`` code through
:mod:`pktbuf.kernels` with :attr:`Rss.table` and :attr:`Rss.reta`).  docs/rss.md has the
definitions.
"""
from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...errors import (E_OK, InvalidArgument, check_count, check_flag, raise_for)
from .reta import (RETA_GROUP_SIZE, reta_init, reta_queue, reta_update,
                   rss_queue_bulk)
from .thash import (DEFAULT_RSS_KEY, KEY_LEN, SYMMETRIC_RSS_KEY, TUPLE_MAX, key_array,
                    new_table, thash_lut, thash_table_init)
from .tuple import rss_hash_bulk, rss_hash_frame, rss_tuple
from ...buf.domain.entry import py_mbuf_status

KEY_LEN_MAX = 255            # rte_eth_rss_conf.rss_key_len is a uint8_t


@kernel
def _py_check(dom, mbufs, n):
    """-1 if every handle of ``mbufs[:n]`` is NULL or an mbuf the application holds, else the
    index of the first one that is not; its code in the second value."""
    for k in range(n):
        h = mbufs[k]
        if h != -1:
            rc = py_mbuf_status(dom, h)
            if rc < 0:
                return k, rc
    return -1, E_OK


def domain_state(domain):
    """A Domain, or anything with a ``domain`` (a pool): (domain, its state)."""
    d = getattr(domain, "domain", domain)
    st = getattr(d, "state", None)
    if st is None or not hasattr(d, "handles"):
        raise InvalidArgument(f"expected a Domain or a pool, got {type(domain).__name__}")
    return d, st


def _as_bytes(v, name: str) -> bytes:
    if isinstance(v, np.ndarray):
        if v.dtype != np.uint8 or v.ndim != 1:
            raise InvalidArgument(f"{name} must be bytes or a 1-d uint8 array")
        return v.tobytes()
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"{name} must be bytes, got {type(v).__name__}")
    return bytes(v)


class Rss:
    """A software RSS configuration: Toeplitz key, hash types, redirection table.

    ``key``: None (:data:`~pktbuf.net.rss.thash.DEFAULT_RSS_KEY`, or with ``symmetric=True``
    :data:`~pktbuf.net.rss.thash.SYMMETRIC_RSS_KEY`) or 40 .. 255 bytes, a multiple of 4 (only the
    first 40 take part in any hash).  ``symmetric`` with an explicit key is an error.
    ``l4``: hash the TCP/UDP ports too (else addresses only, DPDK's ``RTE_ETH_RSS_IP``).
    ``reta_size``: a power of two, 1 .. 65536 (NICs: 64 .. 512); ``queues``: 1 .. 65535,
    filled round robin.
    """

    def __init__(self, key=None, *, symmetric: bool = False, l4: bool = True,
                 reta_size: int = 128, queues: int = 1):
        symmetric = check_flag(symmetric, "symmetric")
        self.l4 = check_flag(l4, "l4")
        if key is None:
            key = SYMMETRIC_RSS_KEY if symmetric else DEFAULT_RSS_KEY
        else:
            if symmetric:
                raise InvalidArgument("symmetric=True picks the symmetric key: pass no key")
            key = _as_bytes(key, "key")
        if not KEY_LEN <= len(key) <= KEY_LEN_MAX or len(key) % 4:
            raise InvalidArgument(f"key must be {KEY_LEN} .. {KEY_LEN_MAX} bytes, a multiple "
                                  f"of 4; got {len(key)}")
        size = check_count(reta_size, "reta_size", lo=1, hi=1 << 16)
        if size & (size - 1):
            raise InvalidArgument(f"reta_size must be a power of two, got {size}")
        self.nb_queues = check_count(queues, "queues", lo=1, hi=0xFFFF)
        self.key = key
        self.symmetric = key == SYMMETRIC_RSS_KEY
        self.table = new_table(TUPLE_MAX)
        raise_for(thash_table_init(key_array(key), self.table))
        self.reta = np.empty(size, np.uint16)
        raise_for(reta_init(self.reta, self.nb_queues))
        self._scratch = np.empty(TUPLE_MAX, np.uint8)

    # -- hashing ---------------------------------------------------------------------------
    def hash(self, data) -> int:
        """The Toeplitz hash of a raw input (bytes in network order, at most 36)."""
        b = _as_bytes(data, "data")
        if len(b) > TUPLE_MAX:
            raise InvalidArgument(f"an RSS input is at most {TUPLE_MAX} bytes, got {len(b)}")
        a = np.frombuffer(b, np.uint8) if b else np.zeros(1, np.uint8)
        return int(thash_lut(self.table, a, len(b)))

    def tuple(self, frame) -> bytes:
        """The hash input this configuration takes from an Ethernet ``frame`` (b"" when it
        is not hashed)."""
        p = self._frame(frame)
        n = int(rss_tuple(p, len(frame), self.l4, self._scratch))
        return self._scratch[:n].tobytes()

    def hash_frame(self, frame) -> int | None:
        """The RSS hash of an Ethernet ``frame``, or None when a NIC would not hash it."""
        p = self._frame(frame)
        v = int(_py_hash_frame(self.table, p, len(frame), self.l4))
        return None if v < 0 else v

    @staticmethod
    def _frame(frame) -> np.ndarray:
        b = _as_bytes(frame, "frame")
        return np.frombuffer(b, np.uint8) if b else np.zeros(1, np.uint8)[:0]

    def hash_bulk(self, domain, mbufs) -> int:
        """Hash every packet of ``mbufs`` (handles or Mbufs; -1 skipped) of ``domain`` (a Domain
        or a pool): ``hash`` and ``RTE_MBUF_F_RX_RSS_HASH`` as a NIC sets them.  Returns how
        many were hashed.  A handle that is not an mbuf the application holds raises (then
        nothing was written)."""
        d, st = domain_state(domain)
        a = d.handles(mbufs, "mbufs")
        self._check(st, a)
        rc = int(rss_hash_bulk(st, a, a.size, self.table, self.l4))
        raise_for(min(rc, 0))
        return rc

    def queues(self, domain, mbufs) -> np.ndarray:
        """The Rx queue of each packet of ``mbufs`` from its hash (after :meth:`hash_bulk` or
        a port that sets it): int32, -1 for NULL handles."""
        d, st = domain_state(domain)
        a = d.handles(mbufs, "mbufs")
        self._check(st, a)
        out = np.empty(a.size, np.int32)
        raise_for(min(int(rss_queue_bulk(st, a, a.size, self.reta, out)), 0))
        return out

    @staticmethod
    def _check(st, a) -> None:
        k, rc = _py_check(st, a, a.size)
        if k >= 0:
            raise_for(int(rc), f"mbufs[{k}] = {int(a[k])} is not an mbuf the application holds")

    # -- redirection table -----------------------------------------------------------------
    def queue(self, hash) -> int:
        """The queue of a hash value: ``reta[hash % reta_size]``."""
        h = check_count(hash, "hash", lo=0, hi=0xFFFFFFFF)
        return int(reta_queue(self.reta, h))

    def reta_update(self, entries, mask=None) -> None:
        """Set entries of the table, as ``rte_eth_dev_rss_reta_update``: ``entries`` (one queue
        per table entry) and ``mask`` (None = every entry; else one 64-bit mask per group of
        64 entries, bit ``b`` of ``mask[g]`` selecting entry ``64 g + b``).  All or nothing:
        InvalidArgument for a size mismatch or a queue >= ``queues``."""
        size = self.reta.size
        groups = (size + RETA_GROUP_SIZE - 1) // RETA_GROUP_SIZE
        e = np.asarray(entries)
        if e.ndim != 1 or e.size != size or e.dtype.kind not in "iu":
            raise InvalidArgument(f"entries must be {size} integers (the table's size)")
        if e.size and (int(e.min()) < 0 or int(e.max()) > 0xFFFF):
            raise InvalidArgument("entries must be queue numbers 0 .. 65535")
        if mask is None:
            m = np.full(groups, np.uint64(0xFFFFFFFFFFFFFFFF))
            if size < RETA_GROUP_SIZE:
                m[0] = np.uint64((1 << size) - 1)
        else:
            try:
                m = np.array([check_count(x, "mask", lo=0, hi=(1 << 64) - 1) for x in mask],
                             np.uint64)
            except TypeError:
                raise InvalidArgument("mask must be a sequence of 64-bit masks") from None
            if m.size != groups:
                raise InvalidArgument(f"mask must hold {groups} group masks, got {m.size}")
        rc = int(reta_update(self.reta, m, e.astype(np.uint16), self.nb_queues))
        if rc < 0:
            raise InvalidArgument(f"a selected entry names a queue >= {self.nb_queues}")

    def reta_query(self) -> np.ndarray:
        """A copy of the redirection table."""
        return self.reta.copy()

    def __repr__(self) -> str:
        k = "symmetric" if self.symmetric else ("default" if self.key == DEFAULT_RSS_KEY
                                                 else "custom")
        return (f"Rss(key={k}, l4={self.l4}, reta_size={self.reta.size}, "
                f"queues={self.nb_queues})")


@kernel
def _py_hash_frame(table, p, n, l4):
    return rss_hash_frame(table, p, n, l4)
