"""DPDK 22.11's telemetry JSON: exact bytes, escaping, limits, and what is left out when a reply
would not fit in max_output_len."""
import json

import numpy as np
import pytest

from pktbuf.telemetry.encode import (MAX_OUTPUT_LEN, Unencodable, command_key, null_reply,
                                     reply)


def enc(value, key=b"/t"):
    return reply(key, value)


def test_exact_bytes_of_each_kind():
    # DPDK's /info reply, byte for byte (compact, keys in insertion order)
    assert enc({"version": "DPDK 22.11.11", "pid": 13393, "max_output_len": 16384}, b"/info") \
        == b'{"/info":{"version":"DPDK 22.11.11","pid":13393,"max_output_len":16384}}'
    assert enc([0, 1], b"/ethdev/list") == b'{"/ethdev/list":[0,1]}'
    assert enc(["a", "b"]) == b'{"/t":["a","b"]}'
    assert enc("text") == b'{"/t":"text"}'
    assert enc(None) == b'{"/t":null}'
    assert enc({}) == b'{"/t":{}}'
    assert enc([]) == b'{"/t":[]}'
    assert enc({"q": [1, 2], "d": {"x": "y"}}) == b'{"/t":{"q":[1,2],"d":{"x":"y"}}}'
    assert null_reply(b"/nope") == b'{"/nope":null}'


def test_numbers_int_and_u64_range():
    assert enc({"a": -(1 << 31), "b": (1 << 64) - 1, "c": True, "d": np.uint64(7),
                "e": np.False_, "f": np.array([3, 4], np.int64)}) \
        == b'{"/t":{"a":-2147483648,"b":18446744073709551615,"c":1,"d":7,"e":0,"f":[3,4]}}'
    for bad in (-(1 << 31) - 1, 1 << 64):
        with pytest.raises(Unencodable):
            enc({"a": bad})
    for bad in (1.5, b"x", object(), [1, "a"], {1: 2}, np.zeros((2, 2))):
        with pytest.raises(Unencodable):
            enc({"a": bad} if not isinstance(bad, dict) else bad)


def test_string_escaping_and_dropped_control_characters():
    out = enc({"s": 'a"b\\c\nd\re\tf\x01g\x1fh\x7f'})
    assert out == b'{"/t":{"s":"a\\"b\\\\c\\nd\\re\\tfgh\x7f"}}'
    assert json.loads(out)["/t"]["s"] == 'a"b\\c\nd\re\tfgh\x7f'
    # a C string ends at its NUL
    assert enc({"s": "ab\0cd"}) == b'{"/t":{"s":"ab"}}'
    # UTF-8 passes through, valid
    assert json.loads(enc({"s": "héllo"}))["/t"]["s"] == "héllo"


def test_string_and_name_lengths():
    v = json.loads(enc({"s": "x" * 300, "k" * 200: 1, "l": ["y" * 300]}))["/t"]
    assert v["s"] == "x" * 127                       # RTE_TEL_MAX_STRING_LEN - 1
    assert v["k" * 127] == 1                         # names are cut the same way
    assert v["l"] == ["y" * 127]
    # never cut inside a UTF-8 sequence
    s = json.loads(enc({"s": "é" * 100}))["/t"]["s"]
    assert s == "é" * 63 and len(s.encode()) == 126
    # a bare string reply may be 8191 bytes
    assert json.loads(enc("z" * 9000))["/t"] == "z" * 8191


def test_invalid_names_are_left_out():
    assert enc({"ok_1/x": 1, "bad-name": 2, "bad.name": 3, "sp ace": 4, "é": 5, "": 6}) \
        == b'{"/t":{"ok_1/x":1,"":6}}'


def test_entry_limits():
    d = json.loads(enc({f"k{i}": i for i in range(300)}))["/t"]
    assert list(d) == [f"k{i}" for i in range(256)]          # RTE_TEL_MAX_DICT_ENTRIES
    a = json.loads(enc(list(range(600))))["/t"]
    assert a == list(range(512))                              # RTE_TEL_MAX_ARRAY_ENTRIES


def test_too_big_replies_leave_entries_out_and_stay_valid():
    big = enc(["s" * 127] * 512)
    assert len(big) < MAX_OUTPUT_LEN
    items = json.loads(big)["/t"]
    assert 100 < len(items) < 512 and all(x == "s" * 127 for x in items)
    # appending one more element would have passed the limit
    assert len(big) + len(',"' + "s" * 127 + '"') >= MAX_OUTPUT_LEN
    # a nested container that does not fit is left out whole; a later small entry still fits
    # (the array alone is filled to within 130 bytes of the limit, as DPDK fills it in its
    # own buffer; with the 140 bytes of "first" in front it cannot fit)
    out = enc({"first": "f" * 127, "big": ["w" * 127] * 200, "small": 2})
    assert json.loads(out) == {"/t": {"first": "f" * 127, "small": 2}}
    # the fill rule: a container's text stays strictly shorter than the room DPDK gives it
    room = MAX_OUTPUT_LEN - len(b'{"/t":') - 1
    # n strings of 127 bytes take 130 * n + 1 bytes: "[" + n quoted strings + commas + "]"
    assert len(items) == max(n for n in range(513) if 130 * n + 1 < room) == 125


def test_command_key_is_cut_and_kept_valid():
    assert command_key(b"/x" * 40) == (b"/x" * 28)
    assert json.loads(null_reply(command_key(b'/a"b\\c\n\xff')))
