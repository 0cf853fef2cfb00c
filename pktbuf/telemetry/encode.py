"""Telemetry replies in DPDK 22.11's JSON, byte for byte (``lib/telemetry/telemetry_json.h``,
``telemetry_data.c`` and ``output_json`` in ``telemetry.c``).

A reply is ``{"<command>":<value>}``, compact, at most ``MAX_OUTPUT_LEN - 1`` bytes.  DPDK
builds it in a fixed buffer and never cuts a value in the middle: an entry (a number, a string,
a whole nested container) that would not fit is left out, the next one is still tried, and the
text stays valid JSON.  :func:`reply` follows the same rule with the same buffer length, so a
client reading ``max_output_len`` bytes always gets the whole message.

Python values map to DPDK's data types:

=====================  ======================================================================
``None``               ``null``
``str``                a string: cut at the first NUL, at most 127 bytes inside containers
                       (``RTE_TEL_MAX_STRING_LEN``) and 8191 as a whole reply; ``"`` and ``\\``
                       escaped, ``\\n \\r \\t`` escaped, other control characters dropped
``int`` (and bools,    a number, in ``[-2**31, 2**64)`` (DPDK's ``int`` and ``u64``)
NumPy integers)
``dict``               an object: at most 256 entries; keys must match ``[0-9A-Za-z_/]*``
                       (others are left out, as DPDK refuses them), cut to 127 bytes
``list``/``tuple``/    an array of one kind (strings, numbers or containers), at most 512
1-d NumPy array        entries
=====================  ======================================================================

Anything else (floats, bytes, mixed arrays) raises :class:`Unencodable`; the server then replies
``null``, as DPDK does for a handler that fails.  DPDK 22.11 nests only arrays of scalars in
arrays and has no top-level numbers; both are accepted here (pktbuf's own commands may use
them), encoded by the same rules.  Strings go out as UTF-8: DPDK 22.11's formatter mishandles
bytes >= 0x80 (it indexes its escape table with a negative ``char``), which breaks the JSON,
so pktbuf keeps them as they are and never cuts a UTF-8 sequence in two.
"""
from __future__ import annotations

import operator
import re

import numpy as np

MAX_OUTPUT_LEN = 16 * 1024          # MAX_OUTPUT_LEN, advertised as max_output_len
MAX_CMD_LEN = 56                    # MAX_CMD_LEN: commands are shorter than this
STRING_MAX = 127                    # RTE_TEL_MAX_STRING_LEN - 1 (names and string values)
SINGLE_STRING_MAX = 8191            # RTE_TEL_MAX_SINGLE_STRING_LEN - 1 (a bare string reply)
DICT_MAX = 256                      # RTE_TEL_MAX_DICT_ENTRIES
ARRAY_MAX = 512                     # RTE_TEL_MAX_ARRAY_ENTRIES
INT_MIN = -(1 << 31)
U64_MAX = (1 << 64) - 1

_NAME = re.compile(r"[0-9A-Za-z_/]*\Z")
# control characters DPDK drops: all below 0x20 except \t \n \r, which it escapes
_DROP = bytes(c for c in range(0x20) if c not in (9, 10, 13))


class Unencodable(TypeError):
    """A value DPDK's telemetry data types cannot carry."""


def valid_name(name: str) -> bool:
    """A dict key DPDK accepts: ``[0-9A-Za-z_/]*`` (``valid_name`` in telemetry_data.c)."""
    return isinstance(name, str) and _NAME.match(name) is not None


def cstring(s: str, limit: int) -> bytes:
    """``s`` as DPDK stores it: UTF-8, up to the first NUL, at most ``limit`` bytes (never
    ending inside a UTF-8 sequence)."""
    b = s.encode("utf-8", "replace").split(b"\0", 1)[0]
    if len(b) > limit:
        b = b[:limit].decode("utf-8", "ignore").encode("utf-8")
    return b


def escape(b: bytes) -> bytes:
    """DPDK's string escaping (``__json_format_str``)."""
    b = b.translate(None, _DROP)
    return (b.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
            .replace(b"\r", b"\\r").replace(b"\t", b"\\t"))


def _number(v) -> bytes:
    if isinstance(v, (bool, np.bool_)):
        return b"1" if v else b"0"
    if isinstance(v, (float, np.floating, str, bytes)):
        raise Unencodable(f"{type(v).__name__} is not a telemetry number")
    try:
        i = operator.index(v)
    except TypeError:
        raise Unencodable(f"{type(v).__name__} is not a telemetry value") from None
    if not INT_MIN <= i <= U64_MAX:
        raise Unencodable(f"{i} is outside DPDK's int and u64")
    return str(i).encode()


