"""DPDK device strings: ``net_af_packet0,iface=veth0,qpairs=1``.

A device string is a device name, then ``key=value`` arguments separated by commas, as EAL's
``--vdev`` takes them (``rte_devargs`` / ``rte_kvargs``).  The driver is the registered driver
name the device name starts with (``net_af_packet0`` -> ``net_af_packet``), or one of its
``eth_`` aliases, as ``rte_vdev`` matches them.  A value may be a bracketed list holding commas
(``key=[a,b]``), and a key may repeat (``net_pcap0,rx_pcap=a.pcap,rx_pcap=b.pcap``: one queue
per file).
"""
from __future__ import annotations

import re

from ....errors import InvalidArgument

__all__ = ["DevArgs", "parse_devargs", "split_devargs"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*\Z")
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*\Z")


class DevArgs(dict):
    """The arguments of a device string: ``args[key]`` is a key's first value,
    ``args.getall(key)`` every value in order."""

    def __init__(self, pairs=()):
        super().__init__()
        self.pairs: list[tuple[str, str]] = []
        for k, v in pairs:
            self.add(k, v)

    def add(self, key: str, value: str) -> None:
        self.pairs.append((key, value))
        self.setdefault(key, value)

    def getall(self, key: str) -> list[str]:
        return [v for k, v in self.pairs if k == key]


def split_devargs(text: str) -> list[str]:
    """Split at the commas that are not inside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise InvalidArgument(f"device string {text!r}: unbalanced ']'")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise InvalidArgument(f"device string {text!r}: unbalanced '['")
    parts.append("".join(cur))
    return parts


def parse_devargs(text) -> tuple[str, DevArgs]:
    """``"net_ring0,nodeaction=r:0:CREATE"`` -> ``("net_ring0", {"nodeaction": "r:0:CREATE"})``.

    Raises :class:`~pktbuf.errors.InvalidArgument` for an empty or malformed string, an
    argument without ``=`` or with an empty key.
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"a device string is a str, got {type(text).__name__}")
    if len(text) > 4096:
        raise InvalidArgument("device string longer than 4096 characters")
    parts = split_devargs(text.strip())
    name = parts[0].strip()
    if not _NAME.match(name):
        raise InvalidArgument(f"device string {text!r}: {name!r} is not a device name")
    args = DevArgs()
    for p in parts[1:]:
        if not p:
            continue                      # DPDK tolerates empty arguments ("a,,b", "a,")
        key, eq, value = p.partition("=")
        key = key.strip()
        if not eq or not _KEY.match(key):
            raise InvalidArgument(f"device string {text!r}: argument {p!r} is not key=value")
        args.add(key, value.strip())
    return name, args
