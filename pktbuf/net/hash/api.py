"""The exact-match hash table for plain Python: :class:`Hash`.

    h = Hash(entries=1 << 16, key_len=16)     # CRC32-C, one writer, lock-free readers
    pos = h.add(key, data=42)                   # bytes or a uint8 array of key_len bytes
    h.lookup(key)                               # (position, data), or None
    h.lookup_bulk(keys)                         # int32 positions, -2 (E_NOENT) for misses
    h.delete(key)

Every argument is checked here (exceptions from :mod:`pktbuf.errors`; a bad call changes
nothing); the work is done by the kernels of :mod:`pktbuf.net.hash.table`, which compiled code
calls directly with :attr:`Hash.block`.  One thread (or process) at a time may change the
table; any number may look up at the same time, in this process or in others that
:meth:`Hash.attach` the same memory (``shared=True``).  docs/hash.md has the design.
"""
from __future__ import annotations

import os

import numpy as np

from ...errors import (E_NOENT, E_NOSPC, InvalidArgument, NoRoom, NoSuchKey, check_count,
                       check_flag, check_uint, raise_for)
from ...shm import Region
from . import table as T

__all__ = ["Hash", "NoSuchKey"]

_M32 = 0xFFFFFFFF


class Hash:
    """An ``rte_hash``-shaped table of ``entries`` keys of ``key_len`` bytes, each with a
    uint64 of data.

    ``entries``: 8 .. 2**30 (the table holds exactly that many keys, unless the cuckoo search
    finds no room first: then :class:`~pktbuf.errors.NoRoom`).  ``hash_func``: None for
    CRC32-C (``rte_hash_crc``) with ``init_val``; else a Python callable taking the key's
    bytes and returning a 32-bit hash (compiled code must then use the ``*_with_hash`` kernels
    with the same values).  ``no_free_on_del``: a deleted key's position stays taken until
    :meth:`free_position` (DPDK's ``NO_FREE_ON_DEL``).  ``shared``: the table lives in a memfd
    another process can map (:attr:`fd`, :meth:`attach`).
    """

    def __init__(self, entries: int, key_len: int, *, hash_func=None, init_val: int = 0,
                 no_free_on_del: bool = False, shared: bool = False, name: str | None = None,
                 _block=None):
        if _block is not None:
            self._blk = _block
            meta = _block.meta
            entries, key_len = int(meta[T.M_ENTRIES]), int(meta[T.M_KEY_LEN])
            init_val = int(meta[T.M_INIT])
            no_free_on_del = bool(meta[T.M_FLAGS] & T.F_NO_FREE_ON_DEL)
        else:
            entries = check_count(entries, "entries", lo=T.ENTRIES_MIN, hi=T.ENTRIES_MAX)
            key_len = check_count(key_len, "key_len", lo=1, hi=T.KEY_LEN_MAX)
            init_val = check_uint(init_val, "init_val", 32)
            no_free_on_del = check_flag(no_free_on_del, "no_free_on_del")
            shared = check_flag(shared, "shared")
        if hash_func is not None and not callable(hash_func):
            raise InvalidArgument("hash_func must be callable (key bytes -> 32-bit int) or None")
        self.entries = entries
        self.key_len = key_len
        self.init_val = init_val
        self.no_free_on_del = no_free_on_del
        self.hash_func = hash_func
        if _block is None:
            flags = T.F_NO_FREE_ON_DEL if no_free_on_del else 0
            self._blk = T.new_table(entries, key_len, init_val, flags, shared=shared,
                                    name=name)
        self._key_out = np.zeros(key_len, np.uint8)

    @classmethod
    def attach(cls, fd: int, *, hash_func=None) -> "Hash":
        """The table another process made with ``shared=True``, from its memfd ``fd`` (adopted:
        closed with the table).  Pass the same ``hash_func`` as its creator."""
        fd = check_count(fd, "fd")
        size = os.fstat(fd).st_size
        if size <= 0:
            raise InvalidArgument(f"fd {fd} holds no table")
        blk = T.attach_table(Region.attach(fd, size, "pktbuf-hash-peer"))
        return cls(0, 0, hash_func=hash_func, _block=blk)

    # -- what compiled code needs ------------------------------------------------------------
    @property
    def block(self):
        """The table's block: pass it to the kernels of :mod:`pktbuf.net.hash.table` from
        ``@njit`` code."""
        return self._blk

    @property
    def fd(self) -> int | None:
        """The memfd holding the table (``shared=True``), else None."""
        return getattr(self._blk.memory, "fd", None)

    # -- argument checks ---------------------------------------------------------------------
    def _key(self, key, name="key") -> np.ndarray:
        if isinstance(key, np.ndarray):
            if key.dtype != np.uint8 or key.ndim != 1:
                raise InvalidArgument(f"{name} must be bytes or a 1-d uint8 array, got "
                                      f"{key.dtype} with {key.ndim} dimensions")
            a = np.ascontiguousarray(key)
        elif isinstance(key, (bytes, bytearray, memoryview)):
            a = np.frombuffer(bytes(key), np.uint8)
        else:
            raise InvalidArgument(f"{name} must be bytes or a uint8 array, got "
                                  f"{type(key).__name__}")
        if a.size != self.key_len:
            raise InvalidArgument(f"{name} must be {self.key_len} bytes, got {a.size}")
        return a

    def _keys(self, keys) -> np.ndarray:
        if isinstance(keys, np.ndarray):
            if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != self.key_len:
                raise InvalidArgument(f"keys must be a (n, {self.key_len}) uint8 array, got "
                                      f"{keys.dtype} {keys.shape}")
            return np.ascontiguousarray(keys)
        if isinstance(keys, (bytes, bytearray, memoryview, str)) or keys is None:
            raise InvalidArgument("keys must be a sequence of keys or a 2-d uint8 array")
        rows = [self._key(k, "keys[%d]" % i) for i, k in enumerate(keys)]
        if not rows:
            return np.zeros((0, self.key_len), np.uint8)
        return np.stack(rows)

    def _hash(self, k: np.ndarray) -> int | None:
        """The user hash of ``k`` (None: the kernels compute CRC32-C)."""
        if self.hash_func is None:
            return None
        h = self.hash_func(k.tobytes())
        return check_uint(h, "hash_func(key)", 32)

    @staticmethod
    def _data(data) -> int:
        return check_uint(data, "data", 64)

    # -- the verbs ---------------------------------------------------------------------------
    def hash(self, key) -> int:
        """The table's hash of ``key`` (``rte_hash_hash``)."""
        k = self._key(key)
        h = self._hash(k)
        return h if h is not None else int(T.hash_hash(self._blk, k))

    def add(self, key, data: int = 0) -> int:
        """Add ``key`` with ``data`` (or replace the data of a present key); its position.
        :class:`~pktbuf.errors.NoRoom` when the table is full (nothing changed)."""
        k = self._key(key)
        d = self._data(data)
        h = self._hash(k)
        if h is None:
            h = int(T.hash_hash(self._blk, k))
        rc = int(T.hash_add(self._blk, k, h, np.uint64(d)))
        if rc == E_NOSPC:
            raise NoRoom(f"no room for the key: {len(self)} of {self.entries} entries in use"
                         " or no free entry in its buckets")
        raise_for(rc)
        return rc

    def lookup(self, key):
        """``(position, data)`` of ``key``, or None when it is absent."""
        k = self._key(key)
        h = self._hash(k)
        if h is None:
            rc, d = T.hash_lookup_data(self._blk, k)
        else:
            rc, d = T.hash_lookup_with_hash_data(self._blk, k, h)
        if rc == E_NOENT:
            return None
        raise_for(rc)
        return int(rc), int(d)

    def __contains__(self, key) -> bool:
        return self.lookup(key) is not None

    def __getitem__(self, key) -> int:
        r = self.lookup(key)
        if r is None:
            raise NoSuchKey("key not in the table")
        return r[1]

    def __setitem__(self, key, data) -> None:
        self.add(key, data)

    def __delitem__(self, key) -> None:
        self.delete(key)

    def delete(self, key) -> int:
        """Remove ``key``; its former position.  :class:`NoSuchKey` (a ``KeyError``) when
        absent."""
        k = self._key(key)
        h = self._hash(k)
        rc = int(T.hash_del_key(self._blk, k) if h is None
                 else T.hash_del_key_with_hash(self._blk, k, h))
        if rc == E_NOENT:
            raise NoSuchKey("key not in the table")
        raise_for(rc)
        return rc

    def free_position(self, position: int) -> None:
        """Free the position of a deleted key (tables with ``no_free_on_del`` only)."""
        if not self.no_free_on_del:
            raise InvalidArgument("free_position is for tables made with no_free_on_del=True")
        pos = check_count(position, "position", lo=0, hi=self.entries - 1)
        rc = int(T.hash_free_key_with_position(self._blk, pos))
        if rc == -22:
            raise InvalidArgument(f"position {pos} is free already")
        if rc == -16:
            raise InvalidArgument(f"position {pos} still holds a key of the table")
        raise_for(rc)

    def key_at(self, position: int) -> bytes | None:
        """The key at ``position`` (``rte_hash_get_key_with_position``), None when free."""
        pos = check_count(position, "position", lo=0, hi=self.entries - 1)
        rc = int(T.hash_get_key_with_position(self._blk, pos, self._key_out))
        if rc == E_NOENT:
            return None
        raise_for(rc)
        return self._key_out.tobytes()

    def lookup_bulk(self, keys) -> np.ndarray:
        """int32 positions of ``keys`` (a sequence or an (n, key_len) uint8 array), ``-2``
        (``E_NOENT``) for misses; any n (done 64 at a time)."""
        ka = self._keys(keys)
        n = ka.shape[0]
        out = np.empty(n, np.int32)
        hashes = self._bulk_hashes(ka)
        for i in range(0, n, T.LOOKUP_BULK_MAX):
            m = min(T.LOOKUP_BULK_MAX, n - i)
            if hashes is None:
                rc = T.hash_lookup_bulk(self._blk, ka[i:i + m], m, out[i:i + m])
            else:
                rc = T.hash_lookup_with_hash_bulk(self._blk, ka[i:i + m], hashes[i:i + m], m,
                                                  out[i:i + m])
            raise_for(int(rc))
        return out

    def lookup_bulk_data(self, keys) -> tuple[np.ndarray, np.ndarray]:
        """``(hit, data)``: a bool array and the uint64 data of each key (0 for misses)."""
        ka = self._keys(keys)
        n = ka.shape[0]
        hit = np.zeros(n, bool)
        data = np.zeros(n, np.uint64)
        mask = np.zeros(1, np.uint64)
        hashes = self._bulk_hashes(ka)
        for i in range(0, n, T.LOOKUP_BULK_MAX):
            m = min(T.LOOKUP_BULK_MAX, n - i)
            if hashes is None:
                rc = T.hash_lookup_bulk_data(self._blk, ka[i:i + m], m, mask, data[i:i + m])
            else:
                rc = T.hash_lookup_with_hash_bulk_data(self._blk, ka[i:i + m], hashes[i:i + m],
                                                       m, mask, data[i:i + m])
            raise_for(int(rc))
            bits = int(mask[0])
            hit[i:i + m] = [(bits >> j) & 1 for j in range(m)]
        return hit, data

    def _bulk_hashes(self, ka):
        if self.hash_func is None:
            return None
        return np.array([self._hash(r) for r in ka], np.uint32)

    def __len__(self) -> int:
        return int(T.hash_count(self._blk))

    def _iter(self):
        state = np.zeros(1, np.int64)
        key = np.zeros(self.key_len, np.uint8)
        while True:
            pos, d = T.hash_iterate(self._blk, state, key)
            if pos < 0:
                return
            yield int(pos), key.tobytes(), int(d)

    def __iter__(self):
        """The keys (bytes), in bucket order (``rte_hash_iterate``)."""
        return (k for _, k, _ in self._iter())

    def items(self):
        """``(key, data)`` pairs in bucket order."""
        return ((k, d) for _, k, d in self._iter())

    def positions(self):
        """``(position, key, data)`` triples in bucket order."""
        return self._iter()

    def reset(self) -> None:
        """Empty the table (``rte_hash_reset``); not while other threads look up."""
        raise_for(int(T.hash_reset(self._blk)))

    clear = reset

    def __repr__(self) -> str:
        return (f"<pktbuf Hash {len(self)}/{self.entries} keys of {self.key_len} B"
                f"{', shared' if self.fd is not None else ''}>")
