"""The Toeplitz hash straight from its definition, bit by bit, in plain Python.

No tables, no words: for every input bit, most significant bit of the first byte first, XOR the
left-most 32 bits of the key into the result when the bit is set, then shift the key left by one.
It is slow and obviously right; the tests hold the kernels of :mod:`.thash` to it.
"""
from __future__ import annotations


def toeplitz(key: bytes, data: bytes) -> int:
    """The 32-bit Toeplitz hash of ``data`` under ``key`` (``len(key) >= len(data) + 4``)."""
    key, data = bytes(key), bytes(data)
    if len(key) < len(data) + 4:
        raise ValueError(f"a {len(data)}-byte input needs a key of {len(data) + 4} bytes or more")
    k = int.from_bytes(key, "big")
    kbits = 8 * len(key)
    result = 0
    for i in range(8 * len(data)):
        bit = (data[i // 8] >> (7 - i % 8)) & 1
        if bit:
            # the 32 key bits starting at key bit i (bit 0 = MSB of key[0])
            result ^= (k >> (kbits - 32 - i)) & 0xFFFFFFFF
    return result


def ipv4_tuple(src: bytes, dst: bytes, sport: int | None = None, dport: int | None = None) -> bytes:
    """The hash input for IPv4: addresses, then the ports if given, all in network order."""
    out = bytes(src) + bytes(dst)
    if sport is not None:
        out += sport.to_bytes(2, "big") + dport.to_bytes(2, "big")
    return out


ipv6_tuple = ipv4_tuple      # the same layout with 16-byte addresses
