"""Deliberately slow, obviously correct models of the LPM tables, for the tests.

A dict of rules ``(masked prefix, depth) -> next hop`` and a longest match by scanning the
depths from longest to shortest.  They also model the return codes and the capacity limits of
DPDK 22.11's ``rte_lpm`` / ``rte_lpm6`` (``docs/lpm.md``): a new rule fails with ``-ENOSPC``
when ``max_rules`` rules exist, or when it needs tbl8 groups that are not free.  The groups a
rule set uses are determined by the rules alone: IPv4, one per /24 holding a rule longer than
24; IPv6, one per (level, prefix) node on the path of every rule longer than 24 bits.
"""
from __future__ import annotations

EINVAL, ENOENT, ENOSPC = -22, -2, -28


def _mask(ip: int, depth: int, bits: int) -> int:
    return ip & (((1 << depth) - 1) << (bits - depth))


class NaiveLpm:
    """IPv4; addresses are ints, next hops kept modulo 2^24 (as the tables keep them)."""

    BITS, NH_BITS, TOP = 32, 24, 24

    def __init__(self, max_rules: int, number_tbl8s: int):
        self.max_rules = max_rules
        self.number_tbl8s = number_tbl8s
        self.rules: dict[tuple[int, int], int] = {}

    def _groups(self, rules) -> set:
        return {ip >> 8 for ip, d in rules if d > 24}

    def groups_used(self) -> int:
        return len(self._groups(self.rules))

    def add(self, ip: int, depth: int, nh: int) -> int:
        if not 1 <= depth <= self.BITS:
            return EINVAL
        key = (_mask(ip, depth, self.BITS), depth)
        nh &= (1 << self.NH_BITS) - 1
        if key not in self.rules:
            if len(self.rules) >= self.max_rules:
                return ENOSPC
            if len(self._groups(list(self.rules) + [key])) > self.number_tbl8s:
                return ENOSPC
        self.rules[key] = nh
        return 0

    def delete(self, ip: int, depth: int) -> int:
        if not 1 <= depth <= self.BITS:
            return EINVAL
        key = (_mask(ip, depth, self.BITS), depth)
        if key not in self.rules:
            return EINVAL            # rte_lpm_delete: -EINVAL for an absent rule
        del self.rules[key]
        return 0

    def is_rule_present(self, ip: int, depth: int):
        if not 1 <= depth <= self.BITS:
            return EINVAL, 0
        nh = self.rules.get((_mask(ip, depth, self.BITS), depth))
        return (0, 0) if nh is None else (1, nh)

    def delete_all(self) -> None:
        self.rules.clear()

    def lookup(self, ip: int) -> int:
        for d in range(self.BITS, 0, -1):
            nh = self.rules.get((_mask(ip, d, self.BITS), d))
            if nh is not None:
                return nh
        return ENOENT


class NaiveLpm6(NaiveLpm):
    """IPv6; addresses are 128-bit ints, next hops modulo 2^21, delete of an absent rule
    ``-ENOENT`` (``rte_lpm6_delete``)."""

    BITS, NH_BITS = 128, 21

    def _groups(self, rules) -> set:
        nodes = set()
        for ip, d in rules:
            level_bits = 24
            while d > level_bits:
                nodes.add((level_bits, ip >> (128 - level_bits)))
                level_bits += 8
        return nodes

    def delete(self, ip: int, depth: int) -> int:
        r = super().delete(ip, depth)
        return ENOENT if r == EINVAL and 1 <= depth <= 128 else r