def _is_number(v) -> bool:
    return isinstance(v, (int, np.integer, np.bool_))     # bools too: flags are 0/1


def _is_container(v) -> bool:
    return isinstance(v, (dict, list, tuple, np.ndarray))


def _string(v: str, limit: int = STRING_MAX) -> bytes:
    return b'"' + escape(cstring(v, limit)) + b'"'


def _append(out: bytes, used: int, piece: bytes, opener: bytes, closer: bytes, room: int):
    """Add one element to a container's text, as ``rte_tel_json_add_*`` do.

    ``used`` is DPDK's fill count: 2 for an empty container, 0 after a first element that did
    not fit (DPDK then reports the container as unwritten).  The text must stay strictly
    shorter than ``room`` (the C buffer keeps one byte for the NUL)."""
    if used <= 2:
        new = opener + piece + closer
        return (new, len(new)) if len(new) < room else (out, 0)
    new = out[:-1] + b"," + piece + closer
    return (new, len(new)) if len(new) < room else (out, used)


def _container(v, room: int):
    """(text, used) of a dict or array; used == 0 means DPDK would leave it out."""
    if isinstance(v, dict):
        return _dict(v, room)
    if isinstance(v, np.ndarray):
        if v.ndim != 1:
            raise Unencodable(f"a {v.ndim}-d array is not a telemetry value")
        v = v.tolist()
    return _array(v, room)


def _dict(d: dict, room: int):
    out, used, n = b"{}", 2, 0
    for k, v in d.items():
        if not isinstance(k, str):
            raise Unencodable(f"dict key {k!r} is not a str")
        if n >= DICT_MAX:
            break
        if not valid_name(k):
            continue                        # rte_tel_data_add_dict_*: -EINVAL, entry dropped
        n += 1
        if v is None:
            piece = b"null"
        elif isinstance(v, str):
            piece = _string(v)
        elif _is_number(v):
            piece = _number(v)
        elif _is_container(v):
            piece, sub_used = _container(v, room)
            if sub_used == 0:
                continue
        else:
            raise Unencodable(f"{type(v).__name__} is not a telemetry value")
        out, used = _append(out, used, b'"' + k.encode()[:STRING_MAX] + b'":' + piece,
                            b"{", b"}", room)
    return out, used


def _array(items, room: int):
    items = list(items)[:ARRAY_MAX]          # rte_tel_data_add_array_*: -ENOSPC beyond
    if all(isinstance(x, str) for x in items):
        enc = _string
    elif all(_is_number(x) for x in items):
        enc = _number
    elif all(_is_container(x) for x in items):
        enc = None
    else:
        raise Unencodable("an array must hold one kind: strings, numbers or containers")
    out, used = b"[]", 2
    for x in items:
        if enc is None:
            piece, sub_used = _container(x, room)
            if sub_used == 0:
                continue
        else:
            piece = enc(x)
        out, used = _append(out, used, piece, b"[", b"]", room)
    return out, used


def command_key(cmd: bytes) -> bytes:
    """The reply's key for the command text a client sent: its first ``MAX_CMD_LEN`` bytes,
    as JSON string content.  (DPDK prints them raw; for a registered command that is the same
    text, and for anything else pktbuf escapes it so the reply stays JSON.)"""
    return escape(cmd[:MAX_CMD_LEN].decode("utf-8", "replace").encode("utf-8"))


def null_reply(key: bytes) -> bytes:
    """``{"<key>":null}``: an unknown command, or a handler that failed."""
    return b'{"' + key + b'":null}'


def reply(key: bytes, value) -> bytes:
    """The whole reply message for ``value`` (see the module docstring for the mapping).

    Raises :class:`Unencodable` for values outside it."""
    prefix = b'{"' + key + b'":'
    room = MAX_OUTPUT_LEN - len(prefix) - 1           # one byte kept for the closing brace
    if value is None:
        body = b"null"
    elif isinstance(value, str):
        body = _string(value, SINGLE_STRING_MAX)
        if len(body) >= room:                         # DPDK would write nothing at all
            body = b"null"
    elif _is_number(value):
        body = _number(value)
    elif _is_container(value):
        body = _container(value, room)[0]
    else:
        raise Unencodable(f"{type(value).__name__} is not a telemetry value")
    return prefix + body + b"}"
