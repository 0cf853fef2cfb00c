"""l3fwd's route files and default tables (DPDK 22.11 ``examples/l3fwd``: ``lpm_route_parse.c``,
``em_route_parse.c``, the default arrays of ``main.c`` and ``l3fwd_em.c``).

Both formats are read as DPDK reads them, line by line:

* a line starting with ``#``, or holding only white space, is skipped;
* any other line must start with ``R``, or the file is rejected;
* the rest is split on blanks, tabs and newlines (further fields are ignored);
* a file without any ``R`` line is rejected.

LPM / FIB (``R<addr>/<depth> <port>``): the address goes through ``inet_pton``, the depth and the
port through ``strtoul(.., 0)`` (``0x18`` and ``030`` are numbers), depth at most 32 / 128, port
at most 255.  EM (``R<dst> <src> <dst port> <src port> <proto> <port>``): numbers the same way,
ports at most 65535, protocol and out port at most 255.  One quirk is kept: DPDK's IPv4 EM
parser returns *success* when ``inet_pton`` rejects an address (it returns ``inet_pton``'s 0),
leaving that field and every later one at 0; the IPv6 parser rejects the line.

Errors raise :class:`RouteFileError` naming the file and line, as l3fwd's log does.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass

__all__ = ["RouteFileError", "LpmRule", "EmRule", "read_lpm", "read_em", "default_lpm",
           "default_em", "parse_c_ulong"]

_BLANKS = " \t\n"
ULONG_MAX = (1 << 64) - 1


class RouteFileError(ValueError):
    """A rule file that l3fwd would refuse."""


@dataclass(frozen=True)
class LpmRule:
    addr: bytes            # 4 or 16 bytes, network order, as written (the table masks it)
    depth: int
    port: int


@dataclass(frozen=True)
class EmRule:
    dst: bytes             # 4 or 16 bytes, network order
    src: bytes
    dst_port: int
    src_port: int
    proto: int
    port: int


def parse_c_ulong(s: str) -> int | None:
    """``strtoul(s, &end, 0)`` that must consume all of ``s``: the value, or None when
    characters are left over or nothing is a number (a value past ULONG_MAX saturates, as
    ``strtoul`` does with ERANGE, which callers treat as an error through their limit)."""
    i, n = 0, len(s)
    while i < n and s[i] in " \t\n\v\f\r":
        i += 1
    neg = False
    if i < n and s[i] in "+-":
        neg = s[i] == "-"
        i += 1
    base = 10
    if s[i:i + 2].lower() == "0x" and i + 2 < n and s[i + 2] in "0123456789abcdefABCDEF":
        base, i = 16, i + 2
    elif s[i:i + 1] == "0":
        base = 8
    digits = "0123456789abcdef"[:base]
    j = i
    while j < n and s[j].lower() in digits:
        j += 1
    if j == i or j != n:
        return None
    v = int(s[i:j], base)
    if v > ULONG_MAX:
        return ULONG_MAX + 1           # ERANGE: above every limit
    return (-v) % (1 << 64) if neg else v


def _field(s: str, lim: int) -> int | None:
    v = parse_c_ulong(s)
    return None if v is None or v > lim else v


def _pton(family, s: str) -> bytes | None:
    try:
        return socket.inet_pton(family, s)
    except (OSError, ValueError):
        return None


def _lines(path):
    """(line number, text) of the rule lines; RouteFileError for a line that is neither."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise RouteFileError(f"{path}: {e.strerror or e}") from None
    text = raw.decode("latin-1")
    lines = text.split("\n")            # fgets: only a newline ends a line
    if not any(ln.startswith("R") for ln in lines):
        raise RouteFileError(f"{path}: no rule (a line starting with R)")
    out = []
    for no, ln in enumerate(lines, 1):
        if ln.startswith("#") or not ln.strip(" \t\n\v\f\r"):
            continue
        if not ln.startswith("R"):
            raise RouteFileError(f"{path} Line {no}: should start with leading char R")
        out.append((no, ln[1:]))
    return out


def _tokens(s: str, k: int):
    toks = [t for t in s.replace("\t", " ").replace("\n", " ").split(" ") if t]
    return toks[:k] if len(toks) >= k else None


def _lpm_rule(s: str, v6: bool) -> LpmRule | None:
    toks = _tokens(s, 2)
    if toks is None:
        return None
    parts = [p for p in toks[0].split("/") if p]
    port = _field(toks[1], 255)
    if len(parts) < 2 or port is None:
        return None
    addr = _pton(socket.AF_INET6 if v6 else socket.AF_INET, parts[0])
    depth = _field(parts[1], 128 if v6 else 32)
    if addr is None or depth is None:
        return None
    return LpmRule(addr, depth, port)


def _em_rule(s: str, v6: bool) -> EmRule | None:
    toks = _tokens(s, 6)
    if toks is None:
        return None
    fam, size = (socket.AF_INET6, 16) if v6 else (socket.AF_INET, 4)
    zero = bytes(size)
    dst = _pton(fam, toks[0])
    if dst is None:
        return None if v6 else EmRule(zero, zero, 0, 0, 0, 0)     # DPDK's IPv4 quirk
    src = _pton(fam, toks[1])
    if src is None:
        return None if v6 else EmRule(dst, zero, 0, 0, 0, 0)
    sport = _field(toks[3], 0xFFFF)
    dport = _field(toks[2], 0xFFFF)
    proto = _field(toks[4], 0xFF)
    port = _field(toks[5], 0xFF)
    if None in (sport, dport, proto, port):
        return None
    return EmRule(dst, src, dport, sport, proto, port)


def _read(path, parse, v6):
    rules = []
    for no, s in _lines(path):
        r = parse(s, v6)
        if r is None:
            raise RouteFileError(f"{path} Line {no}: parse rules error")
        rules.append(r)
    return rules


def read_lpm(path, v6: bool) -> list[LpmRule]:
    """The rules of an LPM/FIB rule file (``--rule_ipv4`` / ``--rule_ipv6``)."""
    return _read(path, _lpm_rule, v6)


def read_em(path, v6: bool) -> list[EmRule]:
    """The rules of an EM rule file."""
    return _read(path, _em_rule, v6)


def _v4(a, b, c, d) -> bytes:
    return bytes((a, b, c, d))


def _v6_bench(x: int, last: int = 0) -> bytes:
    """2001:200:0:x::last -- RFC 5180's benchmarking range, as l3fwd's defaults use it."""
    return bytes((0x20, 0x01, 0x02, 0x00, 0, 0, 0, x)) + bytes(7) + bytes((last,))


def default_lpm(v6: bool) -> list[LpmRule]:
    """l3fwd's built-in LPM/FIB routes: 198.18.X.0/24 and 2001:200:0:X::/64 to port X, for X
    in 0..15 (``main.c``'s route arrays)."""
    if v6:
        return [LpmRule(_v6_bench(x), 64, x) for x in range(16)]
    return [LpmRule(_v4(198, 18, x, 0), 24, x) for x in range(16)]


def default_em(v6: bool) -> list[EmRule]:
    """l3fwd's built-in EM flows: from 198.18.X.1 to 198.18.X.0 (IPv6: from 2001:200:0:X::1
    to 2001:200:0:X::), UDP 9 -> 9, to port X, for X in 0..15 (``l3fwd_em.c``)."""
    if v6:
        return [EmRule(_v6_bench(x), _v6_bench(x, 1), 9, 9, 17, x) for x in range(16)]
    return [EmRule(_v4(198, 18, x, 0), _v4(198, 18, x, 1), 9, 9, 17, x) for x in range(16)]
