"""A plain-Python model of the AF_XDP ring arithmetic and the UMEM address <-> mbuf mapping,
for the kernels to be checked against."""
from __future__ import annotations

U32 = 1 << 32
ADDR_MASK = (1 << 48) - 1


def entries(prod: int, cons: int) -> int:
    return (prod - cons) % U32


def free(size: int, prod: int, cons: int) -> int:
    return size - entries(prod, cons)


class Umem:
    """Buffer ``k`` at ``k * stride + priv``; the kernel may use its first ``chunk`` bytes;
    ``own[k]`` says who holds it (0 user, 1 fill/Rx, 2 Tx)."""

    def __init__(self, n, stride, priv, chunk):
        self.n, self.stride, self.priv, self.chunk = n, stride, priv, chunk
        self.own = [0] * n

    def buf(self, k: int) -> int:
        return k * self.stride + self.priv

    def rx_frame(self, addr: int, ln: int, own: int = 1):
        """(k, offset) for an Rx descriptor, or None when it is not a frame we posted."""
        base, off = addr & ADDR_MASK, (addr >> 48) & 0xFFFF
        for k in range(self.n):
            if self.buf(k) == base:
                if 0 < ln and off + ln <= self.chunk and self.own[k] == own:
                    return k, off
                return None
        return None

    def tx_frame(self, addr: int, own: int = 2):
        a = (addr & ADDR_MASK) + ((addr >> 48) & 0xFFFF)
        for k in range(self.n):
            if self.buf(k) <= a < self.buf(k) + self.chunk:
                return k if self.own[k] == own else None
        return None
