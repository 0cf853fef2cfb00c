"""The Toeplitz hash of receive-side scaling, as DPDK's ``rte_thash.h`` computes it.

The hash of an input of ``n`` bytes under a key is the XOR, over every set input bit ``i``
(bit 0 = the most significant bit of byte 0), of the 32 key bits starting at key bit ``i``.
It is linear over GF(2), so it splits by input byte: with ``T[p, v]`` = the hash of byte
value ``v`` at position ``p`` (every other byte zero), the hash of an input is the XOR of
``T[p, input[p]]`` -- one table load per byte (:func:`thash_lut`).  :func:`thash_table_init`
builds ``T`` from a key once; a 36-row table (36 KiB) covers every RSS input.

:func:`softrss` and :func:`softrss_be` are DPDK's own word-at-a-time forms (``rte_softrss``,
``rte_softrss_be``): the input as 32-bit words in host byte order, one key-window XOR per set
bit.  They give the same hash and exist for callers holding DPDK-style tuples.

Keys: :data:`DEFAULT_RSS_KEY` (the Intel 82599 datasheet key that DPDK's test suite calls
``default_rss_key`` and several drivers -- ixgbe, virtio, net_null -- program by default) and
:data:`SYMMETRIC_RSS_KEY` (``6d 5a`` x 20: both directions of a flow hash alike).
Hash values are returned as non-negative ``int64`` (0 .. 2**32-1); a negative value is an
error code from :mod:`pktbuf.errors`.
"""
from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from ..._jit import kernel
from ...errors import E_INVAL

DEFAULT_RSS_KEY = bytes.fromhex(
    "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")
SYMMETRIC_RSS_KEY = bytes.fromhex("6d5a") * 20
KEY_LEN = 40            # bytes: the largest input (IPv6 + ports, 36 bytes) + 32 bits
TUPLE_MAX = 36          # bytes: the largest RSS input
V4_L3_LEN, V4_L4_LEN = 2, 3     # RTE_THASH_V4_L3_LEN / _L4_LEN, in 32-bit words
V6_L3_LEN, V6_L4_LEN = 8, 9     # RTE_THASH_V6_L3_LEN / _L4_LEN
_M32 = 0xFFFFFFFF


def key_array(key: bytes) -> np.ndarray:
    """``key`` as the uint8 array the kernels take."""
    return np.frombuffer(bytes(key), np.uint8).copy()


def new_table(rows: int = TUPLE_MAX) -> np.ndarray:
    """An empty lookup table for inputs of up to ``rows`` bytes (fill it with
    :func:`thash_table_init`)."""
    return np.zeros((rows, 256), np.uint32)


@kernel
def thash_table_init(key, table):
    """Fill ``table[p, v]`` (uint32, shape (rows, 256)) with the hash of byte ``v`` at input
    position ``p`` under ``key`` (uint8).  0, or ``E_INVAL`` when the table is not 256 wide or
    the key is shorter than rows + 4 bytes (nothing written)."""
    rows = table.shape[0]
    if table.shape[1] != 256 or key.size < rows + 4:
        return E_INVAL
    for p in range(rows):
        # key bytes p .. p+4: the 40 key bits from which the 8 windows of this byte start
        w = np.int64(0)
        for b in range(5):
            w = (w << 8) | np.int64(key[p + b])
        table[p, 0] = 0
        for v in range(1, 256):
            low = v & -v                          # the lowest set bit of v ...
            b = 7 - trailing_zeros(np.int64(low))  # ... is input bit b of the byte (0 = MSB)
            table[p, v] = table[p, v ^ low] ^ np.uint32((w >> (8 - b)) & _M32)
    return 0


@kernel(inline="always")
def thash_lut_at(table, h, pos, data, off, n):
    """``h`` XOR the hash contribution of ``data[off:off+n]`` placed at input position
    ``pos`` (no checks: the caller keeps ``pos + n <= rows`` and the slice inside ``data``)."""
    # unsigned indices: Numba then adds no negative-index fix-up to each of the two
    # subscripts, which keeps the loop to a load, a load and an xor per byte
    p = np.uint64(pos)
    o = np.uint64(off)
    for i in range(np.uint64(n)):
        h ^= np.int64(table[p + i, np.uint64(data[o + i])])
    return h


@kernel
def thash_lut(table, data, n):
    """The hash of ``data[:n]`` (network-order bytes) with a table from
    :func:`thash_table_init`; ``E_INVAL`` if ``n`` exceeds the table or the data."""
    if n < 0 or n > table.shape[0] or n > data.size:
        return E_INVAL
    return thash_lut_at(table, np.int64(0), 0, data, 0, n)


@kernel
def thash_bulk(table, tuples, n_bytes, out, n):
    """Hash ``n`` inputs of ``n_bytes`` each, the rows of ``tuples`` (uint8, 2-d), into
    ``out[:n]`` (uint32).  Returns ``n``, or ``E_INVAL`` (nothing written) when a size does
    not fit."""
    if (n < 0 or n > tuples.shape[0] or n > out.size or n_bytes < 0 or n_bytes > tuples.shape[1]
            or n_bytes > table.shape[0]):
        return E_INVAL
    for k in range(np.uint64(n)):
        h = np.int64(0)
        for i in range(np.uint64(n_bytes)):
            h ^= np.int64(table[i, np.uint64(tuples[k, i])])
        out[k] = h
    return n


@kernel(inline="always")
def _be32(key, off):
    return ((np.int64(key[off]) << 24) | (np.int64(key[off + 1]) << 16)
            | (np.int64(key[off + 2]) << 8) | np.int64(key[off + 3]))


@kernel
def softrss(words, n, key):
    """``rte_softrss``: the hash of ``words[:n]`` (uint32, host byte order: each word is 4
    input bytes read big-endian) under ``key`` as programmed into a NIC (uint8, at least
    ``4 * (n + 1)`` bytes).  ``E_INVAL`` when the sizes do not fit."""
    if n < 0 or n > words.size or key.size < 4 * (n + 1):
        return E_INVAL
    ret = np.int64(0)
    for j in range(n):
        kj = _be32(key, 4 * j)
        kj1 = _be32(key, 4 * j + 4)
        m = np.int64(words[j])
        while m != 0:
            i = trailing_zeros(m)
            ret ^= ((kj << (31 - i)) & _M32) | (kj1 >> (i + 1))
            m &= m - 1
    return ret


@kernel
def convert_rss_key(key, out):
    """``rte_convert_rss_key``: ``out[i]`` (uint32) = key bytes ``4i .. 4i+3`` read big-endian,
    for ``i < min(key.size // 4, out.size)``; returns how many words were written."""
    n = min(key.size // 4, out.size)
    for i in range(n):
        out[i] = _be32(key, 4 * i)
    return n


@kernel
def softrss_be(words, n, key_words):
    """``rte_softrss_be``: :func:`softrss` with the key pre-converted by
    :func:`convert_rss_key` (uint32, at least ``n + 1`` words)."""
    if n < 0 or n > words.size or key_words.size < n + 1:
        return E_INVAL
    ret = np.int64(0)
    for j in range(n):
        kj = np.int64(key_words[j])
        kj1 = np.int64(key_words[j + 1])
        m = np.int64(words[j])
        while m != 0:
            i = trailing_zeros(m)
            ret ^= ((kj << (31 - i)) & _M32) | (kj1 >> (i + 1))
            m &= m - 1
    return ret
